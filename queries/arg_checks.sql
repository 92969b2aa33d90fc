-- Candidate AHR pairs (agent call, gold call of the same sample and tool) and every argument the agent passed in each, checked against the tool's parameters, the gold value or the declared default.
with agent_calls as (
    select
        run_id,
        sample_id,
        call_index,
        name,
        args
    from tool_calls
),

gold as (
    select
        run_id,
        sample_id,
        call_index as gold_index,
        name,
        args as gold_args
    from gold_calls
),

agent_names as (
    select
        run_id,
        sample_id,
        list(name order by call_index) as names
    from agent_calls
    group by run_id, sample_id
),

gold_names as (
    select
        run_id,
        sample_id,
        list(name order by gold_index) as names
    from gold
    group by run_id, sample_id
),

-- Where both name sequences are equal, the only pairing with the most pairs is position by position.
same_names as (
    select
        a.run_id,
        a.sample_id
    from agent_names as a
    inner join gold_names as g
        on a.run_id = g.run_id and a.sample_id = g.sample_id
    where a.names = g.names
),

pairs as (
    select
        a.run_id,
        a.sample_id,
        a.call_index,
        g.gold_index,
        a.name,
        a.args,
        g.gold_args,
        len(json_keys(g.gold_args)) as gold_keys
    from agent_calls as a
    inner join gold as g
        on a.run_id = g.run_id and a.sample_id = g.sample_id and a.name = g.name
    left join same_names as s
        on a.run_id = s.run_id and a.sample_id = s.sample_id
    where s.sample_id is null or a.call_index = g.gold_index
),

agent_args as (
    select
        p.run_id,
        p.sample_id,
        p.call_index,
        p.gold_index,
        p.name,
        p.gold_keys,
        e.key,
        e.value
    from pairs as p
    left join json_each(p.args) as e on true
),

gold_args as (
    select
        g.run_id,
        g.sample_id,
        g.gold_index,
        e.key,
        e.value
    from gold as g, json_each(g.gold_args) as e
),

checked as (
    select
        x.run_id,
        x.sample_id,
        x.call_index,
        x.gold_index,
        x.gold_keys,
        x.key,
        tp.param is not null as known,
        ga.key is not null as in_gold,
        x.value,
        coalesce(ga.value, tp.default_value) as expected
    from agent_args as x
    left join gold_args as ga
        on x.run_id = ga.run_id
        and x.sample_id = ga.sample_id
        and x.gold_index = ga.gold_index
        and x.key = ga.key
    left join tool_params as tp
        on x.name = tp.name and x.key = tp.param
)

-- invalid is null only where both values are lists or objects: Python decides those.
select
    run_id,
    sample_id,
    call_index,
    gold_index,
    gold_keys,
    key,
    in_gold,
    case
        when key is null then null
        when not known or expected is null then true
        else not json_equal(value, expected, $rel_tol, $abs_tol)
    end as invalid,
    value::varchar as value,
    expected::varchar as expected
from checked
