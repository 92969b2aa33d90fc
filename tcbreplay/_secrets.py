"""Secrets: which settings look like one (refused as model options), and removing their values
from error texts.

API keys come from the environment only and tcbreplay never writes them, but a provider or
a proxy can quote the key it was sent in an error message, and error texts are stored
(``samples.error``) and printed. Every error text passes :func:`redact` on its way into the
store and onto the screen: it replaces the value of every environment variable whose name
looks like a secret (``GOOGLE_API_KEY``, ``OPENAI_API_KEY``, ``HF_TOKEN``, ...) and every
secret the model's settings hold (:func:`register`) with ``[redacted]``, in every form a server
may echo it (:func:`_pattern`). A variable holding the path of a file or folder that exists
(``PWD``, ``OLDPWD``, a credentials file's path) holds no secret.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from tcbreplay.errors import ModelError

REDACTED = "[redacted]"
# Shorter values are no real keys, and replacing them would blank out ordinary words.
MIN_SECRET_LENGTH = 8

# Words of a name (split at separators and camelCase) that make it a secret's name. "tokens"
# is not one: max_tokens and max_output_tokens are counts.
_SECRET_WORDS = frozenset(
    {"key", "keys", "apikey", "passkey", "token", "secret", "secrets", "password", "passwords",
     "passwd", "pwd", "pass", "passphrase", "credential", "credentials", "creds", "auth",
     "authorization", "cookie", "bearer", "signature", "sig", "pat", "jwt"}
)  # fmt: skip
# The words before "key" that make a name no secret's (a tool's ``sort_key`` argument, a
# record's ``primary_key``, a ``public_key``): such values were redacted from tool calls.
_PLAIN_KEYS = frozenset(
    {"sort", "primary", "foreign", "partition", "cache", "idempotency", "dedup", "dedupe",
     "lookup", "group", "row", "hash", "map", "unique", "composite", "index", "order", "shard",
     "routing", "message", "object", "bucket", "file", "public", "record", "item", "table",
     "column", "field", "entry", "dict", "sorting", "join", "grouping", "cluster", "range"}
)  # fmt: skip
# Run together, a name holding one of these is a secret's name too (apiKey, x-goog-api-key).
_SECRET_PARTS = ("apikey", "accesskey", "secretkey", "privatekey", "password", "passwd",
                 "secret", "credential", "authorization", "accesstoken", "authtoken",
                 "sessionid")  # fmt: skip
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
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
_AUTH_VALUE = re.compile(r"\s*(Bearer|Basic|Token|Digest)\s+\S{8,}", re.IGNORECASE)

_registered: set[str] = set()


def is_secret_name(name: str) -> bool:
    """A setting, header, query parameter or variable name that looks like a secret's."""
    words = [w.lower() for w in _WORDS.findall(name)]
    compact = "".join(words)
    return any(w in _SECRET_WORDS for w in words) or any(p in compact for p in _SECRET_PARTS)


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


def _secret_words(words: list[str]) -> bool:
    """The words of a name before a value in a text that say the value is a secret: ending in
    a secret's word (``api_key``, ``x-auth-token``; not ``KeyError``, ``token_count``, a bare
    ``key``)."""
    return words not in ([], ["key"], ["keys"]) and _ends_in_secret(words)


def _content_query_name(name: str) -> bool:
    """A URL's query parameter inside message content whose value is a credential: a
    credential's name, a bare ``key`` or ``sig`` (Gemini's ``?key=``, a signed URL's), a
    ``signature`` (``X-Amz-Signature``)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    return _credential_words(words) or words in (["key"], ["sig"]) or words[-1:] == ["signature"]


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
    """``text`` with every known secret's value replaced by ``[redacted]``, and every value
    that says it is one: after ``Bearer`` (``Basic``, ``Token``), after a name that is a
    secret's (``api_key=...``, ``"client_secret": "..."``), and a provider's key by its form
    (``sk-...``, ``AIza...``, ``AKIA...``): error texts imported from elsewhere quote keys
    this machine's environment does not hold."""
    if not text:
        return text
    env = os.environ if environ is None else environ
    secrets = set(_env_secrets(env)) | _registered | _url_credentials(text, *env.values())
    # longest first, so that a secret containing another is replaced whole
    for secret in sorted(secrets, key=len, reverse=True):
        text = _pattern(secret).sub(REDACTED, text)
    text = _auth_values(text)
    text = _cookies_and_flags(_named_values(text, _secret_words), _secret_words)
    return _KEY_FORMS.sub(REDACTED, text)


