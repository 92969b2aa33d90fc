-- Token cost and latency per sample and trial: model and tool time, messages, tokens, most first.
-- params: run_id = null, limit = 50
with per_message as (
    select
        run_id,
        sample_id,
        trial,
        count(*) as messages,
        count(*) filter (where type = 'ai') as model_turns,
        sum(input_tokens) as input_tokens,
        sum(output_tokens) as output_tokens,
        sum(latency_s) filter (where type = 'ai') as model_s,
        sum(latency_s) filter (where type = 'tool') as tool_s
    from messages
    where $run_id is null or run_id = $run_id
    group by run_id, sample_id, trial
),

per_sample as (
    select
        run_id,
        sample_id,
        trial,
        status,
        attempts,
        duration_s
    from samples
)

select
    m.run_id,
    m.sample_id,
    m.trial,
    s.status,
    s.attempts,
    m.messages,
    m.model_turns,
    m.input_tokens,
    m.output_tokens,
    -- (null when neither count is known: an import whose traces carry no token counts)
    case
        when m.input_tokens is null and m.output_tokens is null then null
        else coalesce(m.input_tokens, 0) + coalesce(m.output_tokens, 0)
    end as total_tokens,
    round(m.model_s, 4) as model_s,
    round(m.tool_s, 4) as tool_s,
    round(s.duration_s, 4) as duration_s
from per_message as m
inner join per_sample as s
    on m.run_id = s.run_id and m.sample_id = s.sample_id and m.trial = s.trial
order by total_tokens desc, m.run_id, m.sample_id, m.trial
limit $limit
