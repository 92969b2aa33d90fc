-- Argument keys the agent passed that the called tool does not take, most frequent first.
-- params: run_id = null, limit = 20
with agent_args as (
    select
        c.run_id,
        c.sample_id,
        c.name as tool,
        e.key
    from tool_calls as c, json_each(c.args) as e
    where $run_id is null or c.run_id = $run_id
),

own_tools as (
    select
        run_id,
        sample_id,
        tools
    from samples
    where tools is not null and ($run_id is null or run_id = $run_id)
),

own_params as (
    select
        o.run_id,
        o.sample_id,
        t.value ->> 'name' as tool,
        p.key as param
    from own_tools as o,
        json_each(o.tools) as t,
        json_each(t.value, '$.parameters.properties') as p
),

invented as (
    select
        a.run_id,
        a.sample_id,
        a.tool,
        a.key
    from agent_args as a
    left join own_tools as o
        on a.run_id = o.run_id and a.sample_id = o.sample_id
    left join own_params as op
        on
            a.run_id = op.run_id
            and a.sample_id = op.sample_id
            and a.tool = op.tool
            and a.key = op.param
    left join tools as t
        on a.run_id = t.run_id and a.tool = t.tool and a.key = t.param
    -- a sample with tools of its own is judged by them, the others by the run's
    where case when o.sample_id is null then t.param is null else op.param is null end
)

select
    tool,
    key,
    count(*) as times,
    count(distinct run_id || '/' || sample_id) as samples
from invented
group by tool, key
order by times desc, tool, key
limit $limit