# what says a value in a text is a secret (see redact)
_AUTH_IN_TEXT = re.compile(
    r"\b((?:Bearer|Basic|Token)(?:\s|%20|\+)+)(?!\[redacted\])[A-Za-z0-9._~+/=-]{8,}",
    re.IGNORECASE,
)  # (the space percent-encoded, or a "+", in a URL's query)
# inside message content, the scheme's word stands alone: "--page-token VALUE" is data
_AUTH_IN_CONTENT = re.compile(r"(?<![-.])" + _AUTH_IN_TEXT.pattern, re.IGNORECASE)
# HTTP Digest's answer: its parameters to the line's end (``Digest username="...", ...``)
_DIGEST_IN_TEXT = re.compile(r"\b(Digest\s+)(?!\[redacted\])(?=[A-Za-z]+=)[^\r\n]{8,}", re.I)
# (a name is taken whole, never backtracked into: a text's every word is tried once)
# (a value may hold ":", as a password or a user:password pair does; a quoted one, spaces
# too, up to its closing quote: a passphrase of words, unless it is an authorization's scheme
# and value, whose scheme is kept: see _AUTH_IN_TEXT)
_NAMED_VALUE = re.compile(r"(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]++)(\\?[\"']?\s*[:=]\s*\\?[\"']?)"
                          r"(?!\[redacted\])(?!(?i:bearer|basic|token|digest)\s)"
                          r"((?<=\")[^\"\\\r\n]{8,}(?=\\?\")|(?<=')[^'\\\r\n]{8,}(?=\\?')"
                          r"|[^\s\"'\\,;&}\]=][^\s\"'\\,;&}\]=]{7,})")  # fmt: skip
_KEY_FORMS = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}|AKIA[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|hf_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{30,}|[sr]k_(?:live|test)_[A-Za-z0-9]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)


def _credential(match: re.Match[str]) -> str:
    """``Bearer VALUE`` with its value redacted when it reads as a credential (a digit in it,
    or 16 characters or more), not as words (``Token limitations``); after the word in
    lower case (``authorization: bearer VALUE``), prose's more often: a digit in it. After
    an ``Authorization:`` header's name, always (``Basic`` of a short user:password)."""
    value = match.group(0)[len(match.group(1)) :]
    digit = any(c.isdigit() for c in value)
    if digit or (len(value) >= 16 and not match.group(1).islower()):
        return match.group(1) + REDACTED
    if _AFTER_HEADER.search(match.string, 0, match.start()):
        return match.group(1) + REDACTED
    return match.group(0)


# an Authorization header's name and separator, just before its scheme
_AFTER_HEADER = re.compile(r"authorization\\?[\"']?\s*[:=]\s*\\?[\"']?\Z", re.IGNORECASE)


def _auth_values(text: str, content: bool = False) -> str:
    """``text`` with the values after ``Bearer``, ``Basic``, ``Token`` (any case; inside
    ``content``, the word not the end of a name such as ``page-token``) and HTTP Digest's
    parameters redacted."""
    text = (_AUTH_IN_CONTENT if content else _AUTH_IN_TEXT).sub(_credential, text)
    if "igest" in text or "IGEST" in text:
        text = _DIGEST_IN_TEXT.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _named_value(match: re.Match[str], secret: Callable[[list[str]], bool]) -> str:
    """A ``name: value`` of a text with its value redacted when the words of its name are a
    ``secret``'s (:func:`_secret_words`, or inside content :func:`_credential_words`)."""
    words = [w.lower() for w in _WORDS.findall(match.group(1))]
    if not secret(words):
        return match.group(0)
    return match.group(1) + match.group(2) + REDACTED


def _ends_in_secret(words: list[str]) -> bool:
    if words[-1] in ("key", "keys") and len(words) > 1 and words[-2] in _PLAIN_KEYS:
        return False
    return words[-1] in _SECRET_WORDS or "".join(words).endswith(_SECRET_PARTS)


