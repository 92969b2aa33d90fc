-- The runs in the store, oldest first, with the run-level numbers of each one's latest scoring.
with latest as (
    select
        run_id,
        scoring,
        tsa,
        tp,
        ahr
    from scorings
    qualify row_number() over (
        partition by run_id
        order by scored_at desc nulls last, scoring
    ) = 1
)

select
    r.run_id,
    l.tsa,
    l.tp,
    l.ahr,
    l.scoring,
    r.ok,
    r.errors,
    r.n_samples,
    r.status,
    try_cast(r.created_at as timestamptz) as created_at,
    r.model,
    r.simulated
from runs as r
left join latest as l on r.run_id = l.run_id
order by r.created_at, r.run_id
