-- Every AI message's tool calls, parsed once: name and args (canonical JSON text), in message order.
select
    sample_index,
    position,
    list_transform(
        json_transform(
            message,
            '{"data": {"tool_calls": [{"name": "VARCHAR", "args": "JSON"}]}}'
        ).data.tool_calls,
        lambda c: struct_pack(
            name := coalesce(c.name, ''),
            args := coalesce(c.args, '{}')::varchar
        )
    ) as calls
from messages
where type = 'ai'