@functools.lru_cache(maxsize=4096)
def is_secret_attribute(name: str) -> bool:
    """A span attribute (or a field of one) whose value is a secret: its name ends in a
    secret's word (``http.request.header.authorization``, ``api_key``, ``x-goog-api-key``),
    not in a count's or a conversation's (``llm.token_count.prompt``, ``session.id``)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    return bool(words) and words[-2:] != ["session", "id"] and _ends_in_secret(words)


def scrub(name: str, value: Any) -> Any:
    """A span attribute's value as tcbreplay keeps it: ``[redacted]`` for a secret's
    (:func:`is_secret_attribute`), and a text's credentials redacted as :func:`redact` finds
    them by their form (in URLs, after ``Bearer``, after a secret's name, a provider's key),
    without this machine's own secrets (whose patterns are too slow to try on every value);
    ``value`` itself when nothing is secret. Spans' values are many and almost none holds a
    credential: one quick test of the text (:func:`_may_hold_credential`) lets most by."""
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


# A cookie header's value, whole (``Cookie: sid=...; theme=dark``: the names in it are the
# cookies', no secret's), and a command line's option named as a secret is, with its value
# after a space (``--password VALUE``, ``--api-key VALUE``; ``--api-key=VALUE`` is a named
# value already).
_COOKIE_VALUE = re.compile(
    r"(?<![a-z0-9_.-])((?:set-)?cookie\\?[\"']?\s*[:=]\s*\\?[\"']?)(?!\[redacted\])"
    r"[^\r\n\"'\\]{8,}",
    re.IGNORECASE,
)
_OPTION_VALUE = re.compile(
    r"(?<![A-Za-z0-9_-])(--([A-Za-z][A-Za-z0-9_-]*)[ \t]+)(?!-|\[redacted\])"
    r"[^\s\"'\\,;&}\]]{8,}"
)


def _cookies_and_flags(text: str, secret: Callable[[list[str]], bool] = _secret_words) -> str:
    """``text`` with the values of :data:`_COOKIE_VALUE` and :data:`_OPTION_VALUE` (an option
    whose name's words are a ``secret``'s) redacted."""
    if "--" in text:
        text = _OPTION_VALUE.sub(lambda m: _option_value(m, secret), text)
    if ("ookie" in text or "OOKIE" in text) and (":" in text or "=" in text):
        text = _COOKIE_VALUE.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def _option_value(match: re.Match[str], secret: Callable[[list[str]], bool]) -> str:
    words = [w.lower() for w in _WORDS.findall(match.group(2))]
    if not secret(words):
        return match.group(0)
    return match.group(1) + REDACTED


# (the starts of _KEY_FORMS' keys with "_" in them: one search, not one for each form)
_GITHUB_KEY = re.compile(r"gh[pousr]_|github_pat_|gsk_|[sr]k_(?:live|test)_")
# the words a secret's name ends in (their starts: "pass" for password, passwd, passphrase),
# what may follow one before its value, and the characters of a name
_NAME_WORDS = ("key", "token", "secret", "pass", "pwd", "credential", "auth", "cookie", "bearer",
               "sig", "sessionid")  # fmt: skip
_BEFORE_VALUE = re.compile(r"[a-z]{0,10}\\?[\"']?\s*[:=]")  # (auth, then "orization")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _named_values(text: str, secret: Callable[[list[str]], bool] = _secret_words) -> str:
    """``text`` with :data:`_NAMED_VALUE`'s secrets (a name whose words are a ``secret``'s)
    redacted, as its ``sub`` would, tried only where a secret's word stands before ``:`` or
    ``=`` (the whole text is not scanned)."""
    lower = text.lower()
    if len(lower) != len(text):  # "İ" is two characters in lower case: places would shift
        lower = text.translate(_ASCII_LOWER)
    starts = set()
    for word in _NAME_WORDS:
        at = lower.find(word)
        while at >= 0:
            if _BEFORE_VALUE.match(lower, at + len(word)):
                start = at
                while start and text[start - 1] in _NAME_CHARS:
                    start -= 1
                starts.add(start)
            at = lower.find(word, at + 1)
    if not starts:
        return text
    out, done = [], 0
    for start in sorted(starts):
        match = _NAMED_VALUE.match(text, start) if start >= done else None
        if match:
            out += [text[done:start], _named_value(match, secret)]
            done = match.end()
    return "".join(out) + text[done:]


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


def shown_path(target: str) -> str:
    """An HTTP request's target as a server of ours says it in a reply or a log line: its
    query string left out (a client may put its key there, as ``?api_key=...``), secrets'
    values redacted."""
    path, query, _ = target.partition("?")
    return redact(path) + ("?..." if query else "")


def _env_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """Secret value -> the name of the environment variable holding it: a variable whose
    name means a credential, unless it holds a path that exists (``PWD``: the working
    folder, not a password; no key is the name of a file)."""
    return {
        value: name
        for name, value in environ.items()
        if len(value) >= MIN_SECRET_LENGTH and is_secret_name(name) and not os.path.exists(value)
    }


def _url_credentials(*texts: str) -> set[str]:
    """The credentials of the URLs in ``texts`` (user info, secret query parameters), as
    :func:`redact` removes them: those of the error text itself, and those of any
    environment variable's URL (an endpoint such as ``AWS_ENDPOINT_URL_S3``, a proxy), which
    a storage library may quote in its error whatever the variable's name."""
    found: set[str] = set()
    for text in texts:
        if "://" in text:
            for _, values in _url_secrets(text):
                found.update(v for v in values if len(v) >= MIN_SECRET_LENGTH)
    return found


