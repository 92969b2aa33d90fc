-- Every sample in $lo <= sample_index < $hi with its status, category, own tools (JSON, or
-- null), its gold calls as stored ('' for none), and the hash of its (sample_id, trial) key
-- (the same on every machine: parts scored apart are checked for repeated keys by it).
-- The gold text is checked as JSON here (the cast fails on text that is not), and split in
-- the kernels (gold.pxi) into each call's name, args, rules and side, as
-- json_transform(gold, '[{"name": "VARCHAR", "args": "JSON", "accept": "JSON",
-- "optional": "JSON", "group": "JSON", "compare": "JSON", "side": "VARCHAR"}]') reads them
-- (arguments left out are null there, read as {}; a name left out is an error of the store;
-- scoring keeps the calls of the side it scores: load_flat), at a third of its cost.
select
    sample_id,
    trial,
    sample_index,
    category,
    status,
    tools,
    coalesce(gold, 'null') as calls,
    hash(sample_id, trial) as key
from samples
where sample_index >= $lo and sample_index < $hi
