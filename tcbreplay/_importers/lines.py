"""Traces as JSON Lines, whatever the dialect of their messages: one line per sample (and
trial), checked key by key, its messages turned into LangChain messages by the dialect.

A line is ``{"sample_id", "messages", "trial"?, "status"?, "error"?, "error_type"?,
"metadata"?}`` (a dialect may allow more keys, such as Anthropic's ``system``). Anything else
is refused with its line, and a known alias gets a hint: read silently, it would change what
is stored. The timings an export writes into the metadata and messages are taken out of them
(:mod:`tcbreplay._importers.timings`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tcbreplay import _json
from tcbreplay._importers.dialect import Sniff, TraceFile, TraceLine
from tcbreplay._importers.timings import take as take_timings
from tcbreplay._inputs.dataset import unknown_keys
from tcbreplay._secrets import redact
from tcbreplay.errors import TraceError

LINE_KEYS = ("sample_id", "trial", "messages", "status", "error", "error_type", "metadata")
_LINE_ALIASES = {
    "id": "sample_id",
    "task_id": "sample_id",
    "epoch": "trial",
    "trajectory": "messages",
    "traj": "messages",
    "conversation": "messages",
    "meta": "metadata",
    "info": "metadata",
}


# trials are numbered from 0 to MAX_TRIALS - 1
MAX_TRIALS = 2**20
# the store keeps token counts, and each sample's sums of them, as 64-bit integers
MAX_TOKENS = 2**63 - 1
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "total_tokens")
_SUMMED = ("input_tokens", "output_tokens")


# turns one line's raw messages (and the whole line) into LangChain messages; ``place`` names
# the line for errors; the line's objects that repeat a key are noted in the Repeats
Convert = Callable[[list[Any], dict[str, Any], str, _json.Repeats], list[Any]]


def read_jsonl(
    data: bytes, label: str, convert: Convert, extra_keys: tuple[str, ...] = ()
) -> list[TraceLine]:
    """Every line of a traces file, checked; ``convert`` reads each line's messages."""
    from tcbreplay._record.messages import serialize_messages

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{label}: not UTF-8 text") from exc
    out: list[TraceLine] = []
    seen: dict[tuple[str, int], int] = {}
    repeats: _json.Repeats = {}
    lines = _json.object_lines(
        text,
        label,
        TraceError,
        expected="expected an object with sample_id and messages",
        repeats=repeats,
    )
    for lineno, obj in lines:
        place = f"{label}: line {lineno}"
        problem = unknown_keys(
            obj, LINE_KEYS + extra_keys, _LINE_ALIASES, "the line",
            f"a line has {', '.join(LINE_KEYS + extra_keys)}; put other fields in metadata",
        )  # fmt: skip
        if problem:
            raise TraceError(f"{place}: {problem}")
        trace = line_fields(obj, place)
        key = (trace.sample_id, trace.trial)
        if key in seen:
            what = f"sample_id {obj['sample_id']!r}"
            if trace.trial:
                what += f", trial {trace.trial}"
            raise TraceError(f"{place}: {what} appears twice (also line {seen[key]})")
        seen[key] = lineno
        raw = obj.get("messages")
        if not isinstance(raw, list):
            raise TraceError(f"{place}: messages must be a list")
        timings = take_timings(obj, raw, place)  # (out of the metadata and messages read)
        trace.metadata, trace.attempts = obj.get("metadata") or None, timings.attempts
        trace.duration_s = timings.duration_s
        trace.messages = serialize_messages(convert(raw, obj, place, repeats), {})
        if timings.latencies is not None:
            if len(timings.latencies) != len(trace.messages):
                raise TraceError(f"{place}: {len(timings.latencies)} latencies for "
                                 f"{len(trace.messages)} messages")  # fmt: skip
            for message, latency in zip(trace.messages, timings.latencies, strict=True):
                message["latency_s"] = latency
        problem = token_problem(trace.messages)
        if problem:
            raise TraceError(f"{place}: {problem}")
        out.append(trace)
    if not out:
        raise TraceError(f"{label}: no traces in the file")
    return out


