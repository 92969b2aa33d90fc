"""Request fingerprints: a model request in a canonical, provider-neutral form, and its hash.

A model request is canonical as ``{"system", "messages", "tools", "params"}``, and its
fingerprint is the sha256 of that object as canonical JSON (keys sorted, no spaces,
non-ASCII kept; :func:`canonical_json`). Exactly this enters it:

- ``system``: the text of the system messages the request starts with (system or developer
  messages, joined by a blank line), or, where it starts with none, the run's system prompt
  (``""`` when there is none).
- ``messages``: every other message in order, each one of
  ``{"role": "user", "content"}``, ``{"role": "assistant", "content", "tool_calls"}``,
  ``{"role": "tool", "name", "content"}`` or ``{"role": "system", "content"}`` (a system
  message after the first other message). ``tool_calls`` is ``[{"name", "arguments"}]`` in
  the message's order (invalid calls, whose arguments are not an object, after them with
  ``{INVALID_ARGUMENTS: their text}`` as ``arguments``: :func:`message_calls`); a tool
  message's ``name`` is that of the call it answers
  (found by its call id), else its own, and its ``call`` the place of that call among its
  message's calls (which result answers which call: results given to each other's calls ask
  the model something else), absent where no call has its id.
- ``tools``: ``{name: {"description", "parameters", "required", ...}}``: each tool's
  description, its parameters' JSON schemas by name (the ``properties`` of its parameters
  schema), its required parameters sorted, and any other key of that schema but ``type``.
- ``params``: the sampling settings that change answers (:data:`SAMPLING`), those set only;
  an imported run records none, and its requests' fingerprints leave them out.

Content is text: a string, or a list of parts whose text parts are joined (a list with
other parts, such as images, stays a list of parts without their ids). Parts that repeat
what ``tool_calls`` holds, and reasoning parts, are left out. A tool message's content that
is a JSON object or array is that value, not its text. Numbers are in one form everywhere:
a float with an integral value is that integer (``25.0`` is ``25``), so a tool that answers
``{"b": 1, "a": 25.0}`` where it answered ``{"a": 25, "b": 1}`` asks the model the same.

Never in it: ids (of messages and of tool calls), names of user and assistant messages,
timestamps, usage, latency, response metadata, the model's name, tcbreplay's own fields (a
tool's role) and how requests travel (base URL, timeouts, retries).

The messages here are LangChain's (objects, or dicts as ``message_to_dict`` writes them, the
form the store keeps): other providers' requests become those first (the importers' readers
turn OpenAI and Anthropic messages into them).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tcbreplay._store.schema import INVALID_ARGUMENTS

# settings that change what a model answers, under the name the canonical form gives them
SAMPLING = (
    "temperature", "top_p", "top_k", "max_tokens", "seed", "stop", "frequency_penalty",
    "presence_penalty", "reasoning_effort", "thinking", "response_format",
)  # fmt: skip
_ALIASES = {
    "max_output_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "stop_sequences": "stop",
}
# content parts that repeat the tool calls, or hold the model's reasoning
_DROPPED_PARTS = frozenset(
    {"tool_use", "tool_call", "function_call", "thinking", "redacted_thinking", "reasoning"}
)
# keys of a content part that say nothing the model reads
_VOLATILE_PART_KEYS = frozenset({"id", "index", "cache_control", "extras", "annotations"})
_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}

# a canonical request: {"system", "messages", "tools", "params"}
Request = dict[str, Any]


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text: keys sorted, no spaces, non-ASCII kept."""
    return _ENCODER.encode(value)


# json.dumps with these options makes an encoder per call (a fifth of its time on a message)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(request: Request) -> str:
    """The sha256 of a canonical request's canonical JSON."""
    return sha256_text(canonical_json(request))


def normalized(value: Any) -> Any:
    """A JSON value with its numbers in one form (an integral float as that integer) and
    its keys as strings."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**63:
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): normalized(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalized(v) for v in value]
    return value


def content(value: Any) -> Any:
    """A message's content as the canonical form has it (see the module)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return str(value)
    parts: list[Any] = []
    for part in value:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if isinstance(kind, str) and kind in _DROPPED_PARTS:  # (a type may be any JSON)
                continue
            if kind == "text" or (kind is None and "text" in part):
                parts.append({"type": "text", "text": str(part.get("text") or "")})
            else:
                kept = {k: v for k, v in part.items() if k not in _VOLATILE_PART_KEYS}
                parts.append(normalized(kept))
        else:
            parts.append(normalized(part))
    if all(p.get("type") == "text" for p in parts if isinstance(p, dict)) and all(
        isinstance(p, dict) for p in parts
    ):
        return "".join(p["text"] for p in parts)
    return parts


def tool_content(value: Any) -> Any:
    """A tool message's content: a JSON object or array it holds as text is that value."""
    text = content(value)
    if isinstance(text, str):
        stripped = text.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                return normalized(json.loads(stripped))
            except (ValueError, RecursionError):
                return text
    return text


