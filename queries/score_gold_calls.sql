-- Every sample with its status, category and gold calls (name, args as canonical JSON text).
select
    sample_id,
    sample_index,
    category,
    status,
    list_transform(
        json_transform(gold, '[{"name": "VARCHAR", "args": "JSON"}]'),
        lambda c: struct_pack(name := c.name, args := coalesce(c.args, '{}')::varchar)
    ) as calls
from samples
