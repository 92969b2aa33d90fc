"""The recorded model's ``with_structured_output``: what the recorded run's own chat model class
binds to a call for a schema (OpenAI's ``response_format``, Gemini's ``response_json_schema``,
Anthropic's ``output_config``, as ``method="json_schema"`` or its default asks), and a parser
of the recorded answer's text; and a ``response_format`` given to its ``bind_tools``
(``create_agent``'s ``ProviderStrategy``), as that class binds it. The class itself is
asked (made with a placeholder key: it sends nothing), so that the replaying agent's
request asks for the very format the recording's asked for, and a request asking for
another diverges where it differs (:mod:`tcbreplay._record.formats`).

A run whose model is no provider LangChain makes (sim, an import, a replay), or a method that
binds the schema as a tool (``function_calling``): None, and the schema is bound as a tool,
as LangChain's chat models do without a format of their own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from tcbreplay._record.formats import asked_format

# the key the provider's class is made with: it is never sent (the class only binds)
_PLACEHOLDER_KEY = "tcbreplay-replay-sends-nothing"


def provider_format(
    model: Mapping[str, Any], schema: Any, kwargs: Mapping[str, Any]
) -> tuple[dict[str, Any], Any] | None:
    """The keywords the chat model of ``model`` (a run manifest's: its provider, name and
    settings) binds to a call for ``with_structured_output(schema, **kwargs)`` and a parser
    of the answer; None where it binds no answer format (see the module)."""
    from langchain_core.runnables import RunnableBinding, RunnableSequence

    provider, name = model.get("provider"), model.get("name")
    if not isinstance(provider, str) or not isinstance(name, str) or provider == "sim":
        return None
    form = _form_model(json.dumps([provider, name, model.get("settings") or {}],
                                      sort_keys=True))  # fmt: skip
    if form is None:
        return None
    structured = form.with_structured_output(schema, **kwargs, include_raw=False)
    first = getattr(structured, "first", None)
    if not isinstance(structured, RunnableSequence) or not isinstance(first, RunnableBinding):
        return None
    bound = dict(first.kwargs)
    if asked_format(bound) is None:  # (the schema as a tool: the recorded model binds it)
        return None
    return bound, _parser(schema)


def bound_format(model: Mapping[str, Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` of a ``bind_tools`` call, their ``response_format`` as the chat model of
    ``model`` (a run manifest's) binds it: ``create_agent``'s ``ProviderStrategy`` gives its
    own form, which ChatOpenAI rewrites before sending (its description beside the schema,
    its title dropped); as given where LangChain makes no model of that provider."""
    provider, name = model.get("provider"), model.get("name")
    given = kwargs.get("response_format")
    if given is None or not isinstance(provider, str) or not isinstance(name, str):
        return dict(kwargs)
    if provider == "sim":
        return dict(kwargs)
    form = _form_model(json.dumps([provider, name, model.get("settings") or {}],
                                  sort_keys=True))  # fmt: skip
    if form is None:
        return dict(kwargs)
    asked = {key: kwargs[key] for key in ("response_format", "strict") if key in kwargs}
    try:
        bound = form.bind_tools([], **asked)
    except (ValueError, TypeError):  # (compared as given: it diverges where it differs)
        return dict(kwargs)
    return {**kwargs, "response_format": getattr(bound, "kwargs", {}).get("response_format", given)}


@functools.lru_cache(maxsize=8)
def _form_model(model: str) -> Any:
    """The chat model of ``[provider, name, settings]`` (JSON), made with the placeholder key;
    None where LangChain makes none of that provider (or it is not installed). Made once: an
    agent may ask for structured output at every call, and a model takes time to make
    (ChatGoogleGenerativeAI's client, 60 ms)."""
    from langchain.chat_models import init_chat_model

    provider, name, settings = json.loads(model)
    try:
        return init_chat_model(name, model_provider=provider, **settings,
                               api_key=_PLACEHOLDER_KEY)  # fmt: skip
    except (ImportError, ValueError, TypeError):
        return None


def _parser(schema: Any) -> Any:
    """The parser of a recorded structured answer: its text, as JSON, or as the pydantic
    model ``schema`` is (a provider's parser may read what a recording does not keep, as
    ChatOpenAI's reads the model it parsed)."""
    from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
    from langchain_core.utils.pydantic import is_basemodel_subclass

    if isinstance(schema, type) and is_basemodel_subclass(schema):
        return PydanticOutputParser(pydantic_object=schema)
    return JsonOutputParser()
