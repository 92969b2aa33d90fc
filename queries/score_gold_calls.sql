-- Every sample in $lo <= sample_index < $hi with its status, category and gold calls (name,
-- args as canonical JSON text; arguments left out are null here, read as {}; a name left out
-- is an error of the store).
select
    sample_id,
    trial,
    sample_index,
    category,
    status,
    json_transform(gold, '[{"name": "VARCHAR", "args": "JSON"}]') as calls
from samples
where sample_index >= $lo and sample_index < $hi
