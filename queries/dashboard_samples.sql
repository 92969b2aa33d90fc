-- Each listed sample as one JSON object of the dashboard file: its input, the agent's calls
-- (output) and the gold calls (target). The argument texts are canonical JSON already, so
-- they are joined into the text as they are, not parsed again.
select
    '{"input":' || to_json(input)
    || ',"output":{"tool_call_names":' || to_json(coalesce(agent_names, []::varchar[]))
    || ',"tool_call_args":[' || coalesce(array_to_string(agent_args, ','), '')
    || ']},"target":{"tool_call_names":' || to_json(coalesce(gold_names, []::varchar[]))
    || ',"tool_call_args":[' || coalesce(array_to_string(gold_args, ','), '')
    || ']}}' as sample
from listed
