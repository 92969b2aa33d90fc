-- Every AI message's tool calls in samples $lo <= sample_index < $hi, parsed once: name and
-- args (canonical JSON text), in message order. A call without a name or arguments has them
-- null here (read as '' and {}).
select
    sample_index,
    position,
    json_transform(
        message,
        '{"data": {"tool_calls": [{"name": "VARCHAR", "args": "JSON"}]}}'
    ).data.tool_calls as calls
from messages
where type = 'ai' and sample_index >= $lo and sample_index < $hi
