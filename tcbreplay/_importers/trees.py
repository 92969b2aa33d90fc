"""A trace as a tree of model and tool calls (LangSmith's runs, Langfuse's observations), told as
a sample's messages.

The messages are those the first model call was given, then, in the order the calls ran,
each model call's answer (a model turn, with its tool calls) and each tool call's result (a
tool message, for the call whose id it names, else the first unanswered call of its name). A
result no tool call of the trace gave, but a later model call was given, is taken from that
model call's messages (a tool run outside the tracing). A call id may come again in a later
turn (servers that number each turn's calls from ``call_0``): a result answers the latest
unanswered call of its id, and one taken from a model call's messages the call of its turn.

Messages are read in each shape these traces hold them: LangChain's serialised form
(``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``),
``messages_to_dict``'s (``{"type", "data"}``), a message's own dump (``{"type": "ai",
"content", ...}``) and role dicts (``{"role": "assistant", ...}``) whose tool calls are OpenAI's
(``function.arguments`` as JSON text) or LangChain's (``name``, ``args``).
"""

from __future__ import annotations

from typing import Any

from tcbreplay import _json
from tcbreplay._importers import openai
from tcbreplay.errors import TraceError

_LC_KINDS = {
    "SystemMessage": "system", "SystemMessageChunk": "system",
    "HumanMessage": "human", "HumanMessageChunk": "human",
    "AIMessage": "ai", "AIMessageChunk": "ai",
    "ToolMessage": "tool", "ToolMessageChunk": "tool",
    "ChatMessage": "chat", "FunctionMessage": "function",
}  # fmt: skip
_ROLES = {"user": "human", "assistant": "ai", "system": "system", "developer": "system",
          "tool": "tool"}  # fmt: skip


class Conversation:
    """A trace's messages, told call by call (see the module docstring)."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        # (call id, tool name, arguments, turn: the model turns up to its own) of the calls
        # not yet answered
        self._pending: list[tuple[str, str, Any, int]] = []
        self._answered: set[str] = set()
        self._turns = 0

    def model_call(self, given: list[Any], answer: Any) -> None:
        """A model call: the messages it was given, and its answer (None if it failed)."""
        if not self.messages:
            for message in given:
                self._add(message)
        else:
            turn = 0  # the model turns of ``given`` up to the message
            for message in given:
                turn += message.type == "ai"
                if message.type == "tool" and self._open(message.tool_call_id, turn):
                    self._add(message)  # a result no tool call of the trace gave
        if answer is not None:
            self._add(answer)

    def tool_call(
        self, name: str, content: Any, call_id: str | None, status: str = "success",
        args: Any = None,
    ) -> None:  # fmt: skip
        """A tool call's result; ``call_id`` None: the unanswered call of its name made with
        ``args`` (the tool run's inputs: parallel calls of one tool may end in any order),
        else the first unanswered call of its name."""
        from langchain_core.messages import ToolMessage

        if call_id and call_id in self._answered and not self._waiting(call_id):
            return  # among the messages already
        if not call_id:
            named = [p for p in self._pending if p[1] == name] or self._pending
            same = [p for p in named if args is not None and p[2] == args]
            call_id = (same or named)[0][0] if named else ""
        self._add(ToolMessage(content=content, tool_call_id=call_id, name=name, status=status))

    def _waiting(self, call_id: str) -> bool:
        return any(p[0] == call_id for p in self._pending)

    def _open(self, call_id: str, turn: int) -> bool:
        """Whether a result of a model call's messages, after its ``turn``-th model turn,
        answers a call not yet answered: the call of its id, of that turn where the id was
        answered before (made again in a later turn)."""
        if call_id not in self._answered:
            return self._waiting(call_id)
        return any(p[0] == call_id and p[3] == turn for p in self._pending)

    def _add(self, message: Any) -> None:
        if message.type == "tool":
            self._insert_result(message)
        else:
            self.messages.append(message)
            self._turns += message.type == "ai"
        for call in getattr(message, "tool_calls", None) or []:
            self._pending.append(
                (call.get("id") or "", call.get("name") or "", call.get("args"), self._turns)
            )
        if message.type == "tool":
            self._answered.add(message.tool_call_id)
            # (the latest call of the id: one made again later is the one waiting)
            waiting = [k for k, p in enumerate(self._pending) if p[0] == message.tool_call_id]
            if waiting:
                del self._pending[waiting[-1]]

    def _insert_result(self, result: Any) -> None:
        """A tool result after the results of calls made before its call in the same turn
        (parallel calls may end in any order; the agent reads their results in call order)."""
        turn = next(
            (k for k in range(len(self.messages) - 1, -1, -1) if self.messages[k].type != "tool"),
            -1,
        )
        calls = (getattr(self.messages[turn], "tool_calls", None) or []) if turn >= 0 else []
        order = {call.get("id"): n for n, call in enumerate(calls)}
        rank = order.get(result.tool_call_id, len(order))
        at = len(self.messages)
        while at > turn + 1 and order.get(self.messages[at - 1].tool_call_id, len(order)) > rank:
            at -= 1
        self.messages.insert(at, result)


def input_text(messages: list[Any]) -> str | None:
    """The text of the first user message."""
    for message in messages:
        if message.type == "human":
            return str(message.text)
    return None


def calls_of(messages: list[Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The tool calls of the messages' model turns: each one's name and argument names."""
    return tuple(
        (str(call.get("name") or ""), tuple(call.get("args") or {}))
        for m in messages
        if m.type == "ai"
        for call in getattr(m, "tool_calls", None) or []
    )


def offered_tools(value: Any) -> list[dict[str, Any]]:
    """The tool schemas a model call was offered, where it keeps them (a list of schemas,
    OpenAI's or plain; a map of name to schema, as JSON text or parsed): those that have a
    name (in a map, the key is the name of a schema without one)."""
    named = list(value.items()) if isinstance(value, dict) else None
    if named is None and not isinstance(value, list):
        return []
    out = []
    for key, tool in named or [(None, t) for t in value]:
        if isinstance(tool, str):
            try:
                tool = _json.loads(tool)
            except ValueError:  # not JSON, or beyond the limits: not a schema to offer
                continue
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("function"), dict):  # OpenAI's {"type": "function", ...}
            tool = {**tool, "function": _named(tool["function"], key)}
        else:
            tool = _named(tool, key)
        if tool_name(tool) is not None:
            out.append(tool)
    return out