def _data(message: Any) -> tuple[str, Mapping[str, Any]]:
    """A message's type and fields, from a LangChain message or its ``message_to_dict``."""
    if isinstance(message, Mapping):
        if "data" in message and isinstance(message["data"], Mapping):
            return str(message.get("type")), message["data"]
        return str(message.get("type")), message
    kind = str(message.type)
    data = {"content": message.content, "name": getattr(message, "name", None)}
    # only the fields a message of its type has: asking a pydantic message for another is slow
    if kind == "tool":
        data["tool_call_id"] = getattr(message, "tool_call_id", None)
    elif kind not in ("human", "system"):
        data["tool_calls"] = getattr(message, "tool_calls", None)
        data["invalid_tool_calls"] = getattr(message, "invalid_tool_calls", None)
    return kind, data


def _invalid(args: Any) -> bool:
    """Whether a call's arguments are the text of ones that are no JSON object, as the store
    keeps them (``{INVALID_ARGUMENTS: text}``)."""
    return isinstance(args, Mapping) and len(args) == 1 and INVALID_ARGUMENTS in args


def message_calls(data: Mapping[str, Any]) -> list[tuple[str | None, str, Any]]:
    """A message's calls (id, name, arguments) in the canonical order: the valid ones, then
    the invalid ones, each in its message's order. An invalid call's arguments are
    ``{INVALID_ARGUMENTS: text}`` whether LangChain kept it in ``invalid_tool_calls`` (its
    text as ``args``) or a reader of OpenAI's or Anthropic's form in ``tool_calls``: so a
    recorded message and the same message sent back over either API are one."""
    valid: list[tuple[str | None, str, Any]] = []
    invalid: list[tuple[str | None, str, Any]] = []
    for call in data.get("tool_calls") or []:
        args = normalized(call.get("args"))
        found = (str(call["id"]) if call.get("id") else None, str(call.get("name") or ""), args)
        (invalid if _invalid(args) else valid).append(found)
    for call in data.get("invalid_tool_calls") or []:
        text = {INVALID_ARGUMENTS: call.get("args")}
        invalid.append(
            (str(call["id"]) if call.get("id") else None, str(call.get("name") or ""), text)
        )
    return valid + invalid


# one message in the canonical form, before its conversation is known: its role, its item (a
# tool message named by itself), its tool call id, and the calls it makes by id (each call's
# name and place among them)
Entry = tuple[str, dict[str, Any], str | None, dict[str, tuple[str, int]]]


def message_entry(message: Any) -> Entry:
    """One message's part of the canonical form (:func:`canonical_messages` puts a
    conversation's together): what does not depend on the messages before it."""
    kind, data = _data(message)
    role = _ROLES.get(kind, kind)
    call_id = None
    calls: dict[str, tuple[str, int]] = {}
    if role == "assistant":
        made = message_calls(data)
        for k, (made_id, name, _) in enumerate(made):
            if made_id:
                calls[made_id] = (name, k)
        listed = [{"name": name, "arguments": args} for _, name, args in made]
        item = {"role": role, "content": content(data.get("content")), "tool_calls": listed}
    elif role == "tool":
        call_id = data.get("tool_call_id")
        item = {
            "role": role,
            "name": str(data.get("name") or ""),
            "content": tool_content(data.get("content")),
        }
    else:
        item = {"role": role, "content": content(data.get("content"))}
    return role, item, str(call_id) if call_id else None, calls


def canonical_messages(
    messages: Iterable[Any], system: str = "", *, leading_system: bool = True
) -> tuple[str, list[dict[str, Any]], list[str | None]]:
    """The system text and canonical messages of a request's messages (see the module), and
    each canonical message's tool call id (None but for tool messages). ``system``: the
    text when the messages start with no system message; without ``leading_system``, system
    messages at the start are messages too."""
    return assemble((message_entry(m) for m in messages), system, leading_system=leading_system)


def assemble(
    entries: Iterable[Entry], system: str = "", *, leading_system: bool = True
) -> tuple[str, list[dict[str, Any]], list[str | None]]:
    """:func:`canonical_messages` of messages given as their entries (:func:`message_entry`):
    system messages at the start become the system text, and a tool message is named by
    the call it answers. An entry's item is never changed (a renamed one is a copy)."""
    leading: list[str] = []
    out: list[dict[str, Any]] = []
    call_ids: list[str | None] = []
    # call id -> the tool's name and the call's place in its message, from the assistant
    # messages so far
    made: dict[str, tuple[str, int]] = {}
    for role, item, call_id, calls in entries:
        if role == "system" and not out and leading_system:
            text = item["content"]
            leading.append(text if isinstance(text, str) else canonical_json(text))
            continue
        made.update(calls)
        if role == "tool" and call_id and call_id in made:
            name, place = made[call_id]
            item = {**item, "name": name or item["name"], "call": place}
        out.append(item)
        call_ids.append(call_id)
    return ("\n\n".join(leading) if leading else system), out, call_ids


