-- Every key of each distinct arguments object (anything but an object has none), with its
-- value as canonical JSON text and a string's decoded text. Objects of up to 64 keys are
-- split by json_keys and a lookup of each key by its JSON pointer ('~' and '/' escaped, so
-- any key text works); larger ones by a cast to a map, which parses an object once however
-- many keys it has (and fails on a repeated key).
with objects as (
    select
        id,
        args,
        json_keys(args) as keys
    from distinct_args
),

few as (
    select
        id,
        args,
        unnest(keys) as key
    from objects
    where len(keys) <= 64
),

many as (
    select
        id,
        unnest(map_entries(args::json::map(varchar, json))) as e
    from objects
    where len(keys) > 64
),

members as (
    select
        id,
        key,
        json_extract(args, '/' || replace(replace(key, '~', '~0'), '/', '~1'))::varchar as value
    from few
    union all
    -- the cast makes a JSON null member a SQL NULL
    select
        id,
        e.key as key,
        coalesce(e.value::varchar, 'null') as value
    from many
)

select
    id,
    key,
    value,
    case when starts_with(value, '"') then value ->> '$' end as text
from members
