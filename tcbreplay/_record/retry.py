"""When to retry a model call, how long to wait, and the run-wide rate limit.

Transient failures (rate limits, 5xx, timeouts, dropped connections, a 200 whose reply
cannot be read or holds an error of such a kind) are retried with exponential backoff and
jitter, waiting at least as long as the provider's ``Retry-After`` (or Google's
``RetryInfo.retryDelay``) asks; anything else (400, authentication, a bug) fails at once.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import re
import sys
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcbreplay._clock import SYSTEM_CLOCK, Clock
from tcbreplay._record.models.anthropic_calls import ErrorBody, NoMessage

# besides every 5xx but 501 and 505 (Cloudflare's 520-524, Anthropic's 529 overloaded)
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_NOT_TRANSIENT_5XX = frozenset({501, 505})
_TRANSIENT_NAMES = frozenset(
    {"ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout",
     "RemoteProtocolError", "ReadError", "WriteError", "ServerError", "ServerDisconnectedError"}
)  # fmt: skip
# LangChain's words for a 2xx reply it could not read: a page that is no JSON (from an
# OpenAI-compatible endpoint), a completion without choices (none, none streamed, missing, null)
_UNREADABLE = (
    "Unexpected response type from OpenAI-compatible endpoint",
    "No generations found in stream",
    "Response missing 'choices' key",
    "Received response with null value for 'choices'",
)
# the function of ChatOpenAI's that reads a completion (and raises its body's "error")
_READ_COMPLETION = "_create_chat_result"
MAX_DELAY = 120.0
# the rate limiter's window: a minute
WINDOW_S = 60.0


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]


def status_code(exc: BaseException) -> int | None:
    """The HTTP status an exception (or its cause) carries, if any."""
    for e in _chain(exc):
        for attr in ("status_code", "code", "status"):
            value = getattr(e, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
        response = getattr(e, "response", None)
        value = getattr(response, "status_code", None)
        if isinstance(value, int):
            return value
    return None


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, dropped connections, a reply
    that could not be read."""
    if unreadable_reply(exc) is not None:
        return True
    code = status_code(exc)
    if code is not None:
        return code in TRANSIENT_STATUS or (500 <= code < 600 and code not in _NOT_TRANSIENT_5XX)
    for e in _chain(exc):
        if getattr(e, "transient", False) or isinstance(e, (TimeoutError, ConnectionError)):
            return True
        if type(e).__name__ in _TRANSIENT_NAMES:
            return True
    return False


def unreadable_reply(exc: BaseException) -> str | None:
    """What was wrong with the provider's reply ("could not be read", ...), when a model call
    failed on the reply rather than on its request: a 2xx whose body could not be read (no
    JSON, a proxy's page, a completion without choices) or held an error, or a stream that
    broke off with an error event. None when the call failed otherwise."""
    code = status_code(exc)
    if code is not None and not 200 <= code < 300:
        return None
    for e in _chain(exc):
        if _error_event(e):
            return "broke off with an error"
    if code is not None:
        return "could not be read"
    if error_reply(exc) is not None:  # (of a kind not known: a known one is taken as its status)
        return "held an error"
    for e in _chain(exc):
        first = str(e.args[0]) if e.args else ""
        if isinstance(e, (json.JSONDecodeError, NoMessage)) or (
            isinstance(e, (ValueError, KeyError, TypeError)) and first.startswith(_UNREADABLE)
        ):
            return "could not be read"
        # (LangChain takes the first of a completion's choices: an IndexError when it has none)
        if isinstance(e, IndexError) and _raised_in(e, "langchain_core.language_models."):
            return "held no answer"
    return None


