"""A sample's model calls and tool runs laid out as one conversation, and that conversation
as the store keeps messages.

Each model call's messages sent, those not already laid out (a call's input repeats the
history before it), then its answer, in the order the calls were put in (see
:mod:`tcbreplay._importers.otel.samples`). Tool results no model call was sent (the last
calls of a sample) come from the tool runs, matched by call id; a sample whose model calls
hold no answer (content capture off) is told by its tool runs alone, each a call and its
result. A tool run that holds no result and did not fail (its span ended without one, or its
content was not captured) gave none: its call is stored without a result, not with an empty
one, and the run is handed back to be said.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tcbreplay._importers.otel.calls import Call, Message, ToolRun, Turn
from tcbreplay.errors import TcbReplayWarning

__all__ = ["Entry", "conversation", "stored", "warn_resultless"]


@dataclass(slots=True)
class Entry:
    """A message of the conversation, with the model call that answered it or the tool
    run that gave it, where one did."""

    message: Message
    turn: Turn | None = None
    run: ToolRun | None = None


def conversation(
    turns: Sequence[Turn],
    runs: Sequence[ToolRun],
    unmatched: list[ToolRun] | None = None,
    models_seen: bool = True,
    resultless: list[ToolRun] | None = None,
) -> list[Entry]:
    """The model calls' messages as one conversation, tool results from the tool runs (see
    the module docstring); ``unmatched`` is given the runs that answer no call the model
    made (left out of the conversation), ``resultless`` the runs whose call was left without
    a result because they hold none. Without ``models_seen`` the turns are an agent span's
    messages, its model calls untraced: its tool runs are its calls."""
    out: list[Entry] = []
    keys: list[tuple[Any, ...]] = []
    for t in turns:
        sent = [m.key() for m in t.inputs]
        k = _overlap(keys, sent)
        for m, key in zip(t.inputs[k:], sent[k:], strict=True):
            out.append(Entry(m))
            keys.append(key)
        for m in t.outputs:
            out.append(Entry(m, turn=t))
            keys.append(m.key())
    # only where no model answer was captured can the tool runs say what the model called:
    # an answer in text alone called nothing, and a tool run beside it answers no call
    said = any(e.message.calls or (models_seen and e.turn and e.message.text.strip()) for e in out)
    resultless = [] if resultless is None else resultless
    if runs and not said:
        return _from_runs(out, runs, resultless)
    return _with_results(out, runs, [] if unmatched is None else unmatched, resultless)


def _overlap(laid: list[tuple[Any, ...]], sent: list[tuple[Any, ...]]) -> int:
    """How many of a model call's messages are the end of those laid out already."""
    n = len(laid)
    if sent[:n] == laid:
        return n
    for k in range(min(n, len(sent)), 0, -1):
        if laid[n - k :] == sent[:k]:
            return k
    return 0


def _with_results(
    out: list[Entry],
    runs: Sequence[ToolRun],
    unmatched: list[ToolRun],
    resultless: list[ToolRun],
) -> list[Entry]:
    """``out`` with each call no tool message answers answered by its tool run (by call id,
    else the next run of that tool), and each tool message given its run (for latency);
    the runs that answer no call go to ``unmatched``, those that would answer one but hold
    no result to ``resultless``. Calls without an id (Gemini's) are
    answered by the results without one that follow them, in order."""
    by_id = {r.call_id: r for r in runs if r.call_id}
    unnamed: dict[str, list[ToolRun]] = {}
    for r in runs:
        if not r.call_id:
            unnamed.setdefault(r.name, []).append(r)
    answered = {e.message.call_id for e in out if e.message.role == "tool"}
    used: set[int] = set()  # (the runs that answer a call)
    result: list[Entry] = []
    k = 0
    while k < len(out):
        e = out[k]
        result.append(e)
        k += 1
        if e.message.role != "assistant" or not e.message.calls:
            continue
        idless: list[Entry] = []  # the results after it without a call id, in order
        while k < len(out) and out[k].message.role == "tool":
            tool = out[k]
            if tool.run is None and tool.message.call_id in by_id:
                tool.run = by_id[tool.message.call_id]
            if tool.message.call_id is None:
                idless.append(tool)
            result.append(tool)
            k += 1
        for call in e.message.calls:
            run = by_id.get(call.id) if call.id else None
            if run is None and unnamed.get(call.name):
                run = unnamed[call.name].pop(0)
            if run is not None:
                used.add(id(run))
            if call.id is not None and call.id in answered:
                continue
            if call.id is None and idless:  # (calls without ids are answered in order)
                tool = idless.pop(0)
                tool.run = tool.run or run
                continue
            if run is not None and _gave_result(run):
                result.append(Entry(_result(run, call.id), run=run))
            elif run is not None:
                resultless.append(run)
    used.update(id(e.run) for e in result if e.run is not None)
    unmatched.extend(r for r in runs if id(r) not in used)
    return result


