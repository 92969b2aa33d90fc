-- Which tool the agent called where gold had which, position by position (null: no call there).
-- The agent's gold calls only, numbered among themselves (a user's gold calls, as τ²-bench's
-- dual control has them, are the user's to make: tool_calls holds the agent's).
-- params: run_id = null
with gold as (
    select
        run_id,
        sample_id,
        trial,
        (row_number() over (partition by run_id, sample_id, trial order by call_index) - 1)::integer
            as call_index,
        name
    from gold_calls
    where side = 'agent' and ($run_id is null or run_id = $run_id)
),

agent as (
    select
        run_id,
        sample_id,
        trial,
        call_index,
        name
    from tool_calls
    where $run_id is null or run_id = $run_id
),

aligned as (
    select
        g.name as gold_tool,
        a.name as agent_tool
    from gold as g
    full outer join agent as a
        on g.run_id = a.run_id
        and g.sample_id = a.sample_id
        and g.trial = a.trial
        and g.call_index = a.call_index
)

select
    gold_tool,
    agent_tool,
    count(*) as calls
from aligned
group by gold_tool, agent_tool
order by gold_tool nulls last, calls desc, agent_tool nulls last
