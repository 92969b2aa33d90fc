-- One row per gold call of each sample (and trial: every trial has the sample's gold), in order.
with gold as (
    select
        run_id,
        sample_id,
        trial,
        json_transform(gold, '[{"name": "VARCHAR", "args": "JSON"}]') as calls
    from samples
)

select
    run_id,
    sample_id,
    trial,
    unnest(range(len(calls)))::integer as call_index,
    unnest(calls).name as name,
    coalesce(unnest(calls).args, '{}'::json) as args
from gold
where len(calls) > 0
