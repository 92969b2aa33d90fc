"""A run written as ``import`` reads it: its traces as JSON Lines in LangChain's or OpenAI's
form, or as OTLP/JSON spans with the GenAI conventions, beside its dataset and its tools, so
that ``tcbreplay import`` stores the same messages and scores them the same.

The folder holds ``traces.jsonl`` (a line per stored sample and trial; samples an import
found no trace of are left out, and read as missing again), ``dataset.jsonl`` (the run's
normalised dataset, metadata included), ``tools.json`` (its tool schemas) and a copy of
``manifest.json``. A line's ``metadata`` holds what the trial adds to its entry's.
LangChain's form keeps every message as stored; OpenAI's keeps what its messages have room
for (roles, content, tool calls with their ids; not ids of messages, usage or response
metadata).
"""

from __future__ import annotations

import json
import shlex
from functools import partial
from pathlib import Path
from typing import Any

from tcbreplay._importers.openai import to_openai
from tcbreplay._store.export import run_traces
from tcbreplay._store.files import json_text, staged, writing
from tcbreplay._store.runs import Run
from tcbreplay._store.schema import DATASET, MANIFEST
from tcbreplay.errors import InputError, StoreError, TcbReplayError, TraceError

EXPORT_FORMATS = ("langchain", "openai", "otlp")
TRACES = "traces.jsonl"
OTLP_TRACES = "traces.otlp.jsonl"
TOOLS = "tools.json"


def export_traces(
    run: Run, out_dir: Path, fmt: str = "langchain", *, error: type[TcbReplayError] = InputError
) -> list[Path]:
    """Write the run's traces (in ``fmt``), dataset, tools and manifest into ``out_dir``, all
    under temporary names until every one is whole."""
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"--format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}")
    with run.reading():  # not deleted (record --overwrite) while it is read
        manifest = run.manifest
        traces = run_traces(run)
        if fmt == "otlp":
            _add_timings(run, traces)
        try:
            dataset = (run.dir / DATASET).read_bytes()
        except OSError as exc:
            raise StoreError(f"{run.dir / DATASET}: cannot read it: {exc.strerror}") from exc
    entry_meta = {}
    for line in dataset.decode("utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            entry_meta[str(entry.get("id"))] = entry.get("metadata") or {}
    tools = (manifest.get("tools") or {}).get("specs") or []
    lines = []
    for trace in traces:
        if trace["status"] == "missing" or fmt == "otlp":
            continue
        try:
            lines.append(_line(trace, entry_meta.get(trace["sample_id"], {}), fmt))
        except TraceError as exc:
            raise StoreError(f"run {run.run_id!r}: sample {trace['sample_id']!r}: {exc}") from exc
    if fmt == "otlp":
        from tcbreplay._importers.otel.write import requests

        entries = {
            str(e.get("id")): e
            for e in map(json.loads, filter(str.strip, dataset.decode("utf-8").splitlines()))
        }
        stored = [t for t in traces if t["status"] != "missing"]
        model = (manifest.get("model") or {}).get("name")
        lines = list(requests(run.run_id, stored, entries, tools, model))
    with writing(out_dir, error=error):
        out_dir.mkdir(parents=True, exist_ok=True)
    traces_name = OTLP_TRACES if fmt == "otlp" else TRACES
    written = [out_dir / traces_name, out_dir / DATASET, out_dir / TOOLS, out_dir / MANIFEST]
    texts = [
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines),
        dataset.decode("utf-8"),
        json_text(tools),
        json_text(manifest),
    ]
    with staged(error) as files:
        for path, text in zip(written, texts, strict=True):
            files.write(path, partial(_write_text, text=text))
    return written


def _add_timings(run: Run, traces: list[dict[str, Any]]) -> None:
    """Each trace's start and end, and its messages' latencies (the spans' times)."""
    import pyarrow.parquet as pq

    from tcbreplay._store.schema import MESSAGES, SAMPLES

    columns = ["sample_id", "trial", "sample_index", "started_at", "finished_at"]
    samples = pq.read_table(run.dir / SAMPLES, columns=columns).to_pylist()
    messages = pq.read_table(run.dir / MESSAGES, columns=["sample_index", "position", "latency_s"])
    latencies: dict[int, dict[int, float | None]] = {}
    for index, position, latency in zip(
        *(messages[c].to_pylist() for c in messages.column_names), strict=True
    ):
        latencies.setdefault(index, {})[position] = latency
    rows = {(r["sample_id"], r["trial"]): r for r in samples}
    for trace in traces:
        row = rows[(trace["sample_id"], trace["trial"])]
        trace["started_at"], trace["finished_at"] = row["started_at"], row["finished_at"]
        own = latencies.get(row["sample_index"], {})
        trace["latencies"] = [own.get(k) for k in range(len(trace["messages"]))]


def _write_text(tmp: Path, text: str) -> None:
    tmp.write_text(text, encoding="utf-8")


def _line(trace: dict[str, Any], entry_meta: dict[str, Any], fmt: str) -> dict[str, Any]:
    """One trace as a line of ``fmt``'s traces file."""
    messages = trace["messages"] if fmt == "langchain" else to_openai(trace["messages"])
    line: dict[str, Any] = {"sample_id": trace["sample_id"]}
    if trace["trial"]:
        line["trial"] = trace["trial"]
    line["messages"] = messages
    if trace["status"] != "ok":
        line["status"] = trace["status"]
    for key in ("error", "error_type"):
        if trace[key] is not None:
            line[key] = trace[key]
    own = {k: v for k, v in (trace["metadata"] or {}).items() if entry_meta.get(k, ...) != v}
    if own:
        line["metadata"] = own
    return line


def import_command(out_dir: Path, fmt: str, run_id: str) -> str:
    """The command that imports an export back."""
    q = shlex.quote
    if fmt == "otlp":  # its spans hold the dataset and the tools
        return f"tcbreplay import --traces {q(str(out_dir / OTLP_TRACES))} --run-id {q(run_id)}"
    return (
        f"tcbreplay import --format {fmt} --traces {q(str(out_dir / TRACES))} --dataset "
        f"{q(str(out_dir / DATASET))} --tools {q(str(out_dir / TOOLS))} --run-id {q(run_id)}"
    )