def _userinfo(url: str) -> str | None:
    """The user info of a URL (``user:password`` before its host), None without one. A
    password holding ``/`` (as ``urllib.parse.quote`` leaves it) ends the host where a URL
    parser reads it: a "host" whose port is no number, then ``@`` further on, is user info."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return None
    if "@" in netloc:
        return netloc.rpartition("@")[0]
    host, colon, port = netloc.partition(":")
    rest = url.partition("://")[2]
    if colon and host and not port.isdigit() and "@" in rest:
        return rest.partition("@")[0] or None
    return None


def _without_userinfo(match: re.Match[str]) -> str:
    url = match.group(0)
    userinfo = _userinfo(url)
    if userinfo is None or userinfo == REDACTED:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{REDACTED}{rest[len(userinfo) :]}"


def _url_secrets(
    text: str, secret_name: Callable[[str], bool] = is_secret_name
) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Why, and which values, for each credential of a URL in ``text``: its user info (and
    the user and password in it; the user info and password last), and its query parameters
    with a secret's name (``secret_name``)."""
    for url in _URL.findall(text):
        try:
            parts = urlsplit(url)
        except ValueError:
            continue
        userinfo = _userinfo(url)
        if userinfo is not None:
            user, _, password = userinfo.partition(":")
            values = tuple(unquote(v) for v in (user, userinfo, password) if v)
            yield "holds a URL with a user name or password", values
        for query in (parts.query, parts.fragment):
            for key, value in parse_qsl(query, keep_blank_values=True):
                if value and secret_name(key):
                    yield f"holds a URL whose parameter {key!r} is secret", (value,)


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


@functools.lru_cache(maxsize=256)
def _pattern(secret: str) -> re.Pattern[str]:
    """Every form a server, a proxy or a client library may echo ``secret`` in.

    The secret itself and its base64 encodings (standard and URL-safe alphabets, with and
    without padding, and at any of the three offsets it may have inside a longer encoded
    text such as ``Basic base64(user:key)``), each character of them as is, percent-encoded
    (either hex case, any safe set, once or more: ``%2F``, ``%2f``, ``%252F``), JSON-escaped
    (``\\/``, ``\\u002f``, nested in JSON strings), or ``+`` read back as a space.
    """
    texts = {secret, *_base64_forms(secret)} - {""}  # (an empty form would match everywhere)
    # longest first: a padded form before the same form unpadded
    alternatives = sorted(texts, key=len, reverse=True)
    return re.compile("|".join("".join(map(_char_pattern, t)) for t in alternatives))


def _base64_forms(secret: str) -> Iterator[str]:
    """The base64 texts that encode ``secret``: for each offset of its first byte in a group
    of three, the characters that only its bytes decide, and with the encoding ending at
    its end, the last character and the padding too."""
    data = secret.encode()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for offset in range(3):
            encoded = encode(bytes(offset) + data).decode()
            start = -(-offset * 8 // 6)  # the first character holding none of the offset's bits
            end = (offset + len(data)) * 8 // 6  # the characters holding only the secret's bits
            yield encoded[start:end]
            yield encoded[start:].rstrip("=")
            yield encoded[start:]


_HEX = {d: f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in "0123456789ABCDEF"}


def _char_pattern(char: str) -> str:
    """A regular expression for one character of a secret in any of its escaped forms."""
    forms = [re.escape(char)]
    # percent-encoded, in either case, and the % itself encoded again (%252F)
    pairs = [f"{byte:02X}" for byte in char.encode()]
    forms.append("".join(f"%(?:25)*{_HEX[pair[0]]}{_HEX[pair[1]]}" for pair in pairs))
    # JSON-escaped, the backslash itself escaped in a JSON string inside a JSON string
    if len(char.encode("utf-16-le")) == 2:
        forms.append(r"\\+u" + "".join(_HEX[d] for d in f"{ord(char):04X}"))
    if char in '"/\\':
        forms.append(r"\\+" + re.escape(char))
    if char == "+":  # read from a query string as a space
        forms.append(" ")
    return f"(?:{'|'.join(forms)})"


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
