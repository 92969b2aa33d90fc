"""langchain-openai's reading of tool-call arguments that are JSON but no object, corrected.

A model may write a call's arguments as a JSON string (``"{\\"a\\": 1}"``) or a list
(``[1, 2]``). langchain-openai parses them and puts the value in the message's
``tool_calls``, whose ``args`` must be an object: pydantic refuses the message
(``ValidationError: 1 validation error for AIMessage``), and the model's whole reply is lost
with its sample. Arguments that are no JSON at all it keeps in ``invalid_tool_calls``, with
their text. Arguments that are no object are the agent's behaviour as much (see
docs/importing.md): they are kept the same way, and the message is stored.
"""

from __future__ import annotations

import sys
from typing import Any

# the module whose parse_tool_call langchain-openai's messages are read with
_BASE = "langchain_openai.chat_models.base"


def keep_non_object_arguments_invalid() -> None:
    """Have langchain-openai (when it is imported) keep a call whose arguments are no JSON
    object in ``invalid_tool_calls``, as it keeps one whose arguments are no JSON; idempotent."""
    base: Any = sys.modules.get(_BASE)
    if base is None or getattr(base.parse_tool_call, "tcbreplay", False):
        return
    from langchain_core.exceptions import OutputParserException

    parse = base.parse_tool_call

    def parse_tool_call(raw_tool_call: dict[str, Any], **kwargs: Any) -> Any:
        parsed = parse(raw_tool_call, **kwargs)
        if parsed is not None and not isinstance(parsed.get("args"), dict):
            function = raw_tool_call["function"]
            # (the caller keeps the call in invalid_tool_calls, with this as its error)
            raise OutputParserException(
                f"Function {function['name']} arguments:\n\n{function['arguments']}\n\n"
                "are not a JSON object"
            )
        return parsed

    parse_tool_call.tcbreplay = True  # type: ignore[attr-defined]
    base.parse_tool_call = parse_tool_call
