"""What a tool's JSON-schema parameters take besides those they declare: read by the tool
specs of a recording or an import, and by scoring, which must not reach LangChain (as
:mod:`tcbreplay._inputs.tools` may)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def extra_arguments(parameters: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of the arguments a tool takes besides those its ``properties``
    declare (``{}``: any), or None when it takes no other. A tool takes free-form arguments
    when ``additionalProperties`` is true or a schema, and when its parameters declare no
    ``properties`` at all (``{"type": "object"}``: JSON Schema's default; so are schemas made
    of ``anyOf`` branches, which are not read); ``"properties": {}`` declares a tool of no
    arguments (as LangChain writes a function of none), and ``"additionalProperties":
    false`` forbids others."""
    more = parameters.get("additionalProperties")
    if more is True or (more is None and "properties" not in parameters):
        return {}
    return dict(more) if isinstance(more, Mapping) else None
