-- For candidate AHR pairs whose arguments differ as text: the agent's invalid and valid arguments (undecided: both values are lists or objects) and the gold keys it left out.
with agent_args as (
    select
        pair,
        name,
        unnest(map_entries(json_object_map(agent_args))) as e
    from pair_args
),

gold_args as (
    select
        pair,
        unnest(map_entries(json_object_map(gold_args))) as e
    from pair_args
),

agent_values as (
    select
        pair,
        name,
        e.key as key,
        json_kind(e.value) as kind,
        try_cast(e.value as double) as num,
        json_text(e.value) as txt
    from agent_args
),

gold_values as (
    select
        pair,
        e.key as key,
        json_kind(e.value) as kind,
        try_cast(e.value as double) as num,
        json_text(e.value) as txt
    from gold_args
),

defaults as (
    select
        name,
        param,
        has_default,
        json_kind(default_value) as kind,
        try_cast(default_value as double) as num,
        json_text(default_value) as txt
    from tool_params
),

checked as (
    select
        a.pair,
        g.key is not null as in_gold,
        case
            when d.param is null then true
            when g.key is null and not d.has_default then true
            else not values_equal(
                a.kind, a.num, a.txt,
                coalesce(g.kind, d.kind), coalesce(g.num, d.num), coalesce(g.txt, d.txt),
                $rel_tol, $abs_tol
            )
        end as invalid
    from agent_values as a
    left join gold_values as g
        on a.pair = g.pair and a.key = g.key
    left join defaults as d
        on a.name = d.name and a.key = d.param
),

per_pair as (
    select
        pair,
        count(*) filter (where invalid) as invalid,
        count(*) filter (where not invalid) as valid,
        count(*) filter (where invalid is null) as undecided,
        count(*) filter (where in_gold) as matched
    from checked
    group by pair
),

gold_keys as (
    select
        pair,
        count(*) as n
    from gold_values
    group by pair
)

select
    p.pair,
    coalesce(v.invalid, 0)::integer as invalid,
    coalesce(v.valid, 0)::integer as valid,
    coalesce(v.undecided, 0)::integer as undecided,
    (coalesce(k.n, 0) - coalesce(v.matched, 0))::integer as missing
from pair_args as p
left join per_pair as v
    on p.pair = v.pair
left join gold_keys as k
    on p.pair = k.pair
