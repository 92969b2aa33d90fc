"""When a recording stops early, and how many samples left in error a recording may end with.

Errors that retrying cannot fix stop the run at the first one: the provider refused the key
(authentication), the key may not use the model (permission), the model does not exist, or
the provider asks to wait longer than retries wait (a quota used up for the hour or the day).
A run none of whose model calls was ever answered stops once a whole first wave of samples
(one per worker) has failed after its retries: an unreachable host, a wrong base URL, a
request every sample gets wrong; or every one of them stopped at the model's token limit, which
no retry lifts (a higher limit is another run). What was finished stays stored, and the run can
be resumed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tcbreplay._record.retry import MAX_DELAY, status_code
from tcbreplay._words import count
from tcbreplay.errors import InputError

AUTHENTICATION = "authentication"
PERMISSION = "permission"
UNKNOWN_MODEL = "unknown model"
LONG_WAIT = "long wait"
# every sample of the first wave failed before any model call was answered
UNANSWERED = "unanswered"
# every sample of the first wave stopped at the model's token limit (TokenLimitReply): a
# model setting, that retrying and --retry-errors keep
TOKEN_LIMIT = "token limit"
# a recording process (--processes) ended before its samples did (see ChildFailed)
PROCESS_DIED = "process died"

# Google answers a key that is not valid with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
_KEY_INVALID = re.compile(r"API_KEY_INVALID|API key not valid|invalid[ _]api[ _]key", re.I)
# how much of a provider's error text the one line quotes
_QUOTED = 200


class ChildFailed(RuntimeError):
    """A recording process (``--processes``) ended before returning every sample it was
    given: killed, most often (the runner says it in one line, with how to go on)."""


@dataclass(frozen=True)
class Outcome:
    """What the runner needs to know of a finished sample (sent between processes)."""

    status: str
    answered: bool  # some model call of the sample was answered
    stop: str | None = None  # why the whole run must stop (AUTHENTICATION, ...)
    error: str | None = None  # "ErrorType: message", one line, redacted
    wait: float | None = None  # LONG_WAIT: the seconds the provider asked to wait
    attempts: int = 1  # its model calls' attempts: 1, plus the retries it took


def stop_reason(exc: BaseException) -> str | None:
    """Why a model call's failure stops the whole run, or None when it is the sample's own."""
    from langchain_core.exceptions import (
        ModelAuthenticationError,
        ModelNotFoundError,
        ModelPermissionDeniedError,
    )

    for e in _chain(exc):
        if isinstance(e, ModelAuthenticationError):
            return AUTHENTICATION
        if isinstance(e, ModelPermissionDeniedError):
            return PERMISSION
        if isinstance(e, ModelNotFoundError):
            return UNKNOWN_MODEL
    code = status_code(exc)
    if code == 401 or (code == 400 and any(_KEY_INVALID.search(str(e)) for e in _chain(exc))):
        return AUTHENTICATION
    return {403: PERMISSION, 404: UNKNOWN_MODEL}.get(code or 0)


class RecordStop(Exception):
    """The runner must stop: ``outcome`` is the sample that decided it."""

    def __init__(
        self, reason: str, outcome: Outcome, failed: int, cut: int = 0,
        cut_error: str | None = None, other_error: str | None = None, full: int = 0,
        full_error: str | None = None, retried: int = 0,
    ) -> None:  # fmt: skip
        super().__init__(reason)
        self.reason = reason
        self.outcome = outcome
        self.failed = failed  # samples that had failed without an answer
        # of those, the ones stopped at the model's token limit, the first one's error, and
        # the error of the last one that failed otherwise
        self.cut = cut
        self.cut_error = cut_error
        self.other_error = other_error
        # and the ones whose context window was full (ContextWindowReply), the first one's error
        self.full = full
        self.full_error = full_error
        # of those that failed without an answer, the ones retried (a 400 is not)
        self.retried = retried
        self.summary: Any = None  # the run's summary, once it is finished


class Breaker:
    """Watches finished samples and raises :class:`RecordStop` once the run must stop."""

    def __init__(self, wave: int) -> None:
        self.wave = max(1, wave)
        self.answered = False
        self.unanswered = 0
        self.cut = 0  # of the unanswered, those stopped at the model's token limit
        self.cut_error: str | None = None  # the first of those's error
        self.full = 0  # of the unanswered, those whose context window was full
        self.full_error: str | None = None  # the first of those's error
        self.other_error: str | None = None  # the last of the others'
        self.retried = 0  # of the unanswered, those retried before they failed
        self.tripped = False
        self.seen = 0  # samples finished (and stored)

    def see(self, outcome: Outcome) -> None:
        self.seen += 1
        if self.tripped:
            return
        self.answered = self.answered or outcome.answered
        if outcome.status == "ok":
            return
        reason = outcome.stop
        if reason is None and not self.answered:
            self.unanswered += 1
            self.retried += outcome.attempts > 1
            if (outcome.error or "").startswith(_TOKEN_LIMIT):
                self.cut += 1
                self.cut_error = self.cut_error or outcome.error
            elif (outcome.error or "").startswith(_CONTEXT_WINDOW):
                self.full += 1
                self.full_error = self.full_error or outcome.error
            else:
                self.other_error = outcome.error
            if self.unanswered >= self.wave:
                reason = TOKEN_LIMIT if self.cut == self.unanswered else UNANSWERED
        if reason is not None:
            self.tripped = True
            raise RecordStop(reason, outcome, self.unanswered, self.cut, self.cut_error,
                             self.other_error, self.full, self.full_error,
                             self.retried)  # fmt: skip


@dataclass(frozen=True)
class Command:
    """The command whose run stopped, in the words its stop line says."""

    name: str  # "record", "replay"
    model: str  # the option naming the model it calls: record's --model, a replay's --then
    # it takes --call-timeout, --max-rpm/--max-tpm, --retries/--backoff and --retry-errors
    limits: bool = True
    # what its stop line calls the calls it makes: a replay's recorded turns are served, and
    # only its calls to the --then model go out
    calls: str = "model call"


RECORD = Command("record", "--model")
# a replay going on live (--then): the same checks, its own options
REPLAY = Command("replay", "--then", limits=False, calls="live model call")


def stop_message(stop: RecordStop, choice: Any, command: Command = RECORD) -> str:
    """One line: why the recording (a ``command``'s run) stopped and what to set; ``choice``:
    the model it calls (None: a replay that calls none live)."""
    error = _quote(stop.outcome.error)
    keys = key_variables(choice.provider) if choice is not None else ()
    key = keys[0] if keys else "the provider's API key variable"
    base_url = choice.settings.get("base_url") if choice is not None else None
    model = choice.id if choice is not None else "the model"
    if stop.reason == AUTHENTICATION:
        return f"the provider refused the API key ({error}): set {key} to a valid key"
    if stop.reason == PERMISSION:
        return (
            f"the API key may not use {model} ({error}): set {key} to a key with access "
            f"to it, or choose another {command.model}"
        )
    if stop.reason == LONG_WAIT:
        lower = ", or set --max-rpm/--max-tpm below it" if command.limits else ""
        return (
            f"the provider asks to wait {stop.outcome.wait or MAX_DELAY:,.0f} s before the next "
            f"call, longer than retries wait ({MAX_DELAY:.0f} s): a quota is used up ({error}); "
            f"continue once it is over{lower}"
        )
    if stop.reason == UNKNOWN_MODEL:
        name = choice.name if choice is not None else model
        where = f" at {base_url}" if base_url else ""
        fix = " or --model-option base_url=" if base_url else ""
        return f"no model {name!r}{where} ({error}): check {command.model}{fix}"
    again = f"{command.name} again"
    if stop.reason == TOKEN_LIMIT:
        return _token_limit_message(stop, again)
    first = (
        f"the first {stop.failed} samples failed" if stop.failed > 1 else "the first sample failed"
    )
    # (a reply cut or with its window full is not retried, nor a request refused: a 400)
    if stop.retried == stop.failed and not stop.cut and not stop.full:
        first += " after their retries" if stop.failed > 1 else " after its retries"
    elif stop.retried and not stop.cut and not stop.full:
        first += f", {stop.retried} of them after their retries"
    partly_cut = 0 < stop.cut < stop.failed
    # the others' error (neither cut nor full), else a full context window's
    error_text = (stop.other_error or stop.full_error or stop.outcome.error) or ""
    # answered, with errors or with replies that were no answer
    answered = _SERVER_ERROR.search(error_text) or error_text.startswith(_BAD_REPLIES)
    if answered or partly_cut or stop.full:
        what = f"no {command.calls} succeeded"
    else:
        what = f"no {command.calls} was answered"
    line = f"{what}: {first} ({_quote(error_text)}): " + _unanswered_fix(
        error_text, base_url, command
    )
    if partly_cut:  # (the others' fix does not lift the limit)
        said, set_ = _limit_fix(stop.cut_error or "", again)
        line += (
            f"; {stop.cut} of the {stop.failed} stopped at the model's token limit ({said}), "
            f"which no retry lifts: {set_}, as another run"
        )
    if stop.full and stop.other_error:  # (the others' fix does not empty the window)
        line += (
            f"; {stop.full} of the {stop.failed} had the model's context window full at the "
            "first request, which neither a retry nor a higher max_tokens empties: shorten the "
            "system prompt, the tools or the inputs, or use a model with a larger context "
            "window, as another run"
        )
    return line


# an error a provider's server answered with (a 5xx, overloaded, unavailable)
_SERVER_ERROR = re.compile(r"\b5\d\d\b|overloaded|unavailable", re.I)
# a reply the provider sent that was no answer (see tcbreplay._record.agent)
_TOKEN_LIMIT = "TokenLimitReply:"
_CONTEXT_WINDOW = "ContextWindowReply:"
_BAD_REPLIES = ("TruncatedReply:", "UnreadableReply:", "EmptyModelResponse:", _TOKEN_LIMIT,
                _CONTEXT_WINDOW)  # fmt: skip
# what a TokenLimitReply's text says of the limit: "max_tokens=5, finish reason length"
_LIMIT_SAID = re.compile(r"token limit \((max_tokens.*?, finish reason \S+?)\)")


def _token_limit_message(stop: RecordStop, again: str = "record again") -> str:
    """The line of a recording whose first samples all stopped at the model's token limit
    (``again``: how the run is made again, a replay's "replay again")."""
    said, set_ = _limit_fix(stop.outcome.error or "", again)
    where = "the first sample" if stop.failed == 1 else f"each of the first {stop.failed} samples"
    return (
        f"the model stopped at its token limit in {where} ({said}), and a retry is cut off the "
        f"same way: {set_}, as another run"
    )


def _limit_fix(error: str, again: str) -> tuple[str, str]:
    """What a TokenLimitReply's ``error`` says of the limit ("max_tokens=5, finish reason
    length"), and what to set instead."""
    said = _LIMIT_SAID.search(error)
    set_ = (
        "set --model-option max_tokens=N above the provider's default"
        if "max_tokens not set" in error
        else f"{again} with a higher --model-option max_tokens=N"
    )
    return said.group(1) if said else _quote(error), set_


def replay_stop_hint(stop: RecordStop, run_id: str, command: str) -> str:
    """How to go on after a replay's ``stop`` (``command``: the one that made it, with its
    ``--run-id``). A replay has no ``--retry-errors``: run again, it replays only the samples
    it holds no row of; with another ``--then`` or ``--model-option`` it replaces the run only
    when no sample was answered live (:mod:`tcbreplay._replay.stopped`); ``--overwrite``
    replays it anew, whatever was fixed."""
    if stop.reason == TOKEN_LIMIT:
        return (
            "the same command again would be cut off again: with a higher max_tokens it "
            f"replays into a run id of its own (with --run-id: give another, or replace {run_id} "
            "with --overwrite)"
        )
    summary = stop.summary
    kept, ok = (summary.recorded, summary.ok) if summary is not None else (stop.failed, 0)
    errors = "in error" if not ok else f"{kept - ok} of them in error"
    errors = f"all {errors}" if not ok and kept > 1 else errors
    also = f" (the {ok} that ended ok too)" if ok else ""
    # what to fix in the command: for samples no retry helps, and for the others
    cut, full = (stop.cut, stop.full) if stop.reason == UNANSWERED else (0, 0)
    fixes: list[str] = []
    if cut + full < stop.failed or not stop.failed:
        fixes.append(
            "--then or its --model-option settings corrected in it, where they were at fault"
        )
    if cut:
        fixes.append(
            f"for the {cut} cut off at the token limit, a higher --model-option max_tokens=N"
        )
    if full:
        fixes.append(
            f"for the {full} whose context window was full, shorter inputs in --system-prompt, "
            "--tools or --dataset, or a --then model with a larger context window"
        )
    return (
        f"the run keeps its {count(kept, 'finished sample')}, {errors}, which the same command "
        f"does not replay again: once fixed ({'; '.join(fixes)}), replay {_them(kept)} anew "
        f"with: {command} --overwrite{also}"
    )


def stop_hint(stop: RecordStop, run_id: str, named: bool) -> str | None:
    """How to go on after ``stop``, when the usual ``--retry-errors`` cannot help (None
    otherwise); ``named``: the recording was given its run id (``--run-id``)."""
    cut, full = (stop.cut, stop.full) if stop.reason == UNANSWERED else (0, 0)
    if stop.reason == TOKEN_LIMIT:
        cut = stop.failed
    if not cut and not full:
        return None
    kept = ""
    if stop.summary:
        kept = f"the run keeps its {count(stop.summary.recorded, 'finished sample')}, "
    vain: list[str] = []  # what --retry-errors would do again in vain
    other: list[str] = []  # and what another run is
    if cut:
        them = _them(cut) if cut == stop.failed else f"the {cut} cut off at the token limit"
        vain.append(f"record {them} with max_tokens as it is, to be cut off again")
        other.append("a higher max_tokens")
    if full:
        them = _them(full) if full == stop.failed else f"the {full} whose context window was full"
        vain.append(f"send {them} the same first requests, to fill the context window again")
        other.append("shorter inputs or a model with a larger context window")
    others = " once the others' fault is fixed," if cut + full < stop.failed else ""
    where = (
        f"give it another --run-id (or replace {run_id} with --overwrite)"
        if named
        else "the same command with it records one under a run id of its own"
    )
    return (
        f"{kept}but --retry-errors would {' and '.join(vain)}:{others} {' or '.join(other)} is "
        f"another run: {where}"
    )


def _them(n: int) -> str:
    return "it" if n == 1 else "them"


def _unanswered_fix(error: str, base_url: str | None, command: Command = RECORD) -> str:
    kind = error.partition(":")[0]
    if kind == "CallTimeout":
        return "check the endpoint" + (", or raise --call-timeout" if command.limits else "")
    if kind == "SampleTimeout":
        return "check the endpoint, or raise --timeout"
    if kind == "TruncatedReply":
        return (
            "the provider's streamed replies were cut off before their end: try again later, "
            f"or {command.name} without --model-option streaming=true"
        )
    if kind == "EmptyModelResponse":
        return (
            "the provider answered with empty replies (their finish reason says why; SAFETY: "
            "it withheld them): check --model, its --model-option settings and the prompt"
        )
    if kind == "TokenLimitReply":  # (among other errors; a model setting --retry-errors keeps)
        return (
            f"the model's replies stopped at its token limit: {command.name} again with a "
            "higher --model-option max_tokens=N (another run)"
        )
    if kind == "ContextWindowReply":  # (no call answered: the first request fills it)
        return (
            "the model's context window was full at the first request, which a higher "
            "max_tokens does not help: shorten the system prompt, the tools or the inputs, or "
            "use a model with a larger context window"
        )
    if kind == "UnreadableReply":
        where = base_url or "the provider's endpoint"
        return (
            f"the provider answered with replies that could not be used: check that {where} "
            "is the model's API (a proxy's or a login page is not), or try again later"
        )
    if kind in ("AgentStateError", "AgentRaised"):  # (see tcbreplay._record.sample)
        return "the agent failed on its own: check the graph that --agent builds"
    if re.search(r"\b429\b|RESOURCE_EXHAUSTED|rate limit", error, re.I):
        limit = (
            "set --max-rpm or --max-tpm, or lower --workers"
            if command.limits
            else "lower --workers"
        )
        return f"rate limited: {limit}"
    if re.search(r"\b400\b|INVALID_ARGUMENT|invalid", error, re.I):
        return (
            f"the provider refuses the request: check {command.model} and --model-option settings"
        )
    if _SERVER_ERROR.search(error):
        again = (
            "(the same command, or --retry-errors), or raise --retries and --backoff"
            if command.limits
            else "(the same command)"
        )
        return f"the provider answered with server errors: try again later {again}"
    where = base_url or "the provider"
    return (
        f"check that {where} can be reached (--model-option base_url=... for a proxy or a "
        "compatible endpoint) and the network"
    )


def key_variables(provider: str) -> tuple[str, ...]:
    from tcbreplay._record.models import KEY_VARIABLES

    return KEY_VARIABLES.get(provider, ())


_STATUS = re.compile(r"\b([45][0-9]{2}) ([A-Z][A-Z_]+)\b")
_MESSAGE = re.compile(r"""['"]message['"]:\s*(['"])(.+?)(?<!\\)\1""")


def _quote(error: str | None) -> str:
    """The error as the line quotes it: its type, and a provider's status and message when
    its text holds them (Google's error texts hold the whole JSON body), cut short."""
    text = error or "no error text"
    kind, sep, rest = text.partition(": ")
    status, message = _STATUS.search(rest), _MESSAGE.search(rest)
    if sep and status and message:
        text = f"{kind}: {status.group(1)} {status.group(2)}: {message.group(2)}"
    return text if len(text) <= _QUOTED else text[: _QUOTED - 1] + "…"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


@dataclass(frozen=True)
class MaxErrors:
    """How many samples left in error a recording may end with: a count, or a fraction of
    the samples recorded (``--max-errors 5``, ``--max-errors 0.05`` or ``5%``)."""

    count: int | None = 0
    fraction: float | None = None

    @classmethod
    def parse(cls, text: MaxErrors | str | int | float | None) -> MaxErrors:
        if isinstance(text, MaxErrors):
            return text
        if text is None:
            return cls()
        if isinstance(text, int) and not isinstance(text, bool):
            return cls._count(text, str(text))
        raw = str(text).strip()
        try:
            if raw.endswith("%"):
                return cls._fraction(float(raw[:-1]) / 100, raw)
            if re.fullmatch(r"-?[0-9]+", raw):  # (-1: a count, not a fraction, refused)
                return cls._count(int(raw), raw)
            return cls._fraction(float(raw), raw)
        except ValueError:
            raise InputError(
                f"--max-errors {raw}: expected a number of samples (5) or a fraction of "
                "them (0.05 or 5%)"
            ) from None

    @classmethod
    def _count(cls, n: int, raw: str) -> MaxErrors:
        if n < 0:
            raise InputError(f"--max-errors {raw}: must not be negative")
        return cls(count=n)

    @classmethod
    def _fraction(cls, f: float, raw: str) -> MaxErrors:
        if not 0.0 <= f <= 1.0:
            raise InputError(f"--max-errors {raw}: a fraction must be between 0 and 1 (0%-100%)")
        return cls(count=None, fraction=f)

    def allows(self, errors: int, recorded: int) -> bool:
        if self.fraction is not None:
            return errors <= self.fraction * recorded
        return errors <= (self.count or 0)

    def __str__(self) -> str:
        if self.fraction is not None:
            return f"{self.fraction * 100:.4g}% of the samples recorded"
        return str(self.count)
