"""The answer format a model call asks for beside its sampling settings: a schema its answer
must follow (OpenAI's ``response_format``, Gemini's ``response_json_schema`` or
``response_schema``, Anthropic's ``output_config.format``), in the one form a recording keeps
per call (an agent of one's own binds one per call: LangChain's ``with_structured_output``)
and a replay compares as the request's ``response_format``
(:mod:`tcbreplay._replay.fingerprint`).

Gemini's asking for JSON without a schema (``response_mime_type``) is not one: a run says it
for all its calls, in its model settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# ChatGoogleGenerativeAI's keywords for a schema (it sends either as responseJsonSchema)
_GEMINI_SCHEMAS = ("response_json_schema", "response_schema")
# ChatAnthropic's name among its invocation parameters (their _type)
_CHAT_ANTHROPIC = "anthropic-chat"


def asked_format(params: Mapping[str, Any], provider: str = "") -> Any:
    """The ``response_format`` a call of these LangChain parameters asks for (a call's
    invocation parameters, a model's keywords or settings), or None: OpenAI's
    ``response_format`` as given, a Gemini schema, or the schema of Anthropic's
    ``output_config.format`` (ChatAnthropic's ``with_structured_output`` binds it), as
    ``{"schema": ...}``; a class given as ``response_format`` (ChatOpenAI's
    ``with_structured_output`` binds a pydantic model so) as the openai SDK sends it, but
    given to ChatAnthropic (``provider`` anthropic, or ``params`` its invocation parameters)
    as its JSON schema, which :func:`format_as_sent` rewrites as ChatAnthropic does; a format
    that is no JSON object (another class, or one holding what JSON cannot, or an
    ``output_config.format`` without a schema) as ``{"unreadable": its name}``, which no
    request's equals (a request is compared with it, never answered as though none was
    asked). Its numbers as given: the canonical form makes them one (``normalized``)."""
    given = params.get("response_format")
    key = "response_format"
    if given is None:
        key = next((k for k in _GEMINI_SCHEMAS if params.get(k) is not None), "")
        given = params.get(key) if key else None
    if given is None and isinstance(params.get("output_config"), Mapping):
        found = params["output_config"].get("format")
        schema = found.get("schema") if isinstance(found, Mapping) else None
        if found is not None and not isinstance(schema, Mapping):
            return {"unreadable": "output_config.format"}
        # (its schema: beside it only its type, json_schema, the one Anthropic has)
        key, given = "output_config.format", schema
    if given is None:
        return None
    if isinstance(given, type) and key == "response_format":
        anthropic = provider == "anthropic" or params.get("_type") == _CHAT_ANTHROPIC
        given = _given_to_anthropic(given) if anthropic else _as_sent(given)
    try:
        if not isinstance(given, Mapping):
            raise TypeError
        json.dumps(given)  # (kept in the sample's metadata, as JSON)
    except (TypeError, ValueError):
        return {"unreadable": getattr(given, "__name__", type(given).__name__)}
    return dict(given) if key == "response_format" else {"schema": dict(given)}


def _as_sent(given: type) -> Any:
    """The ``response_format`` the openai SDK sends for a class given as it (a pydantic
    model's strict JSON schema, named for it); the class itself where it sends none."""
    try:
        from openai.lib._parsing import type_to_response_format_param
    except ImportError:  # (no openai SDK: no ChatOpenAI gave it)
        return given
    try:
        return type_to_response_format_param(given)
    except (TypeError, ValueError):  # (a class the SDK refuses: pydantic's errors too)
        return given


def _given_to_anthropic(given: type) -> Any:
    """The JSON schema of a pydantic model given to ChatAnthropic as ``response_format``, the
    one it rewrites with the anthropic SDK's ``transform_schema`` (rewritten once, by
    :func:`format_as_sent`: not the openai SDK's strict one, which requires every field); the
    class itself for another."""
    schema = getattr(given, "model_json_schema", None)
    try:
        return schema() if callable(schema) else given
    except (TypeError, ValueError):  # (a model pydantic cannot give a schema of)
        return given


def format_as_sent(asked: Any, provider: str) -> Any:
    """``asked`` (an answer format as :func:`asked_format` gives it) in the form the model of
    ``provider`` sends it, the one a replay compares: ChatAnthropic sends a
    ``response_format`` (OpenAI's ``json_schema`` one, as LangChain's ``ProviderStrategy``
    binds it, or a JSON schema) as ``output_config.format``, its schema rewritten by the
    anthropic SDK's ``transform_schema`` (``additionalProperties`` false, the keywords it
    does not take moved into descriptions); ``{"schema": ...}`` (``output_config.format``
    given as such) is sent as given. Any other provider's, an unreadable one, or one the
    SDK cannot rewrite, as given (without the SDK: its schema, not rewritten)."""
    if provider != "anthropic" or not isinstance(asked, Mapping):
        return asked
    if set(asked) in ({"schema"}, {"unreadable"}):
        return asked
    nested = asked.get("json_schema")
    if asked.get("type") == "json_schema" and isinstance(nested, Mapping) and "schema" in nested:
        schema = nested["schema"]  # (its name and strict: ChatAnthropic sends neither)
    else:
        schema = asked
    try:
        from anthropic import transform_schema
    except ImportError:
        return {"schema": schema}
    try:
        return {"schema": transform_schema(dict(schema))}
    except (ValueError, TypeError, AssertionError):  # (no schema ChatAnthropic could send)
        return asked
