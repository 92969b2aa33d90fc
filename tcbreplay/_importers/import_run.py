"""Turn traces recorded elsewhere into a run that scoring treats like a recorded one.

Each line of the traces file is ``{"sample_id": ..., "messages": [...]}`` with
messages as ``langchain_core.messages.messages_to_dict`` writes them. Calls to
tools that do not exist, or with arguments a tool does not take, are agent
behaviour to be scored; only traces that cannot be read are refused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from tcbreplay._importers.abet import read_dashboard_lines
from tcbreplay._importers.langchain import read_lines
from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.dataset import lone_surrogate
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import new_manifest, sample_record, utcnow
from tcbreplay.errors import InputError, TcbReplayError, TraceError


@dataclass
class ImportSummary:
    """What an import stored."""

    run_id: str
    run_dir: str
    samples: int
    imported: int
    missing: int


def import_traces(
    inputs: BenchmarkInputs,
    traces: str | Path,
    store: Store,
    run_id: str,
    *,
    model: str | None = None,
    fmt: str = "jsonl",
) -> ImportSummary:
    """Validate every trace, then store the run; nothing is written if a trace is bad.

    ``fmt`` is ``jsonl`` (one sample's messages per line), ``abet-evaluation`` (a
    dashboard file of the original benchmark: samples it left out are taken to have
    output equal to their target, as the original saved only mismatches) or ``bfcl`` (a
    BFCL results file, with ``inputs`` from :func:`tcbreplay._importers.bfcl.load_bfcl_inputs`).
    """
    if model is not None and lone_surrogate(model):
        raise InputError(f"--model {model!r}: not valid UTF-8 text")
    if lone_surrogate(str(traces)):  # the manifest keeps its name, as UTF-8 text
        raise InputError(
            f"--traces {str(traces)!r}: the name is not valid UTF-8", hint="rename the file"
        )
    path = Path(traces)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read traces: {exc.strerror or exc}") from exc
    if fmt == "jsonl":
        lines = read_lines(data, path.name, inputs.dataset.by_id)
    elif fmt == "abet-evaluation":
        lines = read_dashboard_lines(path, inputs)
    elif fmt == "bfcl":
        from tcbreplay._importers.bfcl import read_results

        lines = read_results(data, path.name, inputs)
    else:
        raise TraceError(f"--format {fmt!r}: choose jsonl, abet-evaluation or bfcl")
    records = []
    now = utcnow().isoformat()
    for sample in inputs.dataset.samples:
        line = lines.get(sample.sample_id)
        records.append(
            sample_record(
                run_id,
                sample,
                status="missing" if line is None else line["status"],
                messages=[] if line is None else line["messages"],
                attempts=0 if line is None else 1,
                started_at=now,
                finished_at=now,
                error_type=None if line is None else line.get("error_type"),
                error="no trace in the imported file" if line is None else line.get("error"),
            )
        )
    manifest = new_manifest(
        run_id,
        now,
        inputs.manifest_fields(),
        {
            "id": model or "unknown",
            "provider": "import",
            "name": model or "unknown",
            "settings": {},
            "simulated": False,
        },
        source="import",
        traces={"source": str(path), "format": fmt, "sha256": hashlib.sha256(data).hexdigest()},
    )
    if store.exists(run_id):
        _drop_unfinished_import(store, run_id)
    # a failure in there removes the folder it made
    writer = store.create_run(manifest, inputs.dataset.entries())
    try:
        for record in records:
            writer.append(record)
        writer.fold()
        imported = sum(1 for r in records if r["status"] != "missing")
        writer.update_manifest(
            status="imported",
            finished_at=utcnow().isoformat(),
            totals={
                "samples": len(records),
                "recorded": len(records),
                "ok": sum(1 for r in records if r["status"] == "ok"),
                "errors": sum(1 for r in records if r["status"] != "ok"),
                "missing": len(records) - imported,
            },
        )
    except BaseException:
        # an import is all or nothing: a half-made run would block the same --run-id
        writer.discard()
        raise
    writer.close()
    return ImportSummary(
        run_id=run_id,
        run_dir=str(writer.dir),
        samples=len(records),
        imported=imported,
        missing=len(records) - imported,
    )


def _drop_unfinished_import(store: Store, run_id: str) -> None:
    """Remove a run an import began but never finished (its process was killed), which would
    block the run id; refused while that import still runs."""
    try:
        manifest = store.open_run(run_id).manifest
    except TcbReplayError:
        return  # not a run this can judge: creating the run says what is wrong
    if manifest.get("source") == "import" and manifest.get("status") == "recording":
        store.delete_run(run_id)