def _from_runs(out: list[Entry], runs: Sequence[ToolRun], resultless: list[ToolRun]) -> list[Entry]:
    """A sample whose model calls hold no answer (none, or empty ones) told by its tool
    runs: the messages sent, each run as a call and its result (a run that holds none, to
    ``resultless``: its call alone), then the last answer."""
    head = [e for e in out if e.turn is None]
    last = [e for e in out if e.turn is not None][-1:]
    body: list[Entry] = []
    for r in runs:
        call_id = r.call_id or f"run-{r.span_id}"
        call = Call(call_id, r.name, r.args if r.args is not None else {})
        body.append(Entry(Message("assistant", "", [call])))
        if _gave_result(r):
            body.append(Entry(_result(r, call_id), run=r))
        else:
            resultless.append(r)
    return head + body + last


def _gave_result(run: ToolRun) -> bool:
    """Whether a tool run says how it ended: a result, or a failure (its error the result)."""
    return run.result is not None or run.error


def _result(run: ToolRun, call_id: str | None) -> Message:
    text = run.result if run.result is not None else run.error_text
    return Message("tool", text or "", call_id=call_id, name=run.name, error=run.error)


def warn_resultless(label: str, count: int, trace_id: str, run: ToolRun) -> None:
    """Say in one warning the ``count`` tool runs of ``label`` that hold no result (see
    :func:`conversation`), naming the first (its trace, span and tool)."""
    more = " ..." if count > 1 else ""
    warnings.warn(
        TcbReplayWarning(
            f"{label}: {count} tool runs hold no result and no error (cut short, or their "
            "content not captured): their calls are stored without a result: trace "
            f"{trace_id} span {run.span_id} ({run.name}){more}"
        ),
        stacklevel=3,
    )


def stored(entries: list[Entry]) -> list[dict[str, Any]]:
    """The conversation as the store keeps messages (what
    :func:`~tcbreplay._record.messages.serialize_messages` makes of LangChain's messages,
    written here without them: ``tests/importers/test_otel_samples.py`` holds the two equal), with
    each model answer's token counts and latency and each tool result's latency."""
    from tcbreplay._record.messages import message_json

    out = []
    usage_given: set[int] = set()
    for e in entries:
        m = e.message
        tokens: tuple[int | None, int | None, int | None] = (None, None, None)
        latency = None
        if m.role == "assistant":
            t = e.turn
            data: dict[str, Any] = _common("ai", m.text)
            if t is not None:
                data["id"] = t.response_id or t.span_id
                if t.model:
                    data["response_metadata"] = {"model_name": t.model}
                latency = t.duration_s
            data["tool_calls"] = [
                {"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"} for c in m.calls
            ]
            data["invalid_tool_calls"] = []
            data["usage_metadata"] = None
            if (
                t is not None
                and id(t) not in usage_given
                and (t.input_tokens is not None or t.output_tokens is not None)
            ):
                usage_given.add(id(t))
                i, o = t.input_tokens or 0, t.output_tokens or 0
                data["usage_metadata"] = {
                    "input_tokens": i,
                    "output_tokens": o,
                    "total_tokens": i + o,
                }
                tokens = (i, o, i + o)
            kind = "ai"
        elif m.role == "tool":
            data = _common("tool", m.text, m.name)
            failed = m.error or (e.run is not None and e.run.error)
            data.update(tool_call_id=m.call_id or "", artifact=None,
                        status="error" if failed else "success")  # fmt: skip
            if e.run is not None and m.call_id:
                latency = e.run.duration_s
            kind = "tool"
        else:
            kind = "system" if m.role == "system" else "human"
            data = _common(kind, m.text)
        out.append(
            {
                "type": kind,
                "message": message_json({"type": kind, "data": data}),
                "input_tokens": tokens[0],
                "output_tokens": tokens[1],
                "total_tokens": tokens[2],
                "latency_s": latency,
            }
        )
    return out


def _common(kind: str, text: str, name: str | None = None) -> dict[str, Any]:
    return {"content": text, "additional_kwargs": {}, "response_metadata": {}, "type": kind,
            "name": name, "id": None}  # fmt: skip
