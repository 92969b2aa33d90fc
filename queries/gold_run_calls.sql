-- Each sample and trial of a run with the tool calls it made, in order, as gold calls: a JSON
-- list of {"name", "args"} ('[]' for a sample that made none).
with calls as (
    select
        sample_id,
        trial,
        call_index,
        name,
        args
    from tool_calls
),

gold as (
    select
        sample_id,
        trial,
        to_json(list({'name': name, 'args': args} order by call_index))::varchar as gold
    from calls
    group by
        sample_id,
        trial
)

select
    s.sample_id,
    s.trial,
    coalesce(g.gold, '[]') as gold
from samples as s
left join gold as g using (sample_id, trial)
