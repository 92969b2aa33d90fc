-- Each sample over its trials: trials, clean trials, mean tsa and tp, ahr over its arguments.
-- params: run_id = null, limit = 50
with per_trial as (
    select
        run_id,
        sample_id,
        tsa,
        tp,
        args_invalid,
        args_total,
        coalesce(tsa, 1) = 1
        and tp = 1
        and coalesce(ahr, 0) = 0
        and args_missing = 0 as success
    from scores
    where $run_id is null or run_id = $run_id
)

select
    run_id,
    sample_id,
    count(*) as trials,
    count(*) filter (where success) as successes,
    avg(tsa) as tsa,
    avg(tp) as tp,
    sum(args_invalid) / nullif(sum(args_total), 0) as ahr
from per_trial
group by run_id, sample_id
order by successes / trials asc, tp asc, run_id, sample_id
limit $limit
