-- One row per tool call the agent emitted: AI messages in order, and each message's tool_calls in order.
with ai_messages as (
    select
        run_id,
        sample_id,
        position,
        json_extract(message, '$.data.tool_calls[*]') as calls
    from messages
    where type = 'ai'
),

exploded as (
    select
        run_id,
        sample_id,
        position,
        unnest(calls) as call,
        unnest(range(len(calls))) as call_in_message
    from ai_messages
    where len(calls) > 0
)

select
    run_id,
    sample_id,
    (row_number() over (
        partition by run_id, sample_id
        order by position, call_in_message
    ) - 1)::integer as call_index,
    call ->> '$.name' as name,
    coalesce(call -> '$.args', '{}'::json) as args,
    call ->> '$.id' as call_id,
    position
from exploded
