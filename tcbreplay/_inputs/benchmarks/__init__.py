"""Built-in benchmarks: a tool universe, a dataset and a system prompt, one folder each."""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries, load_dataset, lone_surrogate
from tcbreplay._inputs.tools import Toolset, load_toolset
from tcbreplay.errors import InputError, StoreError, TcbReplayWarning

_HERE = Path(__file__).parent
DATASET_FILE = "dataset.jsonl"  # a run's dataset, in the normalised shape, beside its manifest
# the tools source of an import whose dataset entries each carry their own tools
OWN_TOOLS = "(each dataset entry's own tools)"


@dataclass(frozen=True)
class Benchmark:
    """Where a benchmark's three parts live."""

    name: str
    title: str
    dataset: Path
    tools: str
    system_prompt: Path


BENCHMARKS = {
    "tool-call": Benchmark(
        name="tool-call",
        title="Tool Call Benchmark",
        dataset=_HERE / "tool_call" / "dataset.json",
        tools="tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS",
        system_prompt=_HERE / "tool_call" / "system_prompt.txt",
    ),
}


def get_benchmark(name: str) -> Benchmark:
    """Look up a built-in benchmark by name."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        known = ", ".join(sorted(BENCHMARKS))
        raise InputError(f"unknown benchmark {name!r} (built in: {known})") from None


@dataclass
class BenchmarkInputs:
    """A benchmark ready to record or import: validated dataset, tools and system prompt."""

    name: str
    title: str
    dataset: Dataset
    toolset: Toolset
    system_prompt: str
    system_prompt_source: str | None
    system_prompt_sha256: str | None

    def manifest_fields(self) -> dict[str, Any]:
        """What a run manifest records about its inputs (everything scoring needs)."""
        return {
            "benchmark": {"name": self.name, "title": self.title},
            "dataset": {
                "source": self.dataset.source,
                "sha256": self.dataset.sha256,
                "file": DATASET_FILE,
                "n_entries": len(self.dataset),
            },
            "tools": {
                "source": self.toolset.source,
                "sha256": self.toolset.sha256,
                "specs": self.toolset.to_list(),
            },
            "system_prompt": {
                "source": self.system_prompt_source,
                "sha256": self.system_prompt_sha256,
                "text": self.system_prompt,
            },
        }


def load_inputs(
    benchmark: str | None = None,
    dataset: str | Path | None = None,
    tools: str | None = None,
    system_prompt: str | Path | None = None,
    *,
    need_prompt: bool = True,
    own_tools: bool = False,
) -> BenchmarkInputs:
    """Load a built-in benchmark, or a custom one from files; each given file overrides.
    ``own_tools``: without ``tools``, every dataset entry must carry its own (for import)."""
    for option, value in (
        ("--dataset", dataset),
        ("--tools", tools),
        ("--system-prompt", system_prompt),
    ):
        # the run's manifest keeps each input's name, as UTF-8 text
        if value is not None and lone_surrogate(str(value)):
            raise InputError(
                f"{option} {str(value)!r}: the name is not valid UTF-8", hint="rename the file"
            )
    entries_only = own_tools and tools is None and dataset is not None
    if benchmark is None and (dataset is None or (tools is None and not entries_only)):
        benchmark = "tool-call"
    base = get_benchmark(benchmark) if benchmark else None
    dataset_path = Path(dataset) if dataset else base.dataset  # type: ignore[union-attr]
    prompt_path = Path(system_prompt) if system_prompt else (base.system_prompt if base else None)
    if entries_only:
        toolset = Toolset(schemas=[], source=OWN_TOOLS)
        ds = load_dataset(dataset_path)
        without = next((s for s in ds.samples if s.tools is None), None)
        if without is not None:
            raise InputError(
                f"--tools is needed: {dataset_path.name}: {without.where} has no tools of its own",
                hint='give --tools, or a "tools" list in every dataset entry',
            )
    else:
        toolset = load_toolset(tools or base.tools)  # type: ignore[union-attr]
        ds = load_dataset(dataset_path, toolset.params())
    text, sha = "", None
    if prompt_path is not None:
        text, sha = read_system_prompt(prompt_path)
    elif need_prompt:
        raise InputError("--system-prompt FILE is needed with a custom --dataset and --tools")
    custom = base is None or dataset or tools
    return BenchmarkInputs(
        name="custom" if custom else base.name,  # type: ignore[union-attr]
        title=base.title if base and not custom else "Tool Call Benchmark",
        dataset=ds,
        toolset=toolset,
        system_prompt=text,
        system_prompt_source=str(prompt_path) if prompt_path else None,
        system_prompt_sha256=sha,
    )


def read_system_prompt(path: Path) -> tuple[str, str]:
    """A system prompt file's text and the sha256 of its bytes. A UTF-8 byte order mark
    that begins it is no part of the prompt (an editor's, as a dataset's is); an empty one
    (or whitespace only) is warned of."""
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read system prompt: {exc}") from exc
    if not text.strip():  # (a file made but not yet written, most likely)
        warnings.warn(
            TcbReplayWarning(
                f"{path}: the system prompt is empty (or whitespace only): the agent is sent no "
                "instructions"
            ),
            stacklevel=2,
        )
    return text, hashlib.sha256(raw).hexdigest()


# the built-in tools under the module paths of earlier versions, which their manifests name
FORMER_TOOLS = {
    "tcbreplay.benchmarks.tool_call.tools:TOOLS": (
        "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
    ),
}


def inputs_from_manifest(manifest: dict[str, Any], run_dir: Path) -> BenchmarkInputs:
    """Rebuild a run's inputs from its manifest and dataset file, reloading its tools."""
    run_id = manifest.get("run_id", "run")
    tools = manifest.get("tools") or {}
    recorded = {
        "tools.source": isinstance(tools.get("source"), str),
        "tools.specs": "specs" in tools,
        "dataset": isinstance(manifest.get("dataset"), dict),
    }
    if not all(recorded.values()):
        missing = ", ".join(key for key, ok in recorded.items() if not ok)
        raise StoreError(
            f"{run_dir / 'manifest.json'}: no {missing}, from which the run's inputs are rebuilt"
        )
    tools_source = FORMER_TOOLS.get(tools["source"], tools["source"])
    toolset = load_toolset(tools_source)
    if toolset.to_list() != tools["specs"]:
        raise InputError(
            f"run {run_id!r}: the tools in {tools_source} changed since the run was recorded",
            hint="restore them, or record a new run",
        )
    entries = read_dataset_file(run_dir / manifest["dataset"].get("file", DATASET_FILE))
    dataset = dataset_from_entries(entries, f"{run_id}/{DATASET_FILE}")
    dataset.source = manifest["dataset"].get("source") or dataset.source
    dataset.sha256 = manifest["dataset"].get("sha256")
    benchmark = manifest.get("benchmark") or {}
    prompt = manifest.get("system_prompt") or {}
    return BenchmarkInputs(
        name=benchmark.get("name", "custom"),
        title=benchmark.get("title", "Tool Call Benchmark"),
        dataset=dataset,
        toolset=toolset,
        system_prompt=prompt.get("text", ""),
        system_prompt_source=prompt.get("source"),
        system_prompt_sha256=prompt.get("sha256"),
    )


def read_dataset_file(path: Path) -> list[dict[str, Any]]:
    """The normalised entries a run stored at its start."""
    try:
        with path.open(encoding="utf-8") as f:
            return [_json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable dataset file: {exc}") from exc
