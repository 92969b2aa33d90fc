"""The settings of a request to ``serve`` that its API would refuse, or whose answer a
recording cannot give: each said in one line naming the field (``serve`` answers 400).

Taken, they were answered as if not given, or as something else: one choice for ``n: 2``, a
stream for ``"stream": "yes"``, several calls for ``"parallel_tool_calls": "no"`` (not
false), any call for a ``tool_choice`` of type function that names none, an answer for
``temperature: NaN``. The forms are the APIs' own: OpenAI's ``tool_choice`` is ``none``,
``auto``, ``required`` or an object naming a function (a custom tool, or allowed tools);
Anthropic's an object of type ``auto``, ``any``, ``tool`` (with a name) or ``none``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# the numbers each API takes of a sampling setting, from the lowest to the highest
_RANGES = {
    "openai": {"temperature": (0, 2), "top_p": (0, 1), "frequency_penalty": (-2, 2),
               "presence_penalty": (-2, 2)},
    "anthropic": {"temperature": (0, 1), "top_p": (0, 1)},
}  # fmt: skip
_OPENAI_CHOICES = ("none", "auto", "required")
_ANTHROPIC_CHOICES = ("auto", "any", "tool", "none")


def refused(body: Mapping[str, Any], api: str) -> str | None:
    """Why the API ``api`` (``openai``, ``anthropic``) would refuse the settings of a
    request ``body``, or None."""
    if "stream" in body and not isinstance(body["stream"], bool):
        return f"stream {body['stream']!r}: true or false"
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        return f"parallel_tool_calls {parallel!r}: true or false"
    said = _tool_choice(body.get("tool_choice"), api)
    if said is not None:
        return said
    for name, (low, high) in _RANGES[api].items():
        value = body.get(name)
        if value is not None and not _number_in(value, low, high):
            return f"{name} {value!r}: a number from {low} to {high}"
    if api == "openai" and body.get("n") not in (None, 1):
        return f"n {body['n']!r}: a recording holds one answer a turn; ask for one"
    if api == "openai" and body.get("verbosity") is not None:
        return verbosity_refused(body["verbosity"], "verbosity")
    if api == "anthropic":
        tokens = body.get("max_tokens")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                                   or tokens < 1):  # fmt: skip
            return f"max_tokens {tokens!r}: a whole number of 1 or more"
        messages = body.get("messages")  # (a text or an object: the list's check says so)
        for k, message in enumerate(messages if isinstance(messages, list) else []):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ("user", "assistant"):
                return (f"messages[{k}].role {role!r}: user or assistant (a system prompt goes "
                        "in system)")  # fmt: skip
    return None


def verbosity_refused(value: Any, place: str) -> str:
    """Why a verbosity asked for (at ``place``) is not served: a recording keeps none."""
    return (f"{place} {value!r}: not served (a recording keeps no verbosity its answers were "
            "made at, to compare it with); leave it out")  # fmt: skip


def _number_in(value: Any, low: float, high: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )


def _tool_choice(choice: Any, api: str) -> str | None:
    """Why ``choice`` is no ``tool_choice`` of the API's, or None."""
    if choice is None:
        return None
    if api == "anthropic":
        if not isinstance(choice, dict):
            return f'tool_choice {choice!r}: an object ({{"type": "auto"}}, any, tool or none)'
        kind = choice.get("type")
        if kind not in _ANTHROPIC_CHOICES:
            return f"tool_choice.type {kind!r}: auto, any, tool or none"
        if kind == "tool" and not _name(choice.get("name")):
            return "tool_choice.name: the name of the tool to use is required (type tool)"
        parallel = choice.get("disable_parallel_tool_use")
        if parallel is not None and not isinstance(parallel, bool):
            return f"tool_choice.disable_parallel_tool_use {parallel!r}: true or false"
        return None
    if isinstance(choice, str):
        if choice not in _OPENAI_CHOICES:
            return f"tool_choice {choice!r}: none, auto, required or an object naming a function"
        return None
    if not isinstance(choice, dict):
        return f"tool_choice {choice!r}: a text or an object"
    kind = choice.get("type")
    if kind in ("function", "custom"):
        named = choice.get(kind)
        if not (isinstance(named, dict) and _name(named.get("name"))):
            return f"tool_choice.{kind}.name: the name of the {kind} tool to call is required"
        return None
    if kind == "allowed_tools":
        if not isinstance(choice.get("allowed_tools"), dict):
            return "tool_choice.allowed_tools: an object ({mode, tools}) is required"
        return allowed_refused(choice["allowed_tools"], "tool_choice.allowed_tools")
    return f"tool_choice.type {kind!r}: function, custom or allowed_tools"