# a provider's words for the kind of an error (its "type", "code" or "status"), and the HTTP
# status each kind is answered with when the error comes as one; first match wins
_ERROR_KINDS = (
    (re.compile(r"auth|api.?key|UNAUTHENTICATED", re.I), 401),
    (re.compile(r"permission", re.I), 403),
    (re.compile(r"billing|payment", re.I), 402),
    (re.compile(r"not.?found", re.I), 404),
    (re.compile(r"rate.?limit|too.?many|RESOURCE_EXHAUSTED|quota|^requests$|^tokens$", re.I), 429),
    (re.compile(r"overloaded", re.I), 529),
    (re.compile(r"timeout|DEADLINE_EXCEEDED", re.I), 504),
    (re.compile(r"unavailable", re.I), 503),
    (re.compile(r"server|^api.?error$|internal", re.I), 500),
    (re.compile(r"invalid|bad.?request|context.?length|too.?large", re.I), 400),
)


def error_reply(exc: BaseException) -> tuple[Mapping[str, Any], int | None, bool] | None:
    """The error a provider answered 200 with, when a model call failed on one: a body
    ``{"error": {...}}`` instead of a completion (some OpenAI-compatible gateways answer so when
    overloaded; Anthropic's API so, its body's ``type`` ``error``), or an error event in a
    stream. Returns the error, the HTTP status its kind
    stands for (its code when that is one, else its type's words; None: not known), and
    whether it came in a stream."""
    code = status_code(exc)
    if code is not None and not 200 <= code < 300:
        return None
    for e in _chain(exc):
        if _error_event(e):
            error, streamed = getattr(e, "body", None), True
            if isinstance(error, Mapping) and error.get("type") == "error":  # (Anthropic's)
                error = error.get("error")
        # (LangChain's ChatOpenAI raises the body's "error" as it came)
        elif isinstance(e, ValueError) and e.args and _raised_in(e, "langchain_openai."):
            error, streamed = e.args[0], False
            # (a body {"error": "text"}: the text, as an error of no kind)
            read = _raised_in(e, "langchain_openai.", _READ_COMPLETION)
            if read and isinstance(error, str) and not error.startswith(_UNREADABLE):
                error = {"message": error}
        elif isinstance(e, ErrorBody):  # (see anthropic_calls and streamed_bodies)
            error, streamed = e.error, False
        else:
            continue
        if isinstance(error, Mapping):
            return error, _error_status(error), streamed
    return None


def _error_status(error: Mapping[str, Any]) -> int | None:
    for key in ("code", "status"):
        value = error.get(key)
        if isinstance(value, (int, str)) and str(value).isdigit() and 400 <= int(value) < 600:
            return int(value)
    for key in ("code", "type", "status"):  # (a code says more than a type: invalid_api_key)
        value = error.get(key)
        if isinstance(value, str):
            for words, status in _ERROR_KINDS:
                if words.search(value):
                    return status
    return None