def first_messages(file: TraceFile) -> tuple[dict[str, Any], list[dict[str, Any]]] | Sniff:
    """The first line of a JSON Lines traces file and the objects among its messages, for a
    dialect's sniff; or why the file has no such line (a verdict the dialects share)."""
    first = file.first_line
    if first.problem is not None:
        return Sniff.no(first.problem)
    line = first.value
    if not isinstance(line, dict) or not isinstance(line.get("messages"), list):
        return Sniff.no("its first line is not an object with a messages list")
    return line, [m for m in line["messages"] if isinstance(m, dict)]


def line_fields(obj: dict[str, Any], place: str) -> TraceLine:
    """A line's sample id, trial, status, error and metadata, checked (messages left empty)."""
    if "sample_id" not in obj:
        raise TraceError(f"{place}: missing sample_id")
    sid = obj["sample_id"]
    if isinstance(sid, bool) or not isinstance(sid, (str, int)):
        raise TraceError(f"{place}: sample_id must be a string or an integer")
    trial = obj.get("trial", 0)
    if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial < MAX_TRIALS:
        raise TraceError(f"{place}: trial must be an integer from 0 to {MAX_TRIALS - 1}")
    status = obj.get("status", "ok")
    if status not in ("ok", "error"):
        raise TraceError(f"{place}: status must be 'ok' or 'error'")
    for key in ("error", "error_type"):
        if not isinstance(obj.get(key), (str, type(None))):
            raise TraceError(f"{place}: {key} must be a string")
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise TraceError(f"{place}: metadata must be an object")
    return TraceLine(
        sample_id=str(sid),
        messages=[],
        trial=trial,
        status=status,
        # traces recorded elsewhere may quote a key the provider was sent
        error=None if obj.get("error") is None else redact(obj["error"]),
        error_type=obj.get("error_type"),
        metadata=metadata or None,
        place=place,
    )


def message_problem(place: str, k: int, what: str, exc: Exception | None = None) -> TraceError:
    """A message a dialect cannot read, named by its line and position."""
    detail = ""
    if exc is not None:
        detail = f" ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    return TraceError(f"{place}: message {k}: {what}{detail}")


def kept_keys(
    m: dict[str, Any], known: frozenset[str], place: str, k: int, calls_in: str
) -> dict[str, Any]:
    """The keys of message ``k`` its dialect does not read, to be kept with the message
    (its ``additional_kwargs``: nothing the file holds is dropped); refused when one may be
    meant to hold calls, its name near a known key's (``tool_call``, ``contents``) or naming
    a tool, call or function: read as no calls, it would score as an agent that made none
    (``calls_in``: where the dialect's calls are)."""
    import difflib

    extra = {key: value for key, value in m.items() if key not in known}
    for key in extra:
        near = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.75)
        if near or any(word in str(key).lower() for word in ("tool", "call", "function")):
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise message_problem(place, k, f"unknown key {key!r}{hint}; {calls_in}")
    return extra


def repeated_key_problem(place: str, k: int, what: str, args: Any, repeats: _json.Repeats) -> None:
    """Refuse a call's arguments object (``what``, in message ``k``) that repeats a key: read,
    it would keep the key's last value, and the metric spec makes that an error."""
    key = _json.repeated_key(args, repeats)
    if key is not None:
        raise message_problem(place, k, f"{what} repeats the key {key!r}")


def token_problem(messages: list[dict[str, Any]]) -> str | None:
    """What in stored messages' token counts the store cannot hold, or None."""
    for m in messages:
        for name in _TOKEN_FIELDS:
            n = m.get(name)
            if n is not None and not 0 <= n <= MAX_TOKENS:
                return (
                    f"a message's {name} is {n}: a token count is an integer from 0 to {MAX_TOKENS}"
                )
    for name in _SUMMED:
        total = sum(m.get(name) or 0 for m in messages)
        if total > MAX_TOKENS:
            return f"its messages' {name} add up to {total}, more than {MAX_TOKENS}"
    return None
