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

invented as (
    select
        a.run_id,
        a.sample_id,
        a.tool,
        a.key
    from agent_args as a
    left join tools as t
        on a.run_id = t.run_id and a.tool = t.tool and a.key = t.param
    where t.param is null
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
