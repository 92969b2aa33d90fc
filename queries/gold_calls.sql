-- One row per gold call of each sample (and trial: every trial has the sample's gold), in the
-- dataset's order, with its rules (accept, optional and group as JSON; null where it has none).
with gold as (
    select
        run_id,
        sample_id,
        trial,
        json_transform(
            gold,
            '[{"name": "VARCHAR", "args": "JSON", "accept": "JSON", "optional": "JSON", "group": "JSON"}]'
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
    unnest(calls)."group" as "group"
from gold
where len(calls) > 0
