"""Scrubbing what an import keeps of traces made elsewhere: a span attribute's value
(:func:`scrub`), a value inside a span's messages (:func:`scrub_content`), a sample's metadata
(:func:`scrub_json`). Credentials are redacted by their names and by their forms, as
:func:`~tcbreplay._secrets.redact` finds them in texts (whose looks this module shares), but
not this machine's own secrets: their patterns are too slow to try on every value, and almost
no value holds a credential, so that one quick test of a text lets most by.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from tcbreplay._secrets import (
    _KEY_FORMS,
    _NAME_WORDS,
    _URL,
    _WORDS,
    MIN_SECRET_LENGTH,
    REDACTED,
    _auth_values,
    _cookies_and_flags,
    _ends_in_secret,
    _named_values,
    _pattern,
    _secret_words,
    _url_secrets,
    _userinfo,
    is_secret_name,
)

# Inside message content and tool calls' arguments, where a name that only ends in a secret's
# word is ordinary data (page_token, boarding_pass, license_key, signature), a name is a
# credential's when its last word is one of these, or its last two words run together are
# (api_key, x-goog-api-key, aws_secret_access_key, refresh_token; a "pwd" alone is the working
# folder), or it is "token" alone: see is_credential_name. (Each is a name the rule of
# attributes redacts too: inside content, what is redacted is a part of what it redacts.)
_CREDENTIAL_WORDS = frozenset(
    {"password", "passwords", "passwd", "passphrase", "pwd", "secret", "secrets", "credential",
     "credentials", "authorization", "auth", "cookie", "bearer", "apikey", "accesstoken",
     "authtoken"}
)  # fmt: skip
_CREDENTIAL_PAIRS = frozenset(
    {"apikey", "apikeys", "apitoken", "accesstoken", "refreshtoken", "idtoken", "authtoken",
     "bearertoken", "sessiontoken", "securitytoken", "oauthtoken", "csrftoken", "xsrftoken",
     "secrettoken", "privatetoken", "bottoken", "accesskey", "secretkey", "privatekey",
     "signingkey", "encryptionkey", "masterkey", "subscriptionkey", "authkey"}
)  # fmt: skip
# (the starts of _KEY_FORMS' keys with "_" in them: one search, not one for each form)
_GITHUB_KEY = re.compile(r"gh[pousr]_|github_pat_|gsk_|[sr]k_(?:live|test)_")
# The shortest text without a URL that scrub may change: a secret's name of three letters
# (pwd, sig; a bare "key" is none), "=" and a value of MIN_SECRET_LENGTH ("Token " and a
# value, or a provider's key such as xoxb- and 10 characters, are longer).
_SHORTEST_CREDENTIAL = len("pwd=") + MIN_SECRET_LENGTH
# What a text holds in lower case where a value in it follows Bearer (Basic, Token), and,
# with ":" or "=" in it, where one follows a secret's name.
_AUTH_WORDS = ("bearer", "basic", "token", "digest")
_AUTH_AND_NAME_WORDS = (*_AUTH_WORDS, *(w for w in _NAME_WORDS if w not in _AUTH_WORDS))


def _may_hold_credential(text: str) -> bool:
    """False for a text without ``://``, of :data:`_SHORTEST_CREDENTIAL` characters or
    more, that none of :func:`_scrub_text`'s looks would change (nearly every span's value):
    it lacks what each form they redact holds, each looked for once, where one character
    every form of a look holds (the "-" of sk-... and xoxb-...) is not missing (a search for
    one character is many times quicker than one for a word). True for every text the looks
    change, and for some more (which they then keep as it is)."""
    if (
        ("A" in text and ("AIza" in text or "AKIA" in text))
        or ("-" in text and ("sk-" in text or "xox" in text))
        or ("_" in text and ("hf_" in text or _GITHUB_KEY.search(text)))
        or "eyJ" in text  # (a JSON Web Token)
    ):  # a provider's key by its form (_KEY_FORMS)
        return True
    lower = text.lower()  # (names are of any case; Bearer and Token are names of secrets too)
    # (a loop, not any(): a generator's cost is that of a search for a word or two)
    named = ":" in text or "=" in text or "--" in text  # (--password VALUE: _OPTION_VALUE)
    for word in _AUTH_AND_NAME_WORDS if named else _AUTH_WORDS:  # noqa: SIM110 (see above)
        if word in lower:
            return True
    return False


def is_credential_name(name: str) -> bool:
    """A name inside message content or a tool call's arguments that is a credential's
    (``api_key``, ``password``, ``client_secret``, ``Authorization``, ``access_token``,
    ``x-goog-api-key``, ``token``), not one that only ends in a secret's word
    (``page_token``, ``next_page_token``, ``boarding_pass``, ``license_key``, ``s3_key``)."""
    return _credential_words([w.lower() for w in _WORDS.findall(name)])


def _credential_words(words: list[str]) -> bool:
    if not words or words == ["pwd"]:
        return False
    return (
        words[-1] in _CREDENTIAL_WORDS
        or "".join(words[-2:]) in _CREDENTIAL_PAIRS
        or words == ["token"]
    )


def _content_query_name(name: str) -> bool:
    """A URL's query parameter inside message content whose value is a credential: a
    credential's name, a bare ``key`` or ``sig`` (Gemini's ``?key=``, a signed URL's), a
    ``signature`` (``X-Amz-Signature``)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    return _credential_words(words) or words in (["key"], ["sig"]) or words[-1:] == ["signature"]


