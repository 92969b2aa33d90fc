-- One row per gold call of each sample, in the dataset's order.
with gold as (
    select
        run_id,
        sample_id,
        json_extract(gold, '$[*]') as calls
    from samples
),

exploded as (
    select
        run_id,
        sample_id,
        unnest(calls) as call,
        unnest(range(len(calls))) as call_index
    from gold
    where len(calls) > 0
)

select
    run_id,
    sample_id,
    call_index::integer as call_index,
    call ->> '$.name' as name,
    coalesce(call -> '$.args', '{}'::json) as args
from exploded
