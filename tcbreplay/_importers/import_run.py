"""Turn traces recorded elsewhere into a run that scoring treats like a recorded one.

Each dialect has its module, named in :mod:`tcbreplay._importers.registry`, which reads its
files into :class:`~tcbreplay._importers.dialect.TraceLine` (LangChain messages, serialized as
the store keeps them). Calls to tools that do not exist, or with arguments a tool does not
take, are agent behaviour to be scored; only traces that cannot be read are refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from tcbreplay._importers import registry
from tcbreplay._importers.dialect import SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.export import OTLP_TRACES, TRACES
from tcbreplay._importers.sniff import sniff
from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.dataset import Dataset, check_against_tools, lone_surrogate
from tcbreplay._inputs.tools import load_toolset, toolset_from_dicts
from tcbreplay._machine import collector_paused
from tcbreplay._model_secrets import refuse_model_secrets
from tcbreplay._scrub import scrub, scrub_json
from tcbreplay._store.files import names_a_file
from tcbreplay._store.manifest import new_manifest
from tcbreplay._store.records import sample_record
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import MANIFEST, row_index, utcnow
from tcbreplay.errors import InputError, TcbReplayError, TraceError


@dataclass
class ImportSummary:
    """What an import stored."""

    run_id: str
    run_dir: str
    samples: int  # the dataset's samples, each with ``trials`` trials
    imported: int  # trials (samples, with one trial each) stored from a trace
    missing: int  # trials with no trace (status missing)
    format: str = "langchain"
    sniffed: str | None = None  # why the format was chosen, when --format was not given
    trials: int = 1


def import_traces(
    inputs: BenchmarkInputs | None,
    traces: str | Path,
    store: Store,
    run_id: str,
    *,
    model: str | None = None,
    fmt: str | None = None,
    tools: str | None = None,
    options: dict[str, Any] | None = None,
) -> ImportSummary:
    """Validate every trace, then store the run; nothing is written if a trace is bad.

    ``fmt`` is a registered dialect's name (see :mod:`tcbreplay._importers.registry`;
    ``None``: told from the file, see :func:`tcbreplay._importers.sniff.sniff`; ``bfcl`` is
    never told, as it needs BFCL's answers). ``inputs`` (dataset and tools) may be left out
    for a format that holds the samples' inputs and gold calls (``tau-bench``, ``inspect``:
    :attr:`~tcbreplay._importers.dialect.Dialect.holds_samples`); then the tools are ``tools``
    (a ``module:attr`` or JSON file), else those the traces declare. ``abet-evaluation`` is a
    dashboard file of the original benchmark: samples it left out are taken to have output
    equal to their target, as the original saved only mismatches. ``bfcl`` is a BFCL results
    file, with ``inputs`` from :func:`tcbreplay._importers.bfcl.load_bfcl_inputs`.
    ``options`` are the dialect's own (``{"gold_from": "action-checks"}`` for ``tau2``). Each
    sample's trials are kept; a sample (or trial) without a trace is stored with status
    ``missing``.
    """
    with collector_paused():  # every span, message and record lives to the end
        return _import(inputs, traces, store, run_id, model, fmt, tools, options)


def _import(
    inputs: BenchmarkInputs | None,
    traces: str | Path,
    store: Store,
    run_id: str,
    model: str | None,
    fmt: str | None,
    tools: str | None,
    options: dict[str, Any] | None,
) -> ImportSummary:
    if model is not None and lone_surrogate(model):
        raise InputError(f"--model {model!r}: not valid UTF-8 text")
    if model is not None:
        refuse_model_secrets(model, "--model")
    if lone_surrogate(str(traces)):  # the manifest keeps its name, as UTF-8 text
        raise InputError(
            f"--traces {str(traces)!r}: the name is not valid UTF-8", hint="rename the file"
        )
    path = Path(traces)
    file = TraceFile.at(path)
    data = file.data  # read once: hashed, sniffed and read
    sniffed = None
    if fmt is None:
        chosen = sniff(file)
        fmt, sniffed = chosen.dialect, chosen.reason
    dialect = registry.get(fmt)
    fmt = dialect.name
    options = {k: v for k, v in (options or {}).items() if v is not None}
    for name in options:
        if name not in dialect.options:
            flag = "--" + name.replace("_", "-")
            raise InputError(
                f"{flag}: the {fmt} dialect has no such choice"
                if name != "sample_by"
                else f"{flag}: the {fmt} dialect has no choice of sample",
                hint=f"only {' and '.join(registry.taking(name))} traces take it",
            )
    source = dialect.read(file, inputs, **options)
    inputs = _named(inputs or _inputs_of(source, fmt, tools), source, fmt)
    exported = _exported_run(path)
    if exported is not None and source.benchmark is None:  # export's folder: its run's names
        benchmark = exported["benchmark"]
        inputs = replace(inputs, name=str(benchmark["name"]),
                         title=str(benchmark.get("title") or inputs.title))  # fmt: skip
    records = _records(run_id, inputs.dataset, source.lines, path.name)
    trials = max(r["trial"] for r in records) + 1
    now = utcnow().isoformat()
    # a model name read from the traces is kept without a secret it may hold (?api_key=...);
    # an export's run names its model as recorded, where its spans name the one that answered
    # (the sim's "tcbreplay-sim (simulated)" for sim:seed=7)
    recorded = (exported or {}).get("model") or {}
    label = model or scrub("model", recorded.get("id")) or scrub("model", source.model) or "unknown"
    simulated = model is None and bool(recorded.get("simulated"))  # (its numbers a sim's)
    manifest = new_manifest(
        run_id,
        now,
        inputs.manifest_fields(),
        {"id": label, "provider": "import", "name": label, "settings": {}, "simulated": simulated},
        source="import",
        traces={"source": str(path), "format": fmt, "sha256": hashlib.sha256(data).hexdigest()},
    )
    if store.exists(run_id):
        _drop_unfinished_import(store, run_id)
    # a failure in there removes the folder it made
    writer = store.create_run(manifest, inputs.dataset.entries())
    try:
        writer.fold(records)  # all or nothing: no journal to resume from
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
                "trials": trials,
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
        samples=len(records) // trials,  # every sample has every trial, missing or not
        imported=imported,
        missing=len(records) - imported,
        format=fmt,
        sniffed=sniffed,
        trials=trials,
    )


def _exported_run(traces: Path) -> dict[str, Any] | None:
    """The manifest ``tcbreplay export`` wrote beside ``traces`` (its traces file, in an
    export's folder): the exported run's benchmark and model, which an import of the folder
    keeps (the benchmark was 'custom' and the model 'unknown', before). None elsewhere."""
    if traces.name not in (TRACES, OTLP_TRACES):
        return None
    try:
        found = json.loads((traces.parent / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    benchmark = found.get("benchmark") if isinstance(found, dict) else None
    if not isinstance(benchmark, dict) or not isinstance(benchmark.get("name"), str):
        return None
    if not isinstance(found.get("model"), dict):
        found["model"] = {}
    return cast(dict[str, Any], found)


def _inputs_of(source: SourceTraces, fmt: str, tools: str | None) -> BenchmarkInputs:
    """The inputs of traces that hold their samples: their dataset, and ``tools`` or the
    tools they declare."""
    if source.dataset is None:
        raise InputError(
            f"--dataset is required: the {fmt} traces do not hold the samples' gold calls"
        )
    if tools is not None:
        toolset = load_toolset(tools)
    elif source.tools is not None:  # the tools the traces show offered or called: maybe none
        toolset = toolset_from_dicts(source.tools, f"{source.dataset.source} (its tools)")
    else:
        why = f": {source.no_tools}" if source.no_tools else ""
        raise InputError(
            f"--tools is required{why}", hint="give module:attr or a tools.json file (any shape)"
        )
    check_against_tools(source.dataset, toolset.params(), Path(source.dataset.source).name)
    return BenchmarkInputs(
        name="custom",
        title="Tool Call Benchmark",
        dataset=source.dataset,
        toolset=toolset,
        system_prompt="",
        system_prompt_source=None,
        system_prompt_sha256=None,
    )


def _named(inputs: BenchmarkInputs, source: SourceTraces, fmt: str) -> BenchmarkInputs:
    """The inputs under the benchmark the traces name (τ-bench, an inspect_ai task), which
    the report's title and the dashboard file's name show; a title that cannot name that
    file is the format's name."""
    if source.benchmark is None:
        return inputs
    name, title = source.benchmark
    return replace(inputs, name=name, title=title if names_a_file(title) else fmt)


def _records(
    run_id: str, dataset: Dataset, lines: list[TraceLine], label: str
) -> list[dict[str, Any]]:
    """The journal records of every sample's trials (trials 0 to the last any line has; a
    sample or trial without a line: status missing)."""
    by_key: dict[tuple[str, int], TraceLine] = {}
    for line in lines:
        if line.sample_id not in dataset.by_id:
            where = line.place or label
            raise TraceError(f"{where}: sample_id {line.sample_id!r} is not in the dataset")
        key = (line.sample_id, line.trial)
        if key in by_key:  # each reader refuses this with its place; a last guard
            raise TraceError(f"{line.place or label}: sample {key} appears twice")
        by_key[key] = line
    trials = _trials(lines, label)
    now = utcnow().isoformat()
    records = []
    for trial in range(trials):
        for sample in dataset.samples:
            found = by_key.get((sample.sample_id, trial))
            records.append(
                sample_record(
                    run_id,
                    sample,
                    status="missing" if found is None else found.status,
                    messages=[] if found is None else found.messages,
                    attempts=_attempts(found),
                    duration_s=None if found is None else found.duration_s,
                    started_at=now,
                    finished_at=now,
                    error_type=None if found is None else found.error_type,
                    error="no trace in the imported file" if found is None else found.error,
                    trial=trial,
                    sample_index=row_index(sample.index, trial, len(dataset)),
                    # (a format's names, tags and notes may quote a credential)
                    metadata=None if found is None else scrub_json(found.metadata),
                )
            )
    return records


def _attempts(line: TraceLine | None) -> int:
    """A stored trial's attempts: those its line says (an export's), else 1; none without
    a line (missing)."""
    if line is None:
        return 0
    return 1 if line.attempts is None else line.attempts


def _trials(lines: list[TraceLine], label: str) -> int:
    """How many trials the lines hold: trials count from 0 without gaps, as a recording's do.

    A trial beyond one that no line holds is refused: storing every trial up to it for
    every sample, as missing, would let one short line ask for a million trials.
    """
    present = {line.trial for line in lines}
    trials = max(present, default=0) + 1
    if not lines or trials == len(present):
        return trials
    gap = min(set(range(len(present) + 1)) - present)
    line = next(line for line in lines if line.trial > gap)
    raise TraceError(
        f"{line.place or label}: trial {line.trial}, but no trace holds trial {gap} (trials "
        "count from 0 without gaps)"
    )


def _drop_unfinished_import(store: Store, run_id: str) -> None:
    """Remove a run an import began but never finished (its process was killed), which would
    block the run id; refused while that import still runs."""
    try:
        manifest = store.open_run(run_id, writing=True).manifest
    except TcbReplayError:
        return  # not a run this can judge: creating the run says what is wrong
    if manifest.get("source") == "import" and manifest.get("status") == "recording":
        store.delete_run(run_id)
