-- One row per gold call of each sample (and trial: every trial has the sample's gold), in the
-- dataset's order, with its rules (accept, optional, group and compare as JSON; null where it
-- has none) and its side ('agent', or 'user': a call the user is to make).
with gold as (
    select
        run_id,
        sample_id,
        trial,
        json_transform(
            gold,
            '[{"name": "VARCHAR", "args": "JSON", "accept": "JSON", "optional": "JSON", "group": "JSON", "compare": "JSON", "side": "VARCHAR"}]'
        ) as calls
    from samples
)

select
    run_id,
    sample_id,
    trial,
    unnest(range(len(calls)))::integer as call_index,
    unnest(calls).name as name,
    coalesce(unnest(calls).args, '{}'::json) as args,
    unnest(calls).accept as accept,
    unnest(calls).optional as optional,
    unnest(calls)."group" as "group",
    unnest(calls).compare as compare,
    coalesce(unnest(calls).side, 'agent') as side
from gold
where len(calls) > 0
