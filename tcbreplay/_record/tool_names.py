"""The tool names each provider takes, checked once before a recording: a name the provider
refuses would otherwise come back as its 400 on every sample's first call.

Only the provider the run uses is held to its rule, and an ``openai:`` model sent to another
server (``base_url``: a compatible server, which has rules of its own) is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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


def check_tool_names(names: Iterable[str], choice: ModelChoice, source: str) -> None:
    """Refuse, in one line naming it and the rule, the first of the tool ``names`` (of the
    tools ``source``) that the provider of ``choice`` does not take."""
    rule = RULES.get(choice.provider)
    if rule is None or (choice.provider in _COMPATIBLE and choice.settings.get("base_url")):
        return
    provider, (pattern, words, regex) = rule
    for name in names:
        if not pattern.fullmatch(name):
            raise InputError(
                f"{source}: the tool name {name!r} is not one {provider} takes: {words} ({regex})",
                hint="rename the tool where it is made (a LangChain tool's name=...)",
            )