class Conversation:
    """The canonical entries of a conversation's messages and their canonical JSON, kept
    between its turns (each request of a conversation repeats every message before it), so
    that a request's fingerprint reads each message once: :meth:`request`.

    A message is read again when its content or tool calls are other objects than when it
    was read (a message whose content list is changed in place is not seen to change)."""

    def __init__(self) -> None:
        # id(message) -> (the message, kept so the id stays its own; its content and tool
        # calls as read; its entry; its item's canonical JSON)
        self._held: dict[int, tuple[Any, Any, Any, Entry, str]] = {}
        # the JSON of a tool message's item as assemble names it by the call it answers (a
        # copy made anew at each request), by its content object (a held entry's), name and
        # call: each request repeats every tool message before it
        # (the content kept with it: its id stays its own)
        self._named: dict[tuple[int, str, Any], tuple[Any, str]] = {}

    def _entry(self, message: Any) -> tuple[Entry, str]:
        content = getattr(message, "content", None)
        calls = getattr(message, "tool_calls", None)
        held = self._held.get(id(message))
        if held is not None and held[1] is content and held[2] is calls:
            return held[3], held[4]
        entry = message_entry(message)
        text = canonical_json(entry[1])
        self._held[id(message)] = (message, content, calls, entry, text)
        return entry, text

    def _named_json(self, item: dict[str, Any]) -> str:
        content = item.get("content")
        key = (id(content), str(item.get("name")), item.get("call"))
        found = self._named.get(key)
        if found is None or found[0] is not content:
            found = self._named[key] = (content, canonical_json(item))
        return found[1]

    def request(
        self,
        messages: Iterable[Any],
        tools: Mapping[str, Any],
        tools_json: str,
        params: Mapping[str, Any],
        system: str = "",
    ) -> tuple[Request, str]:
        """:func:`canonical_request` of the messages and its :func:`fingerprint`
        (``tools_json``: the tools' canonical JSON), the fingerprint built from the
        messages' JSON as :func:`request_text` does."""
        read = [self._entry(m) for m in messages]
        texts = {id(entry[1]): text for entry, text in read}
        text, items, _ = assemble((entry for entry, _ in read), system)
        # an item renamed by assemble is a copy, not held: its JSON is written here
        items_json = [texts.get(id(item)) or self._named_json(item) for item in items]
        request = {"system": text, "messages": items, "tools": dict(tools), "params": dict(params)}
        digest = sha256_text(
            request_text(items_json, canonical_json(request["params"]), canonical_json(text),
                         tools_json)
        )  # fmt: skip
        return request, digest


def canonical_tools(schemas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Tool schemas (bare ``{"name", "description", "parameters"}``, as a run's manifest keeps
    them and ``convert_to_openai_function`` writes them) by name, in the canonical form."""
    out: dict[str, Any] = {}
    for schema in schemas:
        params = schema.get("parameters") or {}
        tool: dict[str, Any] = {
            "description": str(schema.get("description") or ""),
            "parameters": normalized(params.get("properties") or {}),
            "required": sorted(str(r) for r in params.get("required") or []),
        }
        for key, value in params.items():
            if key not in ("type", "properties", "required"):
                tool[key] = normalized(value)
        if params.get("type") not in (None, "object"):
            tool["type"] = params["type"]
        out[str(schema.get("name") or "")] = tool
    return out


def canonical_params(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sampling settings among ``settings`` (a model's, a call's), under their canonical
    names; those not set left out."""
    out: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        name = _ALIASES.get(key, key)
        if name in SAMPLING and value is not None:
            out[name] = normalized(list(value) if isinstance(value, tuple) else value)
    return out


def canonical_request(
    messages: Iterable[Any],
    tools: Mapping[str, Any],
    params: Mapping[str, Any],
    system: str = "",
) -> Request:
    """A request in the canonical form: its messages (LangChain's, see :func:`_data`), its
    tools and params already canonical (:func:`canonical_tools`, :func:`canonical_params`),
    ``system`` the run's system prompt for messages that start with none."""
    text, items, _ = canonical_messages(messages, system)
    return {"system": text, "messages": items, "tools": dict(tools), "params": dict(params)}


def request_text(
    messages_json: Sequence[str], params_json: str, system_json: str, tools_json: str
) -> str:
    """A request's canonical JSON from its parts' canonical JSON (each message's, the params',
    the system text's and the tools'): what :func:`canonical_json` writes of the request,
    built without it, so that each turn of a conversation adds its messages only."""
    return (
        '{"messages":[' + ",".join(messages_json) + '],"params":' + params_json
        + ',"system":' + system_json + ',"tools":' + tools_json + "}"
    )  # fmt: skip


def message_hashes(messages: Iterable[Any]) -> list[str]:
    """The hash of each message of a conversation as a model sees it: the sha256 of its
    canonical form (no ids, usage or metadata; a tool message named by the call it
    answers), system messages included."""
    _, items, _ = canonical_messages(messages, leading_system=False)
    return [sha256_text(canonical_json(item)) for item in items]


def assistant_turns(items: Sequence[Mapping[str, Any]]) -> int:
    """How many assistant messages a request's canonical messages hold: the turn it asks for."""
    return sum(1 for m in items if m.get("role") == "assistant")
