-- The tool calls of every message of the types $types in samples $lo <= sample_index < $hi:
-- the agent's AI messages ('ai') and the user's own calls, which human messages carry as an
-- AI message does ('human'): one row per message with its sample_index and position, and its
-- calls (data.tool_calls as DuckDB writes JSON: canonical text; '' when the message has none),
-- which the kernels (calls.pxi) split into each call's name and args. The type is a list the
-- scan filters on, so row groups of other types are skipped unread.
select
    sample_index,
    position,
    coalesce(calls, '') as tool_calls
from messages
where
    list_contains($types, type)
    and sample_index >= $lo
    and sample_index < $hi