@functools.lru_cache(maxsize=4096)
def is_secret_attribute(name: str) -> bool:
    """A span attribute (or a field of one) whose value is a secret: its name ends in a
    secret's word (``http.request.header.authorization``, ``api_key``, ``x-goog-api-key``),
    not in a count's or a conversation's (``llm.token_count.prompt``, ``session.id``)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    return bool(words) and words[-2:] != ["session", "id"] and _ends_in_secret(words)


def scrub(name: str, value: Any) -> Any:
    """A span attribute's value as tcbreplay keeps it: ``[redacted]`` for a secret's
    (:func:`is_secret_attribute`), and a text's credentials redacted as
    :func:`~tcbreplay._secrets.redact` finds them by their form (in URLs, after ``Bearer``,
    after a secret's name, a provider's key), without this machine's own secrets (whose
    patterns are too slow to try on every value); ``value`` itself when nothing is secret.
    Spans' values are many and almost none holds a credential: one quick test of the text
    (:func:`_may_hold_credential`) lets most by."""
    if is_secret_attribute(name):
        return REDACTED if value not in (None, "", REDACTED) else value
    return _scrub_value(value, content=False)


def scrub_content(name: str, value: Any) -> Any:
    """A value inside a span's messages (their text or JSON text, a tool call's arguments or
    result, the tools offered) as tcbreplay keeps it: as :func:`scrub` keeps an attribute's,
    but a name says its value is a credential only when it is a credential's
    (:func:`is_credential_name`: ``api_key``, ``password``; not ``page_token`` nor
    ``boarding_pass``), and in a URL, a query parameter so named or a bare ``key``/``sig``
    (:func:`_content_query_name`). Credentials by their form (a URL's user info, a
    ``Bearer`` value, a provider's key) are redacted as anywhere else."""
    if is_credential_name(name):
        return REDACTED if value not in (None, "", REDACTED) else value
    return _scrub_value(value, content=True)


def _scrub_value(value: Any, content: bool) -> Any:
    if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH:
        return value
    if "://" in value:
        return _scrub_text(value, content)
    # (the length first: a call costs as much as a look for a word, and most values are short)
    if len(value) < _SHORTEST_CREDENTIAL or not _may_hold_credential(value):
        return value
    return _scrub_text(value, content)


def scrub_json(value: Any, name: str = "") -> Any:
    """A JSON value (a sample's metadata as an importer read it) with each text scrubbed as
    an attribute of its field's name is (:func:`scrub`); the items of a list by the list's
    name. A copy where something changed; deep values by a loop, not recursion."""
    if isinstance(value, str):
        return scrub(name, value)
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, str]] = [(value, root, 0, name)]
    while stack:
        node, parent, place, named = stack.pop()
        if isinstance(node, dict):
            copy: Any = dict(node)
            items: Iterable[tuple[Any, str]] = ((k, str(k)) for k in node)
        elif isinstance(node, list):
            copy = list(node)
            items = ((k, named) for k in range(len(node)))
        else:
            parent[place] = scrub(named, node) if isinstance(node, str) else node
            continue
        parent[place] = copy
        for key, child_name in items:
            stack.append((copy[key], copy, key, child_name))
    return root[0]


def _scrub_text(value: str, content: bool = False) -> str:
    """A text with its credentials redacted as :func:`scrub` finds them (``content``: as
    :func:`scrub_content` does; ``value`` itself when it holds none); each look starts with
    a quick test of the text."""
    text = value
    secret = _credential_words if content else _secret_words
    if "://" in text:
        # the user info of each URL, at the URL, whatever its length; and the password (the
        # user info, a secret parameter) wherever else the text echoes it, as redact does
        # (a user name alone is no secret: "the user manual" stays)
        query = _content_query_name if content else is_secret_name
        echoed = {v for _, values in _url_secrets(text, query) for v in values[-2:]}
        text = _URL.sub(_without_userinfo, text)
        for echo in sorted(echoed, key=len, reverse=True):
            if len(echo) >= MIN_SECRET_LENGTH:
                text = _pattern(echo).sub(REDACTED, text)
    lower = text.lower()
    if any(word in lower for word in _AUTH_WORDS):  # (any space after: "Bearer\t")
        text = _auth_values(text, content)
    if (
        "sk-" in text or "AIza" in text or "AKIA" in text or "xox" in text or "eyJ" in text
        or ("_" in text and ("hf_" in text or _GITHUB_KEY.search(text)))
    ):  # fmt: skip
        text = _KEY_FORMS.sub(REDACTED, text)
    if ":" in text or "=" in text:
        text = _named_values(text, secret)
    text = _cookies_and_flags(text, secret)
    return value if text == value else text


def _without_userinfo(match: re.Match[str]) -> str:
    url = match.group(0)
    userinfo = _userinfo(url)
    if userinfo is None or userinfo == REDACTED:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{REDACTED}{rest[len(userinfo) :]}"
