"""Secrets: which names look like a secret's, and removing secrets' values from error texts.
Finding the secrets in a model's settings is :mod:`tcbreplay._model_secrets`'s, and scrubbing
the values an import keeps :mod:`tcbreplay._scrub`'s (both by the looks of texts kept here).

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
import os
import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

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
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")

_registered: set[str] = set()


def is_secret_name(name: str) -> bool:
    """A setting, header, query parameter or variable name that looks like a secret's."""
    words = [w.lower() for w in _WORDS.findall(name)]
    compact = "".join(words)
    return any(w in _SECRET_WORDS for w in words) or any(p in compact for p in _SECRET_PARTS)


def _secret_words(words: list[str]) -> bool:
    """The words of a name before a value in a text that say the value is a secret: ending in
    a secret's word (``api_key``, ``x-auth-token``; not ``KeyError``, ``token_count``, a bare
    ``key``)."""
    return words not in ([], ["key"], ["keys"]) and _ends_in_secret(words)


@dataclass(frozen=True)
class Finding:
    """A secret inside a setting: where (``path``), why, and its values (never to be shown)."""

    path: str
    why: str
    values: tuple[str, ...]


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
    ``secret``'s (:func:`_secret_words`, or inside content
    :func:`tcbreplay._scrub._credential_words`)."""
    words = [w.lower() for w in _WORDS.findall(match.group(1))]
    if not secret(words):
        return match.group(0)
    return match.group(1) + match.group(2) + REDACTED


def _ends_in_secret(words: list[str]) -> bool:
    if words[-1] in ("key", "keys") and len(words) > 1 and words[-2] in _PLAIN_KEYS:
        return False
    return words[-1] in _SECRET_WORDS or "".join(words).endswith(_SECRET_PARTS)


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
