"""Traces as JSON Lines, whatever the dialect of their messages: one line per sample (and
trial), checked key by key, its messages turned into LangChain messages by the dialect.

A line is ``{"sample_id", "messages", "trial"?, "status"?, "error"?, "error_type"?,
"metadata"?}`` (a dialect may allow more keys, such as Anthropic's ``system``). Anything else
is refused with its line, and a known alias gets a hint: read silently, it would change what
is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tcbreplay._inputs import limits
from tcbreplay._inputs.dataset import Dataset, unknown_keys
from tcbreplay._record.secrets import redact
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


@dataclass
class TraceLine:
    """One sample's trial as an importer read it: its messages serialized as the store keeps
    them (:func:`tcbreplay._record.messages.serialize_messages`)."""

    sample_id: str
    messages: list[dict[str, Any]]
    trial: int = 0
    status: str = "ok"
    error: str | None = None
    error_type: str | None = None
    metadata: dict[str, Any] | None = None
    place: str = field(default="", compare=False)


@dataclass
class SourceTraces:
    """What a traces file holds: its lines, and where the format keeps them, the samples'
    inputs and gold calls (``dataset``), the tools, the model and the benchmark."""

    lines: list[TraceLine]
    dataset: Dataset | None = None
    tools: list[dict[str, Any]] | None = None
    model: str | None = None
    benchmark: tuple[str, str] | None = None  # (name, title), where the format names one


# turns one line's raw messages (and the whole line) into LangChain messages; ``place`` names
# the line for errors
Convert = Callable[[list[Any], dict[str, Any], str], list[Any]]


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
    lines = limits.object_lines(
        text, label, TraceError, expected="expected an object with sample_id and messages"
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
        trace.messages = serialize_messages(convert(raw, obj, place), {})
        out.append(trace)
    if not out:
        raise TraceError(f"{label}: no traces in the file")
    return out


def line_fields(obj: dict[str, Any], place: str) -> TraceLine:
    """A line's sample id, trial, status, error and metadata, checked (messages left empty)."""
    if "sample_id" not in obj:
        raise TraceError(f"{place}: missing sample_id")
    sid = obj["sample_id"]
    if isinstance(sid, bool) or not isinstance(sid, (str, int)):
        raise TraceError(f"{place}: sample_id must be a string or an integer")
    trial = obj.get("trial", 0)
    if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial < 2**20:
        raise TraceError(f"{place}: trial must be an integer from 0 to {2**20 - 1}")
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
