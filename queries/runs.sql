-- The runs in the store, oldest first, with the run-level numbers of each one's latest scoring;
-- a scoring of files the run has replaced since (resumed, or a shard folded in) shows no
-- numbers, its name marked stale.
with latest as (
    select
        run_id,
        scoring,
        tsa,
        tp,
        ahr,
        stale
    from scorings
    qualify row_number() over (
        partition by run_id
        order by scored_at desc nulls last, scoring
    ) = 1
)

select
    r.run_id,
    case when not l.stale then l.tsa end as tsa,
    case when not l.stale then l.tp end as tp,
    case when not l.stale then l.ahr end as ahr,
    case when l.stale then l.scoring || ' (stale)' else l.scoring end as scoring,
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
