"""What a replay runs: the recorded run's inputs, with the changes under test.

A replay takes the dataset, tools and system prompt its run was recorded (or imported) with,
each replaced by the one given (``--dataset``, ``--tools``, ``--system-prompt``), as
``record`` takes them. What a run holds decides what can be replayed without one:

- tools: a recorded run's are code (its ``module:attr``, imported again, as it is now: a
  changed implementation is a change under test); an imported run's are JSON schemas with
  no code, which replay with their recorded outputs (``--recorded-tools``) or with
  ``--tools``. Samples with tools of their own (BFCL imports) cannot be replayed by one
  agent.
- system prompt: the one the run's messages start with, where every sample's start with the
  same one (imports keep it there), else the manifest's.
- the user's message: the first one each sample's messages hold (an import's trace may open
  otherwise than its dataset's input), unless ``--dataset`` is given.
"""

from __future__ import annotations

import json
from pathlib import Path

from tcbreplay._inputs.benchmarks import (
    DATASET_FILE,
    FORMER_TOOLS,
    BenchmarkInputs,
    read_system_prompt,
)
from tcbreplay._inputs.dataset import load_dataset
from tcbreplay._inputs.stored import StoredDataset
from tcbreplay._inputs.tools import Toolset, load_toolset, toolset_from_dicts
from tcbreplay._replay.fingerprint import content
from tcbreplay._replay.recording import RecordedRun
from tcbreplay._store.files import not_written, written_dataset_sha256
from tcbreplay._store.run_dir import Run
from tcbreplay.errors import InputError, ToolSchemaError


def replay_inputs(
    run: Run,
    recording: RecordedRun,
    *,
    system_prompt: str | Path | None = None,
    tools: str | None = None,
    dataset: str | Path | None = None,
) -> BenchmarkInputs:
    """The inputs a replay of ``run`` runs with (see the module)."""
    manifest = run.manifest
    toolset = load_toolset(tools) if tools else _recorded_tools(run)
    ds = load_dataset(dataset, toolset.params()) if dataset is not None else stored_dataset(run)
    own = ds.own_tools()
    if own is not None:
        raise InputError(
            f"run {run.run_id!r}: sample {own.sample_id!r} has tools of its own; a replay runs "
            "one agent, with one set of tools, for every sample",
            hint="give --dataset and --tools for one set of tools",
        )
    prompt = manifest.get("system_prompt") or {}
    source: str | None
    sha: str | None
    if system_prompt is not None:
        path = Path(system_prompt)
        text, sha = read_system_prompt(path)
        source = str(path)
    else:
        text = stored_system(recording) or str(prompt.get("text") or "")
        source, sha = prompt.get("source"), prompt.get("sha256")
    benchmark = manifest.get("benchmark") or {}
    return BenchmarkInputs(
        name=str(benchmark.get("name") or "custom"),
        title=str(benchmark.get("title") or "Tool Call Benchmark"),
        dataset=ds,
        toolset=toolset,
        system_prompt=text,
        system_prompt_source=source,
        system_prompt_sha256=sha,
    )


def stored_dataset(run: Run) -> StoredDataset:
    """The dataset ``run`` stored, read as it is asked for (see :class:`StoredDataset`);
    refused, as :func:`~tcbreplay._store.files.not_written`, when the file is not the one the
    run wrote (its gold calls are the replay's too)."""
    recorded = run.manifest.get("dataset") or {}
    path = dataset_file(run)
    stored = StoredDataset(path, f"{run.run_id}/{DATASET_FILE}", recorded.get("source"),
                           recorded.get("sha256"))  # fmt: skip
    if written_dataset_sha256(run.manifest) not in (None, stored.sha256_stored()):
        raise not_written(path, run.manifest)
    return stored


def dataset_file(run: Run) -> Path:
    """Where ``run`` keeps its dataset."""
    return run.dir / (run.manifest.get("dataset") or {}).get("file", DATASET_FILE)


def _recorded_tools(run: Run) -> Toolset:
    """The run's tools: its module's, imported again, or its JSON schemas (no code)."""
    tools = run.manifest.get("tools") or {}
    source = FORMER_TOOLS.get(str(tools.get("source")), str(tools.get("source")))
    schemas = tools.get("specs") or []
    if ":" in source and not source.endswith(".json") and not Path(source).is_file():
        try:
            return load_toolset(source)
        except ToolSchemaError as exc:
            raise InputError(
                f"run {run.run_id!r}: its tools {source} cannot be loaded: {exc}",
                hint="give --tools MODULE:ATTR, or --recorded-tools to serve the recorded outputs",
            ) from exc
    return toolset_from_dicts(schemas, source)


def stored_system(recording: RecordedRun) -> str | None:
    """The system text every sample's stored messages start with, if they all start with the
    same one."""
    if not recording.starts_with_system():  # (the messages' types tell, not their texts)
        return None
    found: set[str] = set()
    for _, first in recording.first_messages():
        if first is None:
            continue
        if first.get("type") != "system":
            return None
        text = content((first.get("data") or {}).get("content"))
        found.add(text if isinstance(text, str) else json.dumps(text))
        if len(found) > 1:
            return None
    return found.pop() if found else None
