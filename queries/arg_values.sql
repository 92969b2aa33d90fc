-- Every key of each distinct arguments object, with its value as canonical JSON text (and a string's decoded text).
with members as (
    select
        id,
        unnest(map_entries(json_object_map(args))) as e
    from distinct_args
)

select
    id,
    e.key as key,
    coalesce(e.value::varchar, 'null') as value,
    case when json_type(e.value) = 'VARCHAR' then e.value ->> '$' end as text
from members
