"""Secrets: which settings look like one (refused as model options), and removing their values
from error texts.

API keys come from the environment only and tcbreplay never writes them, but a provider or
a proxy can quote the key it was sent in an error message, and error texts are stored
(``samples.error``) and printed. Every error text passes :func:`redact` on its way into the
store and onto the screen: it replaces the value of every environment variable whose name
looks like a secret (``GOOGLE_API_KEY``, ``OPENAI_API_KEY``, ``HF_TOKEN``, ...) and every
secret the model's settings hold (:func:`register`) with ``[redacted]``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

REDACTED = "[redacted]"
# Shorter values are no real keys, and replacing them would blank out ordinary words.
MIN_SECRET_LENGTH = 8

# Words of a name (split at separators and camelCase) that make it a secret's name. "tokens"
# is not one: max_tokens and max_output_tokens are counts.
_SECRET_WORDS = frozenset(
    {"key", "keys", "apikey", "passkey", "token", "secret", "secrets", "password", "passwords",
     "passwd", "pwd", "passphrase", "credential", "credentials", "auth", "authorization",
     "cookie", "bearer", "signature", "sig"}
)  # fmt: skip
# Run together, a name holding one of these is a secret's name too (apiKey, x-goog-api-key).
_SECRET_PARTS = ("apikey", "accesskey", "secretkey", "privatekey", "password", "passwd",
                 "secret", "credential", "authorization", "accesstoken", "authtoken")  # fmt: skip
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
_AUTH_VALUE = re.compile(r"\s*(Bearer|Basic|Token|Digest)\s+\S{8,}", re.IGNORECASE)

_registered: set[str] = set()


def is_secret_name(name: str) -> bool:
    """A setting, header, query parameter or variable name that looks like a secret's."""
    words = [w.lower() for w in _WORDS.findall(name)]
    compact = "".join(words)
    return any(w in _SECRET_WORDS for w in words) or any(p in compact for p in _SECRET_PARTS)


@dataclass(frozen=True)
class Finding:
    """A secret inside a setting: where (``path``), why, and its values (never to be shown)."""

    path: str
    why: str
    values: tuple[str, ...]


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


def register(findings: Iterable[Finding]) -> None:
    """Remove these secrets from error texts too (a run's settings, recorded by an older
    version, may hold some)."""
    for finding in findings:
        _registered.update(v for v in finding.values if len(v) >= MIN_SECRET_LENGTH)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every known secret's value replaced by ``[redacted]``."""
    if not text:
        return text
    secrets = set(_env_secrets(os.environ if environ is None else environ)) | _registered
    # longest first, so that a secret containing another is replaced whole
    for secret in sorted(secrets, key=len, reverse=True):
        for form in _forms(secret):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


def _env_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """Secret value -> the name of the environment variable holding it."""
    return {
        value: name
        for name, value in environ.items()
        if len(value) >= MIN_SECRET_LENGTH and is_secret_name(name)
    }


def _string_secrets(path: str, text: str, env: Mapping[str, str]) -> Iterator[Finding]:
    for url in _URL.findall(text):
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        if "@" in parts.netloc:
            userinfo = parts.netloc.rpartition("@")[0]
            user, _, password = userinfo.partition(":")
            values = tuple(unquote(v) for v in (userinfo, user, password) if v)
            yield Finding(path, "holds a URL with a user name or password", values)
        for query in (parts.query, parts.fragment):
            for key, value in parse_qsl(query, keep_blank_values=True):
                if value and is_secret_name(key):
                    yield Finding(path, f"holds a URL whose parameter {key!r} is secret", (value,))
    match = _AUTH_VALUE.match(text)
    if match:
        yield Finding(path, f"looks like a credential ({match.group(1)} ...)", (text.strip(),))
    for secret, variable in env.items():
        if secret in text:
            yield Finding(path, f"holds the value of {variable}", (secret,))


def _forms(secret: str) -> set[str]:
    """The ways a secret may be quoted in an error text: as is, URL-encoded, JSON-escaped."""
    return {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}


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
