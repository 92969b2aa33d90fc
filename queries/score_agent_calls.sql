-- Every tool call of the AI messages in samples $lo <= sample_index < $hi, parsed once: one
-- row per call with its message's sample_index and position, name and args (canonical JSON
-- text), in message order and each message's call order. A call without a name or
-- arguments has them null here (read as '' and {}).
with ai_messages as (
    select
        sample_index,
        position,
        json_transform(
            message,
            '{"data": {"tool_calls": [{"name": "VARCHAR", "args": "JSON"}]}}'
        ).data.tool_calls as calls
    from messages
    where type = 'ai' and sample_index >= $lo and sample_index < $hi
)

select
    sample_index,
    position,
    unnest(calls, recursive := true)
from ai_messages
