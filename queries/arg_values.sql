-- Every key of each distinct arguments object (anything but an object has none), with its
-- value as canonical JSON text and a string's decoded text. A key is looked up by its JSON
-- pointer ('~' and '/' escaped), so any key text works.
with members as (
    select
        id,
        args,
        unnest(json_keys(args)) as key
    from distinct_args
),

valued as (
    select
        id,
        key,
        json_extract(args, '/' || replace(replace(key, '~', '~0'), '/', '~1'))::varchar as value
    from members
)

select
    id,
    key,
    value,
    case when starts_with(value, '"') then value ->> '$' end as text
from valued