def allowed_refused(allowed: Mapping[str, Any], place: str) -> str | None:
    """Why an ``allowed_tools`` choice's ``mode`` and ``tools`` (at ``place``) are not
    OpenAI's, or None: which calls it allows is read from them
    (:func:`~tcbreplay._replay.choice.allowed_tools`)."""
    if allowed.get("mode") not in ("auto", "required"):
        return f"{place}.mode {allowed.get('mode')!r}: auto or required"
    if not isinstance(allowed.get("tools"), list):
        return f"{place}.tools: a list of the tools allowed is required"
    return None


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def not_finite(value: Any) -> str | None:
    """The path of the first NaN or infinity in a request body read by Python's reader
    (``temperature``, ``messages[1].content``), which no JSON holds, or None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path or "the body"
        if isinstance(item, dict):
            stack += reversed([(f"{path}.{k}" if path else str(k), v) for k, v in item.items()])
        elif isinstance(item, list):
            stack += reversed([(f"{path}[{i}]", v) for i, v in enumerate(item)])
    return None


def unanswerable(schema_asked: str, json_asked: str, recording: Any) -> str | None:
    """Why a request asking for a schema (``schema_asked``: the field that gives it) or a
    JSON answer (``json_asked``) is not answered from ``recording`` (a
    :class:`~tcbreplay._replay.recording.RecordedRun`), or None: a schema where none of its
    requests asked for one, or where it does not say which each asked for (a run of an agent
    of one's own recorded before runs kept them, an import); JSON without a schema where its
    answers were not asked for JSON. A schema where its requests asked for some is compared
    with the one each asked for, as the request's ``response_format``."""
    if schema_asked and not recording.formats_asked:
        if not recording.params_known:
            why = "an imported run does not say which schema its requests asked for"
        elif not recording.sampled:
            why = "its model, sim, takes no settings"
        elif not recording.formats_known:
            why = ("its agent's run was recorded before runs kept which schema each request "
                   "asked for")  # fmt: skip
        else:
            why = "none of its requests asked for one"
        return (f"{schema_asked}: an answer of a schema is not served (a recording's answer "
                f"was not made to it: {why})")  # fmt: skip
    if json_asked and not schema_asked and not recording.json_asked:
        return (f"{json_asked} 'application/json': not served (the recording's answers were "
                "not asked for JSON: its model settings have no response_mime_type "
                "application/json); leave it out")  # fmt: skip
    return None


def unrecorded(given: Mapping[str, tuple[str, Any]], recording: Any) -> str | None:
    """Why a setting served only as ``recording``'s model settings have it (``given``: by its
    place in the body, its name there and its value; Anthropic's ``output_config.effort``,
    OpenAI's ``reasoning.effort`` or Chat Completions' ``reasoning_effort``) is not served, or
    None: where the recording's settings have another or none of it, its answers were not
    made at it."""
    for place, (name, value) in given.items():
        had = _had(recording, place, name)
        if made_at(recording, place, name, value):
            continue
        if not recording.params_known:
            why = "an imported run does not say which settings its answers were made at"
        elif not recording.sampled:
            why = "the recording's model, sim, takes no settings"
        elif had is None:
            why = (f"the recording's model settings have no {place}: its answers were not "
                   "made at it")  # fmt: skip
        else:
            why = (f"the recording's answers were made at {name} {had!r}, as its model "
                   "settings say")  # fmt: skip
        return f"{place} {value!r}: not served ({why}); leave it out"
    return None


def _had(recording: Any, place: str, name: str) -> Any:
    """The value of setting ``name`` (at ``place``) in ``recording``'s model settings, or None
    (none where its settings are not taken): a place in ``output_config`` is looked for in
    the recording's, any other in its ``reasoning`` (``reasoning_effort``: its ``effort``)."""
    kept = recording.output_config if place.startswith("output_config.") else (
        recording.reasoning)  # fmt: skip
    return kept.get(name)


def made_at(recording: Any, place: str, name: str, value: Any) -> bool:
    """Whether ``recording``'s model settings have ``value`` for setting ``name`` (at
    ``place``): its answers were made at it."""
    from tcbreplay._replay.fingerprint import normalized

    had = _had(recording, place, name)
    return had is not None and normalized(had) == normalized(value)


def call_settings(kwargs: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """The settings among a LangChain call's keywords that are served only as a recording's
    model settings have them, as :func:`unrecorded` takes them: each field of
    ChatAnthropic's ``output_config`` but its ``format`` (compared as ``response_format``),
    and of ChatOpenAI's ``reasoning``."""
    out: dict[str, tuple[str, Any]] = {}
    for group, skipped in (("output_config", "format"), ("reasoning", "")):
        given = kwargs.get(group)
        if isinstance(given, Mapping):
            out.update({f"{group}.{k}": (str(k), v) for k, v in given.items()
                        if k != skipped and v is not None})  # fmt: skip
    return out
