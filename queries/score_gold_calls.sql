-- Every sample in $lo <= sample_index < $hi with its status, category, own tools (JSON, or
-- null) and the gold calls of the sides $sides ('agent', 'user'; a call without a side is the
-- agent's): name, args and rules as canonical JSON text, and the side; arguments left out are
-- null here, read as {}; a name left out is an error of the store.
with gold as (
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
        ) as calls
    from samples
    where sample_index >= $lo and sample_index < $hi
)

select
    sample_id,
    trial,
    sample_index,
    category,
    status,
    tools,
    list_filter(calls, lambda c: list_contains($sides, coalesce(c.side, 'agent'))) as calls
from gold