def tool_name(tool: dict[str, Any]) -> str | None:
    """The name of a tool schema, OpenAI's (``function.name``) or plain (``name``)."""
    spec = tool.get("function")
    name = (spec if isinstance(spec, dict) else tool).get("name")
    return name if isinstance(name, str) else None


def _named(spec: dict[str, Any], key: str | None) -> dict[str, Any]:
    return {"name": key, **spec} if key is not None and "name" not in spec else spec


def lc_kind(value: dict[str, Any]) -> str | None:
    """The message kind of a LangChain serialised object (None for another object)."""
    if value.get("lc") == 1 and value.get("type") == "constructor":
        ids = value.get("id")
        return _LC_KINDS.get(ids[-1]) if isinstance(ids, list) and ids else None
    return None


def message(value: Any, where: str) -> Any:
    """A message in any of the shapes these traces hold, as a LangChain message (a string is
    a user's)."""
    from langchain_core.messages import HumanMessage, messages_from_dict

    if isinstance(value, str):
        return HumanMessage(value)
    if not isinstance(value, dict):
        raise TraceError(f"{where}: a message must be an object")
    if value.get("lc") == 1:
        kind, data = lc_kind(value), value.get("kwargs")
        if kind is None or not isinstance(data, dict):
            raise TraceError(f"{where}: a LangChain serialised object that is no message")
    elif isinstance(value.get("role"), str) and "type" not in value:
        if _openai_calls(value):
            return openai.convert([value], {}, where)[0]
        kind = _ROLES.get(value["role"])
        if kind is None:
            raise TraceError(f"{where}: role {value['role']!r}: not a message's role")
        # (the OpenAI SDK's message dump names every field: "tool_calls": null on a turn
        # without calls, "function_call", "refusal", "audio" null too)
        data = {k: v for k, v in value.items() if k != "role" and (v is not None or k == "content")}
        if value["role"] == "developer":
            data = {**data, "additional_kwargs": {"__openai_role__": "developer"}}
    elif isinstance(value.get("type"), str):
        kind = value["type"]
        data = value["data"] if isinstance(value.get("data"), dict) else value
    else:
        raise TraceError(f"{where}: not a message (LangChain's, or one with a role)")
    data = {k: v for k, v in data.items() if k != "type"}
    if kind == "ai" and isinstance(data.get("tool_calls"), list):
        data["tool_calls"] = [
            {"id": None, **c} if isinstance(c, dict) else c for c in data["tool_calls"]
        ]
    if data.get("content") is None:  # a turn of tool calls only
        data["content"] = ""
    try:
        (found,) = messages_from_dict([{"type": kind, "data": data}])
    except Exception as exc:  # any shape LangChain cannot load is bad input
        detail = " ".join(str(exc).split())[:200]
        what = f"not a LangChain message ({type(exc).__name__}: {detail})"
        raise TraceError(f"{where}: {what}") from exc
    return found


def _openai_calls(value: dict[str, Any]) -> bool:
    """Whether a role dict's tool calls are OpenAI's (``function``), not LangChain's."""
    calls = value.get("tool_calls")
    return isinstance(calls, list) and any(isinstance(c, dict) and "function" in c for c in calls)


# the names of a model call's input and output token counts in a usage object (LangChain's,
# OpenAI's, Langfuse's)
_IN = ("input", "input_tokens", "prompt_tokens", "promptTokens")
_OUT = ("output", "output_tokens", "completion_tokens", "completionTokens")


def usage_of(usage: Any, where: str) -> dict[str, int] | None:
    """A usage object's token counts as a message's ``usage_metadata`` (None where it holds
    none); a count that is no whole number of 0 or more is refused."""
    if not isinstance(usage, dict):
        return None
    counts = []
    for names in (_IN, _OUT):
        n = next((usage[k] for k in names if usage.get(k) is not None), None)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise TraceError(f"{where}: a token count of {n!r}: not a whole number of 0 or more")
        counts.append(n)
    if counts == [None, None]:
        return None
    given, made = counts[0] or 0, counts[1] or 0
    return {"input_tokens": given, "output_tokens": made, "total_tokens": given + made}
