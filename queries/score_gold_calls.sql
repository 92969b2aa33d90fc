-- Every sample in $lo <= sample_index < $hi with its status, category, own tools (JSON, or
-- null) and its gold calls: name, args and rules as canonical JSON text, and the side ('agent',
-- 'user'; a call without one is the agent's, and scoring keeps the calls of the side it
-- scores: load_flat); arguments left out are null here, read as {}; a name left out is an
-- error of the store; and the hash of its (sample_id, trial) key (the same on every machine:
-- parts scored apart are checked for repeated keys by it).
select
    sample_id,
    trial,
    sample_index,
    category,
    status,
    tools,
    json_transform(
        gold,
        '[{"name": "VARCHAR", "args": "JSON", "accept": "JSON", "optional": "JSON", "group": "JSON", "compare": "JSON", "side": "VARCHAR"}]'
    ) as calls,
    hash(sample_id, trial) as key
from samples
where sample_index >= $lo and sample_index < $hi
