"""Dashboard files of the original Tool Call Benchmark, read as traces to import.

The original saved, per model, a dashboard file listing only the samples with some
mismatch; a sample it left out had output equal to its target.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.dataset import Dataset, lone_surrogate
from tcbreplay.errors import InputError, TraceError

Call = tuple[str, Any]


def sniff(file: TraceFile) -> Sniff:
    """A JSON object with ``samples`` and ``results`` (or ``benchmark_name``) that is no
    inspect_ai log (those have them too)."""
    top = file.top
    if not isinstance(top, dict) or "messages" in top:
        return Sniff.no("not a JSON object with samples and results (a dashboard file)")
    if {"eval", "version"} <= top.keys():
        return Sniff.no("it has eval and version, as an inspect_ai log has")
    if "samples" in top and ("results" in top or "benchmark_name" in top):
        return Sniff(0.9, "a dashboard file of the original benchmark")
    return Sniff.no("a JSON object without samples and results (a dashboard file's)")


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    """A trace per sample, made from the calls the file lists (needs the dataset)."""
    if inputs is None:
        raise InputError("--format abet-evaluation needs --dataset")
    calls = dashboard_calls(file.data, file.name, inputs.dataset)
    return SourceTraces(dashboard_lines(calls, inputs))


def read_dashboard_calls(path: str | Path, dataset: Dataset) -> dict[str, list[Call]]:
    """Every dataset sample's agent calls from a dashboard file (left-out samples: the target)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path.name}: cannot read dashboard file: {exc}") from exc
    return dashboard_calls(data, path.name, dataset)


def dashboard_calls(data: bytes, label: str, dataset: Dataset) -> dict[str, list[Call]]:
    """Every dataset sample's agent calls from a dashboard file's bytes (``label``: its
    name; left-out samples: the target)."""
    try:
        text = data.decode("utf-8")
        doc = _json.loads(text)
    except _json.LimitError as exc:
        raise TraceError(f"{label}: {exc}", hint=_json.HINT) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{label}: cannot read dashboard file: {exc}") from exc
    listed = doc.get("samples") if isinstance(doc, dict) else None
    if not isinstance(listed, list):
        raise TraceError(f"{label}: expected an object with a samples list")
    by_input: dict[str, list[str]] = {}
    for sample in dataset.samples:
        by_input.setdefault(sample.input, []).append(sample.sample_id)
    calls = {s.sample_id: [(c.name, c.args) for c in s.target] for s in dataset.samples}
    seen: dict[str, int] = {}
    for k, item in enumerate(listed):
        place = f"{label}: samples[{k}]"
        if not isinstance(item, dict) or not isinstance(item.get("input"), str):
            raise TraceError(f"{place}: expected an object with input and output")
        surrogate = lone_surrogate(item, text)
        if surrogate:
            raise TraceError(
                f"{place}: holds a lone surrogate {surrogate}, which is not valid Unicode"
            )
        ids = by_input.get(item["input"], [])
        if len(ids) != 1:
            problem = "matches no dataset entry" if not ids else "matches several dataset entries"
            raise TraceError(f"{place}: input {item['input'][:60]!r} {problem}")
        if ids[0] in seen:  # the last would silently win
            first = seen[ids[0]]
            raise TraceError(
                f"{place}: input {item['input'][:60]!r} appears twice (also samples[{first}])",
                hint="list each sample once",
            )
        seen[ids[0]] = k
        output = item.get("output")
        names = output.get("tool_call_names") if isinstance(output, dict) else None
        args = output.get("tool_call_args") if isinstance(output, dict) else None
        if not isinstance(names, list) or not isinstance(args, list) or len(names) != len(args):
            raise TraceError(
                f"{place}: output needs tool_call_names and tool_call_args of equal length"
            )
        if not all(isinstance(n, str) for n in names) or not all(isinstance(a, dict) for a in args):
            raise TraceError(f"{place}: tool names must be strings and args objects")
        calls[ids[0]] = list(zip(names, args, strict=True))
    return calls


def dashboard_lines(calls: dict[str, list[Call]], inputs: BenchmarkInputs) -> list[TraceLine]:
    """One synthesized trace per sample from a dashboard file's calls: the input and one AI
    message holding the agent's calls in order (the file keeps no other messages)."""
    from langchain_core.messages import AIMessage, HumanMessage

    from tcbreplay._record.messages import serialize_messages

    out = []
    for sample in inputs.dataset.samples:
        tool_calls = [
            {"name": name, "args": args, "id": f"{sample.sample_id}-{k}", "type": "tool_call"}
            for k, (name, args) in enumerate(calls[sample.sample_id])
        ]
        messages = [
            HumanMessage(content=sample.input),
            AIMessage(
                content="",
                tool_calls=tool_calls,
                response_metadata={"synthesized_from": "abet-evaluation"},
            ),
        ]
        out.append(TraceLine(sample.sample_id, serialize_messages(messages, {})))
    return out
