"""The tool names each provider takes, checked once before a recording (and a replay going on
live with ``--then``): a name the provider refuses would otherwise come back as its 400 on every
sample's first call.

Only the provider the run uses is held to its rule, and an ``openai:`` model sent to another
server (a compatible server, which has rules of its own: ``base_url`` or ``openai_api_base``,
or the ``OPENAI_BASE_URL`` or ``OPENAI_API_BASE`` the SDK and LangChain read) is not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from tcbreplay._inputs.tools import Toolset
from tcbreplay._record.models import ModelChoice
from tcbreplay.errors import InputError

_FUNCTION_NAME = (re.compile(r"[a-zA-Z0-9_-]{1,64}"), "1 to 64 letters, digits, _ and -",
                  "^[a-zA-Z0-9_-]{1,64}$")  # fmt: skip
# Anthropic's API says its rule in its 400: ^[a-zA-Z0-9_-]{1,128}$ (its SDK's types do not)
_TOOL_NAME = (re.compile(r"[a-zA-Z0-9_-]{1,128}"), "1 to 128 letters, digits, _ and -",
              "^[a-zA-Z0-9_-]{1,128}$")  # fmt: skip
_GEMINI_NAME = (
    re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}"),
    "a letter or _, then letters, digits, _, ., : and -, 128 at most",
    "^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$",
)
# provider -> (its name as said, its rule): OpenAI's function names, Anthropic's tool names,
# Gemini's function declarations' names (as their APIs document them)
RULES = {
    "openai": ("OpenAI", _FUNCTION_NAME),
    "azure_openai": ("Azure OpenAI", _FUNCTION_NAME),
    "anthropic": ("Anthropic", _TOOL_NAME),
    "google_genai": ("Gemini", _GEMINI_NAME),
    "google_vertexai": ("Gemini", _GEMINI_NAME),
}
# providers whose base_url points at other servers than theirs, with rules of their own
_COMPATIBLE = frozenset({"openai"})
# where an openai: model's requests go when not to OpenAI: its settings, then the variables
# (the SDK reads OPENAI_BASE_URL, LangChain OPENAI_API_BASE)
_ELSEWHERE_SETTINGS = ("base_url", "openai_api_base")
_ELSEWHERE_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_BASE")


def check_tool_names(
    names: Iterable[str],
    choice: ModelChoice,
    source: str,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Refuse, in one line naming it and the rule, the first of the tool ``names`` (of the
    tools ``source``) that the provider of ``choice`` does not take."""
    rule = RULES.get(choice.provider)
    if rule is None or (choice.provider in _COMPATIBLE and _elsewhere(choice, environ)):
        return
    provider, (pattern, words, regex) = rule
    for name in names:
        if not pattern.fullmatch(name):
            raise InputError(
                f"{source}: the tool name {name!r} is not one {provider} takes: {words} ({regex})",
                hint="rename the tool where it is made (a LangChain tool's name=...)",
            )


def check_toolset_names(toolset: Toolset, choice: ModelChoice, source: str | None = None) -> None:
    """:func:`check_tool_names` of the tools of ``toolset`` (``source``: how the error names
    them; by default ``--tools`` and the toolset's source)."""
    check_tool_names(
        (t.name for t in toolset.schemas), choice, source or f"--tools {toolset.source}"
    )


def _elsewhere(choice: ModelChoice, environ: Mapping[str, str]) -> bool:
    """Whether the requests of ``choice`` go to another server than its provider's."""
    return any(choice.settings.get(key) for key in _ELSEWHERE_SETTINGS) or any(
        environ.get(variable) for variable in _ELSEWHERE_VARIABLES
    )
