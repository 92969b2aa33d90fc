-- The tool calls of every message of the sides $sides in samples $lo <= sample_index < $hi:
-- the agent's AI messages ('agent') and the user's own calls, which human messages carry as
-- an AI message does ('user'): one row per message with its sample_index and position, and
-- its data.tool_calls as DuckDB writes JSON (canonical text; '' when the message has none),
-- which the kernels (calls.pxi) split into each call's name and args.
select
    sample_index,
    position,
    coalesce(json_extract(message, '$.data.tool_calls')::varchar, '') as tool_calls
from messages
where
    (
        (type = 'ai' and list_contains($sides, 'agent'))
        or (type = 'human' and list_contains($sides, 'user'))
    )
    and sample_index >= $lo
    and sample_index < $hi
