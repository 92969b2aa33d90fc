"""A trial's timings in the JSON Lines forms (LangChain's, OpenAI's), which have no fields of
their own for them: written by ``export`` where the forms leave room, read back by ``import``.

A line's ``metadata`` holds the trial's ``tcbreplay.attempts`` (how many times it was tried)
and ``tcbreplay.duration_s`` (its seconds, start to end); each message's latency (its model
call's or tool run's seconds) is in the message's ``response_metadata`` in LangChain's form
(``tcbreplay.latency_s``), and in OpenAI's, whose messages have no room for it, in the line's
``metadata`` as a list by the messages' positions (``tcbreplay.latency_s``, null where a message
has none). ``import`` takes these keys out again, so the messages and metadata it stores are
those exported, and the trial's attempts, duration and latencies are the exported run's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tcbreplay.errors import TraceError

ATTEMPTS = "tcbreplay.attempts"
DURATION = "tcbreplay.duration_s"
LATENCY = "tcbreplay.latency_s"


@dataclass
class Timings:
    """What a line says of its trial's timings (None where it says nothing)."""

    attempts: int | None = None
    duration_s: float | None = None
    latencies: list[float | None] | None = None  # by the stored messages' positions


def put(line: dict[str, Any], trace: dict[str, Any], fmt: str) -> None:
    """Write the timings of ``trace`` (as :func:`tcbreplay._store.export.run_traces` reads
    them with ``timings``) into its ``line`` of ``fmt`` (``langchain`` or ``openai``)."""
    meta: dict[str, Any] = {}
    if trace.get("attempts") is not None:
        meta[ATTEMPTS] = trace["attempts"]
    if trace.get("duration_s") is not None:
        meta[DURATION] = trace["duration_s"]
    latencies = trace.get("latencies") or []
    if any(latency is not None for latency in latencies):
        if fmt == "openai":
            meta[LATENCY] = latencies
        else:
            for message, latency in zip(line["messages"], latencies, strict=True):
                if latency is not None:
                    data = message.setdefault("data", {})
                    data["response_metadata"] = {
                        **(data.get("response_metadata") or {}),
                        LATENCY: latency,
                    }
    if meta:
        line["metadata"] = {**(line.get("metadata") or {}), **meta}


def take(line: dict[str, Any], raw: list[Any], place: str) -> Timings:
    """Take the timings out of a line (its ``metadata``, and its LangChain messages'
    ``response_metadata``, ``raw``), in place; a :class:`TraceError` naming the line for a
    value that is none."""
    found = Timings()
    meta = line.get("metadata")
    if isinstance(meta, dict):
        if ATTEMPTS in meta:
            attempts = meta.pop(ATTEMPTS)
            if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
                raise TraceError(f"{place}: metadata.{ATTEMPTS} must be a whole number of 0 "
                                 "or more")  # fmt: skip
            found.attempts = attempts
        if DURATION in meta:
            found.duration_s = _seconds(meta.pop(DURATION), f"{place}: metadata.{DURATION}")
        if LATENCY in meta:
            given = meta.pop(LATENCY)
            if not isinstance(given, list) or len(given) != len(raw):
                raise TraceError(f"{place}: metadata.{LATENCY} must be a list of a latency "
                                 f"(or null) per message, {len(raw)}")  # fmt: skip
            where = f"{place}: metadata.{LATENCY}"
            found.latencies = [_seconds(v, f"{where}[{k}]") for k, v in enumerate(given)]
        if not meta:  # (nothing but the timings)
            line.pop("metadata")
    for k, message in enumerate(raw):
        data = message.get("data") if isinstance(message, dict) else None
        kept = data.get("response_metadata") if isinstance(data, dict) else None
        if isinstance(kept, dict) and LATENCY in kept:
            latency = _seconds(kept.pop(LATENCY), f"{place}: message {k}: {LATENCY}")
            if found.latencies is None:
                found.latencies = [None] * len(raw)
            found.latencies[k] = latency
    return found


def _seconds(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(f"{where} must be a number of seconds (or null)")
    if value < 0:
        raise TraceError(f"{where} must be a number of seconds, not negative")
    return float(value)
