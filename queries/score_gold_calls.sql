-- Every sample in $lo <= sample_index < $hi with its status, category, own tools (JSON, or
-- null) and gold calls (name, args and rules as canonical JSON text; arguments left out are
-- null here, read as {}; a name left out is an error of the store).
select
    sample_id,
    trial,
    sample_index,
    category,
    status,
    tools,
    json_transform(
        gold,
        '[{"name": "VARCHAR", "args": "JSON", "accept": "JSON", "optional": "JSON", "group": "JSON"}]'
    ) as calls
from samples
where sample_index >= $lo and sample_index < $hi
