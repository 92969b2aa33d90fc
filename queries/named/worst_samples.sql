-- The samples (and trials) with the lowest trajectory precision, with their input, tsa and ahr.
-- params: run_id = null, scoring = "spec", limit = 20
with scored as (
    select
        run_id,
        sample_id,
        trial,
        tp,
        tsa,
        ahr,
        args_invalid,
        args_total,
        n_gold,
        n_agent,
        status
    from scores_all
    where scoring = $scoring and ($run_id is null or run_id = $run_id)
),

inputs as (
    select
        run_id,
        sample_id,
        trial,
        input
    from samples
)

select
    s.run_id,
    s.sample_id,
    s.trial,
    s.tp,
    s.tsa,
    s.ahr,
    s.n_gold,
    s.n_agent,
    s.status,
    i.input
from scored as s
left join inputs as i
    on s.run_id = i.run_id and s.sample_id = i.sample_id and s.trial = i.trial
order by s.tp asc, s.ahr desc nulls last, s.run_id, s.sample_id, s.trial
limit $limit
