"""The settings of a Gemini request, read for :mod:`tcbreplay._replay.wire_gemini`: its
function declarations as tools, ``generationConfig``'s sampling settings and the schema its
answer must follow, ``toolConfig``'s ``functionCallingConfig`` as what an answer may do; and
the helpers that read a field by either of its names (the API reads lowerCamelCase and
snake_case alike, as protobuf's JSON does).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import Any

from tcbreplay._replay.fingerprint import canonical_params, normalized
from tcbreplay._replay.wire import WireError, checked_schema

# generationConfig's sampling settings, under the names canonical_params reads
_SETTINGS = {"temperature": "temperature", "topP": "top_p", "topK": "top_k",
             "maxOutputTokens": "max_tokens", "seed": "seed", "stopSequences": "stop",
             "presencePenalty": "presence_penalty",
             "frequencyPenalty": "frequency_penalty"}  # fmt: skip
_RANGES = {"temperature": (0, 2), "topP": (0, 1)}
# the fields of a schema the answer must follow (responseSchema in Gemini's form)
_SCHEMAS = ("responseJsonSchema", "responseSchema")
# the other sampling settings' kinds, as the API checks them (a whole number may come as
# 40.0: google-genai's top_k is a float)
_WHOLE, _POSITIVE = "a whole number", "a whole number of 1 or more"
_NUMBER, _TEXTS = "a number", "a list of strings"
_KINDS = {"topK": _POSITIVE, "maxOutputTokens": _POSITIVE, "seed": _WHOLE,
          "stopSequences": _TEXTS, "presencePenalty": _NUMBER,
          "frequencyPenalty": _NUMBER}  # fmt: skip


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: Any) -> bool:
    return _number(value) and float(value).is_integer()


_KIND_CHECKS = {
    _WHOLE: _whole,
    _POSITIVE: lambda v: _whole(v) and v >= 1,
    _NUMBER: _number,
    _TEXTS: lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v),
}


@functools.lru_cache(maxsize=4096)
def snake(name: str) -> str:
    """``functionDeclarations`` as ``function_declarations``."""
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


@functools.lru_cache(maxsize=4096)
def camel(name: str) -> str:
    """``function_declarations`` as ``functionDeclarations``."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def field(obj: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A field of a request's object by its lowerCamelCase name, or its snake_case one (the
    API reads both, as protobuf's JSON does: google-genai sends ``parameters_json_schema``)."""
    if name in obj:
        if snake(name) != name and snake(name) in obj:
            raise WireError(f"{name} and {snake(name)} are both given (one field of two "
                            "names): send one")  # fmt: skip
        return obj[name]
    return obj.get(snake(name), default)


def _json_schema(schema: Any) -> Any:
    """A Gemini schema as the JSON schema it stands for (lower-case types,
    ``propertyOrdering`` left out: it orders, it does not constrain)."""
    if isinstance(schema, list):
        return [_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        key = camel(key)
        if key == "propertyOrdering":
            continue
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _json_schema(s) for name, s in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "not"):
            out[key] = _json_schema(value)
        else:
            out[key] = value
    return out


def tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise WireError("tools: a list of {functionDeclarations: [...]} is required")
    specs: list[dict[str, Any]] = []
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise WireError(f"tools[{k}]: an object is required")
        other = [camel(key) for key in tool if camel(key) != "functionDeclarations"]
        if other:
            raise WireError(f"tools[{k}]: function declarations only ({other[0]} is not served)")
        if "functionDeclarations" in tool and "function_declarations" in tool:
            raise WireError(f"tools[{k}]: functionDeclarations and function_declarations are "
                            "both given (one field of two names): send one")  # fmt: skip
        declarations = field(tool, "functionDeclarations") or []
        if not isinstance(declarations, list):
            raise WireError(f"tools[{k}].functionDeclarations: a list is required")
        for j, spec in enumerate(declarations):
            place = f"tools[{k}].functionDeclarations[{j}]"
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise WireError(f"{place}: a function declaration with a name is required")
            raw = field(spec, "parametersJsonSchema") is not None
            key = "parametersJsonSchema" if raw else "parameters"
            given = {"description": spec.get("description"), key: field(spec, key)}
            checked_schema(given, place, key)
            parameters = given[key]
            specs.append({
                "name": spec["name"], "description": spec.get("description") or "",
                "parameters": parameters if raw else _json_schema(parameters),
            })  # fmt: skip
    return specs


