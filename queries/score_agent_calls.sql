-- The tool calls of every AI message in samples $lo <= sample_index < $hi: one row per
-- message with its sample_index and position, and its data.tool_calls as DuckDB writes JSON
-- (canonical text; '' when the message has none), which the kernels (calls.pxi) split into
-- each call's name and args.
select
    sample_index,
    position,
    coalesce(json_extract(message, '$.data.tool_calls')::varchar, '') as tool_calls
from messages
where type = 'ai' and sample_index >= $lo and sample_index < $hi