def _error_event(exc: BaseException) -> bool:
    """Whether ``exc`` is an SDK's error for an ``error`` event in a stream begun with a 200:
    Anthropic's is an APIStatusError of status 200 (its body an error), OpenAI's a bare
    APIError."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and body.get("type") == "error":
        return True
    openai = sys.modules.get("openai")  # (not imported: the error is not its)
    return openai is not None and type(exc) is openai.APIError and body is not None


def _raised_in(exc: BaseException, module: str, function: str | None = None) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or function not in (None, tb.tb_frame.f_code.co_name):
        return False
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(module)


def retry_after(exc: BaseException, clock: Clock = SYSTEM_CLOCK) -> float | None:
    """Seconds the provider asked to wait: a Retry-After header (seconds, or a date read
    against ``clock``) or a RetryInfo retryDelay."""
    for e in _chain(exc):
        headers = getattr(getattr(e, "response", None), "headers", None)
        if headers is not None:
            value = headers.get("retry-after") or headers.get("Retry-After")
            seconds = _seconds(value, clock)
            if seconds is not None:
                return seconds
        details = getattr(e, "details", None)
        delay = _retry_info(details)
        if delay is not None:
            return delay
    return None


def _seconds(value: Any, clock: Clock) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - clock.now())


def _retry_info(details: Any) -> float | None:
    if isinstance(details, dict):
        details = (details.get("error") or {}).get("details", details.get("details"))
    if not isinstance(details, list):
        return None
    for item in details:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            match = re.fullmatch(r"\s*([0-9.]+)s\s*", str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def too_long_a_wait(exc: BaseException, clock: Clock = SYSTEM_CLOCK) -> float | None:
    """The wait the provider asked for, when it is longer than retries wait (MAX_DELAY): a
    quota used up for the hour or the day, which a retry two minutes later only spends."""
    asked = retry_after(exc, clock)
    return asked if asked is not None and asked > MAX_DELAY else None


def backoff_delay(
    base: float, attempt: int, exc: BaseException | None = None, clock: Clock = SYSTEM_CLOCK
) -> float:
    """Exponential backoff with jitter for retry ``attempt`` (1-based), never below Retry-After."""
    # (the doubling stops once past any wait: 2 ** 1024 is no float, and --retries has no cap)
    delay = base * (2.0 ** min(attempt - 1, 64)) * (0.5 + random.random())
    asked = retry_after(exc, clock) if exc is not None else None
    if asked is not None:
        delay = max(delay, asked)
    return min(delay, MAX_DELAY)


class RateLimiter:
    """Run-wide limits on model calls per minute and tokens per minute (sliding 60 s windows).

    Tokens are counted after each call from the usage the model reports; a call
    waits while the last minute's tokens already reach the limit. A limiter of a resumed
    recording starts with the calls its predecessor made in the last minute
    (:meth:`prefill`), not with an empty window.
    """

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        window: float = WINDOW_S,
        clock: Clock = SYSTEM_CLOCK,
    ):
        self.rpm = rpm
        self.tpm = tpm
        self.window = window
        self.clock = clock
        # (when, weight): a call of this process weighs 1, a prefilled one its share
        self._calls: collections.deque[tuple[float, float]] = collections.deque()
        self._call_sum = 0.0
        self._tokens: collections.deque[tuple[float, float]] = collections.deque()
        self._token_sum = 0.0
        self._lock = asyncio.Lock()
        self._mutex = threading.Lock()
        self.waited = 0.0

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm)

    def prefill(
        self,
        recent: RecentUse,
        calls: float = 1.0,
        tokens: float = 1.0,
        others: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        """Start the windows with calls and tokens made before this limiter (wall-clock
        times, read against its clock), each call counted as ``calls`` of one and each
        token as ``tokens``: a process's part of its shard's (its share of the shard's calls
        a minute over the shard's, 1/P of the tokens for one of P processes); and those of
        ``recent.others`` (the run's other rows) as ``others``: its parts of the run's."""
        if not self.active:
            return
        if recent.others is not None:
            self.prefill(recent.others, *others)
        now, wall = self.clock.monotonic(), self.clock.now()
        since = wall - self.window

        def at(when: float) -> float:  # (a time ahead of this clock's: taken as now)
            return now - max(0.0, wall - when)

        if self.rpm:
            for when in sorted(t for t in recent.calls if t > since):
                self._calls.append((at(when), calls))
                self._call_sum += calls
        if self.tpm:
            for when, used in sorted(t for t in recent.tokens if t[0] > since):
                self._tokens.append((at(when), used * tokens))
                self._token_sum += used * tokens
        # oldest first, as _expire takes them (calls of its own may be there already)
        self._calls = collections.deque(sorted(self._calls))
        self._tokens = collections.deque(sorted(self._tokens))

    async def acquire(self) -> None:
        """Wait until one more call fits in both windows.

        A call fits while the window's calls and one more come to at most ``rpm``: with
        prefilled calls counted in parts (1.5 of a share of 2), admitting while the sum is
        below ``rpm`` would let each process of a run go half a call over, and together
        whole calls."""
        if not self.active:
            return
        async with self._lock:
            while (wait := self._admit()) > 0:
                await self.clock.sleep(wait)

    def acquire_blocking(self) -> None:
        """:meth:`acquire` for a synchronous call, in a thread of its own (a LangGraph node
        that is a plain function runs in one): it waits by blocking that thread. A
        limiter whose windows are kept elsewhere keeps its share here, in its own."""
        if not self.active:
            return
        while (wait := self._admit()) > 0:
            self.clock.sleep_blocking(wait)

    def _admit(self) -> float:
        """Count one more call if it fits in both windows now (0.0), else the seconds to
        wait before asking again (counted in ``waited``). Under a lock of threads: the
        calls of :meth:`acquire_blocking` come from other threads than the event loop's."""
        with self._mutex:
            now = self.clock.monotonic()
            self._expire(now)
            wait = 0.0
            # (a window with no call takes one: below 1 call, none would ever fit)
            if self.rpm and self._call_sum + 1 > self.rpm + _EPSILON and self._calls:
                wait = self._calls[0][0] + self.window - now
            if self.tpm and self._token_sum >= self.tpm and self._tokens:
                wait = max(wait, self._tokens[0][0] + self.window - now)
            if wait <= 0:
                self._calls.append((now, 1.0))
                self._call_sum += 1.0
                return 0.0
            self.waited += wait
            return wait

    def record_tokens(self, tokens: int | None) -> None:
        if self.tpm and tokens:
            with self._mutex:
                self._tokens.append((self.clock.monotonic(), tokens))
                self._token_sum += tokens

    def _expire(self, now: float) -> None:
        while self._calls and self._calls[0][0] <= now - self.window:
            self._call_sum -= self._calls.popleft()[1]
        while self._tokens and self._tokens[0][0] <= now - self.window:
            self._token_sum -= self._tokens.popleft()[1]
        if not self._calls:
            self._call_sum = 0.0  # (no float dust left behind)
        if not self._tokens:
            self._token_sum = 0.0


# parts of calls summed (1/3 + 1/3 + 1/3) miss a whole by this much at most
_EPSILON = 1e-9


@dataclass
class RecentUse:
    """The model calls and tokens a run's samples stored lately made: wall-clock seconds of
    each call, and (seconds, tokens) of each sample's tokens, for :meth:`RateLimiter.prefill`.

    Read from stored samples (:meth:`of`), it is counted conservatively: every call of a
    sample counts as made when the sample finished (none was made later, so none leaves the
    window earlier than it does here): one per AI message, one per retry (``attempts`` - 1),
    and one more for a sample that ended in error (its last call may have failed); its
    tokens, the usage its messages report, at the same time.

    A shard's (:func:`recent_use`) holds its own rows' in ``calls`` and ``tokens``, and the
    run's other rows' in ``others``: calls of other shards, or of a recording with another
    N (or none) that stored them before this one resumed the run.
    """

    calls: list[float] = field(default_factory=list)
    tokens: list[tuple[float, int]] = field(default_factory=list)
    others: RecentUse | None = None

    @classmethod
    def of(cls, samples: Iterable[tuple[Any, ...]]) -> RecentUse:
        """From stored samples' (finished_at, status, attempts, AI messages, tokens, ...)."""
        use = cls()
        for finished_at, status, attempts, ai_messages, tokens, *_ in samples:
            calls = ai_messages + max(0, (attempts or 1) - 1) + (status != "ok")
            use.calls.extend([finished_at] * calls)
            if tokens:
                use.tokens.append((finished_at, tokens))
        return use


def recent_use(
    run_dir: Path, rows: Collection[int] | None = None, clock: Clock = SYSTEM_CLOCK
) -> RecentUse:
    """The calls and tokens of the samples the run in ``run_dir`` stored in the last minute:
    what a recording resuming it starts its windows with. ``rows``: a shard's row numbers,
    whose samples' are its own; the rest are its ``others``, whichever shard stored them.

    A shard counts the others' too: shards resumed with another N than the recording that
    stored the last minute's rows (or a whole run resumed as shards) deal those rows out
    otherwise, so that a shard whose rows hold few of its calls would start a window
    nearly empty while one whose rows hold many waits, beyond --max-rpm together."""
    from tcbreplay._store.recent import recent_samples

    samples = recent_samples(run_dir, clock.now() - WINDOW_S)
    if rows is None:
        return RecentUse.of(samples)
    use = RecentUse.of(s for s in samples if s.row in rows)
    use.others = RecentUse.of(s for s in samples if s.row not in rows)
    return use