def config(body: Mapping[str, Any]) -> dict[str, Any]:
    """``generationConfig``'s sampling settings (canonical names), refusing what the API
    would refuse or a recording cannot give."""
    config = field(body, "generationConfig") or {}
    if not isinstance(config, dict):
        raise WireError("generationConfig: an object is required")
    both = [k for k in config if k != camel(k) and camel(k) in config]
    if both:
        raise WireError(f"generationConfig: {camel(both[0])} and {both[0]} are both given "
                        "(one field of two names): send one")  # fmt: skip
    config = {camel(k): v for k, v in config.items()}
    count = config.get("candidateCount")
    if count is not None and (type(count) is not int or count != 1):  # (not True, nor 1.0)
        raise WireError(f"generationConfig.candidateCount {count!r}: a recording holds one "
                        "answer a turn; ask for one")  # fmt: skip
    for name, (low, high) in _RANGES.items():
        value = config.get(name)
        if value is not None and not (
            isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and low <= value <= high
        ):  # fmt: skip
            raise WireError(f"generationConfig.{name} {value!r}: a number from {low} to {high}")
    for name, rule in _KINDS.items():
        value = config.get(name)
        if value is not None and not _KIND_CHECKS[rule](value):
            raise WireError(f"generationConfig.{name} {value!r}: {rule}")
    return canonical_params({_SETTINGS[k]: v for k, v in config.items() if k in _SETTINGS})


def answer_format(body: Mapping[str, Any]) -> tuple[str, Any]:
    """The field of ``generationConfig`` that gives the schema the answer must follow
    (``generationConfig.responseJsonSchema``, or ``responseSchema`` read as the JSON schema
    it stands for), and the ``response_format`` it asks, as a recording keeps a call's
    (:func:`tcbreplay._record.formats.asked_format`); ("", None) for none."""
    config = field(body, "generationConfig") or {}
    given = {k: field(config, k) for k in _SCHEMAS} if isinstance(config, dict) else {}
    asked = [k for k, v in given.items() if v is not None]
    if len(asked) > 1:
        raise WireError("generationConfig: responseJsonSchema and responseSchema are both "
                        "given: send one")  # fmt: skip
    if not asked:
        return "", None
    schema = given[asked[0]]
    if not isinstance(schema, dict):
        raise WireError(f"generationConfig.{asked[0]}: a schema object is required")
    if asked[0] == "responseSchema":
        schema = _json_schema(schema)
    return f"generationConfig.{asked[0]}", normalized({"schema": schema})


def json_asked(body: Mapping[str, Any]) -> bool:
    """Whether ``generationConfig.responseMimeType`` asks for a JSON answer (of a schema
    too: :func:`answer_format`); ``text/plain``, the default, asks for text,
    and another type (``text/x.enum``, which needs a schema) is refused."""
    config = field(body, "generationConfig") or {}
    mime = field(config, "responseMimeType") if isinstance(config, dict) else None
    if mime is None or mime == "text/plain":
        return False
    if mime != "application/json":
        raise WireError(f"generationConfig.responseMimeType {mime!r}: text/plain or "
                        "application/json")  # fmt: skip
    return True


def choice(body: Mapping[str, Any]) -> dict[str, Any]:
    """``toolConfig.functionCallingConfig`` as the OpenAI form :mod:`~tcbreplay._replay.choice`
    reads: ``NONE`` none, ``ANY`` required (one allowed name: that function; several: one
    of them, as ``allowed_tools``), ``VALIDATED`` with allowed names a call of one of them
    or none, ``AUTO`` free."""
    config = field(body, "toolConfig") or {}
    calling = field(config, "functionCallingConfig") if isinstance(config, dict) else None
    if calling is None:
        return {}
    if not isinstance(calling, dict):
        raise WireError("toolConfig.functionCallingConfig: an object is required")
    mode = calling.get("mode", "AUTO")
    if mode not in ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"):
        raise WireError(f"toolConfig.functionCallingConfig.mode {mode!r}: AUTO, ANY, NONE or "
                        "VALIDATED")  # fmt: skip
    names = field(calling, "allowedFunctionNames") or []
    if mode == "NONE":
        return {"tool_choice": "none"}
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise WireError("toolConfig.functionCallingConfig.allowedFunctionNames: a list of "
                        "names is required")  # fmt: skip
    if mode == "ANY" and len(names) == 1:
        return {"tool_choice": {"type": "function", "function": {"name": names[0]}}}
    if mode in ("ANY", "VALIDATED") and names:
        tools = [{"type": "function", "function": {"name": n}} for n in names]
        kind = "required" if mode == "ANY" else "auto"
        return {"tool_choice": {"type": "allowed_tools",
                                "allowed_tools": {"mode": kind, "tools": tools}}}  # fmt: skip
    return {"tool_choice": "required"} if mode == "ANY" else {}
