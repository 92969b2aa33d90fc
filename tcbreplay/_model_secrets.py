"""Secrets in what names a model and sets it up: every secret a setting holds
(:func:`find_secrets`: by a key's name, in a URL, a ``Bearer`` value, a secret variable's
value), and the refusal of a model string that holds one (:func:`refuse_model_secrets`): the
string names the run and is written into its manifest. What is found in the settings of a run
recorded by an older version is redacted from error texts by
:func:`tcbreplay._secrets.register`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from tcbreplay._scrub import scrub
from tcbreplay._secrets import Finding, _env_secrets, _pattern, _url_secrets, is_secret_name
from tcbreplay.errors import ModelError

_AUTH_VALUE = re.compile(r"\s*(Bearer|Basic|Token|Digest)\s+\S{8,}", re.IGNORECASE)


def find_secrets(
    name: str, value: Any, environ: Mapping[str, str] | None = None
) -> Iterator[Finding]:
    """Every secret in setting ``name`` with ``value`` (a JSON value): keys that look like a
    secret's at any depth, credentials in URLs (user info, secret query parameters), header
    values such as ``Bearer ...``, and values of secret environment variables."""
    env = _env_secrets(os.environ if environ is None else environ)
    stack: list[tuple[str, str, Any]] = [(name, name, value)]
    while stack:
        path, key, item = stack.pop()
        if is_secret_name(key):
            yield Finding(path, f"{key!r} looks like a secret's name", _strings(item))
        elif isinstance(item, dict):
            stack += [(f"{path}[{json.dumps(k)}]", str(k), v) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(f"{path}[{i}]", "", v) for i, v in enumerate(item)]
        elif isinstance(item, str):
            yield from _string_secrets(path, item, env)


def _string_secrets(path: str, text: str, env: Mapping[str, str]) -> Iterator[Finding]:
    found = False
    for why, values in _url_secrets(text):
        found = True
        yield Finding(path, why, values)
    match = _AUTH_VALUE.match(text)
    if match:
        found = True
        yield Finding(path, f"looks like a credential ({match.group(1)} ...)", (text.strip(),))
    for secret, variable in env.items():
        if _pattern(secret).search(text):
            found = True
            yield Finding(path, f"holds the value of {variable}", (secret,))
    if not found and scrub("", text) != text:  # a header line, a key, a name=value inside
        yield Finding(path, "holds a credential by its form (Bearer ..., api_key=..., sk-...)",
                      (text,))  # fmt: skip


def _strings(value: Any) -> tuple[str, ...]:
    """Every string (and number, as text) inside a JSON value."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            out.append(item)
        elif item is not None and not isinstance(item, bool):
            out.append(str(item))
    return tuple(out)


# the pieces of a model string that may be key=value settings (sim's a=1,b=2, a URL-like
# ?a=1&b=2, or a provider's own separators)
_MODEL_PIECES = re.compile(r"[?&,;:/\s]+")


# where a secret given in a model string or option goes instead
SECRETS_HINT = (
    "pass secrets by environment (the provider's API key variable); they are never recorded"
)


def refuse_model_secrets(model: str, option: str, hint: str = SECRETS_HINT) -> None:
    """Refuse a model string that holds a secret (a ``key=...`` setting with a secret's
    name, a credential in a URL, a ``Bearer ...`` value, a secret variable's value): the
    string names the run and is written into its manifest. The string is not shown;
    ``hint`` says where its secret goes instead."""
    why = next(
        (f"has a setting {key!r}, whose name is a secret's"
         for key, sep, _ in (piece.partition("=") for piece in _MODEL_PIECES.split(model))
         if sep and is_secret_name(key.strip())),
        None,
    )  # fmt: skip
    if why is None:
        finding = next(find_secrets(option, model), None)
        why = None if finding is None else finding.why
    if why is not None:
        raise ModelError(
            f"{option}: the model string {why}; secrets are not accepted in it", hint=hint
        )
