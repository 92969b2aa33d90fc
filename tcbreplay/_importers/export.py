"""A run written as ``import`` reads it: its traces as JSON Lines in LangChain's or OpenAI's
form, or as OTLP/JSON spans with the GenAI conventions, beside its dataset and its tools, so
that ``tcbreplay import`` stores the same messages and scores them the same.

The folder holds ``traces.jsonl`` (a line per stored sample and trial; samples an import
found no trace of are left out, and read as missing again), ``dataset.jsonl`` (the run's
normalised dataset, metadata included), ``tools.json`` (its tool schemas) and a copy of
``manifest.json``. A line's ``metadata`` holds what the trial adds to its entry's, and its
timings (:mod:`tcbreplay._importers.timings`).
LangChain's form keeps every message as stored; OpenAI's keeps what its messages have room
for (roles, content, tool calls with their ids; not ids of messages, usage or response
metadata).
"""

from __future__ import annotations

import itertools
import re
import shlex
import warnings
from array import array
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers import timings
from tcbreplay._importers.openai import to_openai
from tcbreplay._machine import collector_paused
from tcbreplay._store.export import check_run, run_traces
from tcbreplay._store.files import check_dataset_written, json_text, staged
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import DATASET, MANIFEST
from tcbreplay.errors import (
    InputError,
    StoreError,
    TcbReplayError,
    TcbReplayWarning,
    TraceError,
)

if TYPE_CHECKING:
    from tcbreplay._importers.otel.write import Unsent

EXPORT_FORMATS = ("langchain", "openai", "otlp")
TRACES = "traces.jsonl"
OTLP_TRACES = "traces.otlp.jsonl"
TOOLS = "tools.json"


def export_traces(
    run: Run,
    out_dir: str | Path,
    fmt: str = "langchain",
    *,
    error: type[TcbReplayError] = InputError,
) -> list[Path]:
    """Write the run's traces (in ``fmt``), dataset, tools and manifest into ``out_dir``, all
    under temporary names until every one is whole.

    The traces are read, converted and written a slice of samples at a time
    (:data:`tcbreplay._store.export.SLICE_SAMPLES`); the dataset is held whole, as text.
    Python's cycle collector is off meanwhile (the values read hold no cycles; see
    :func:`tcbreplay._machine.collector_paused`)."""
    check_run(run, "export_traces")
    out_dir = Path(out_dir) if isinstance(out_dir, str) else out_dir  # (a URL's path stays)
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"--format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}")
    # not deleted (record --overwrite) while it is read
    with run.reading(), collector_paused():
        manifest = run.manifest
        traces = run_traces(run, timings=True)
        try:
            data = (run.dir / DATASET).read_bytes()
            check_dataset_written(manifest, run.dir / DATASET, data)
            dataset = Dataset(data.decode("utf-8"))
        except OSError as exc:
            raise StoreError(f"{run.dir / DATASET}: cannot read it: {exc.strerror}") from exc
        except (ValueError, AttributeError) as exc:  # not UTF-8, a line no JSON object
            detail = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise StoreError(f"{run.dir / DATASET}: unreadable dataset file: {detail}") from exc
        tools = (manifest.get("tools") or {}).get("specs") or []
        user_calls = _user_calls(run) if fmt != "langchain" else 0
        stored = (t for t in traces if t["status"] != "missing")
        unsent = None
        if fmt == "otlp":
            from tcbreplay._importers.otel.write import Unsent, requests

            unsent = Unsent()
            model = (manifest.get("model") or {}).get("name")
            found = requests(run.run_id, stored, dataset.entries(), tools, model, unsent)
            lines = ((request, False) for request in found)
        else:
            lines = ((_stored_line(run, trace, dataset, fmt), trace["plain"]) for trace in stored)
        traces_name = OTLP_TRACES if fmt == "otlp" else TRACES
        written = [out_dir / traces_name, out_dir / DATASET, out_dir / TOOLS, out_dir / MANIFEST]
        texts = [dataset.only(_held(run)), json_text(_declared_once(tools)), json_text(manifest)]
        with staged(error) as files:
            files.folder(out_dir)
            files.write(written[0], partial(_write_lines, lines=lines))
            for path, text in zip(written[1:], texts, strict=True):
                files.write(path, partial(_write_text, text=text))
        _warn_of_left_out(run, fmt, user_calls, unsent)
    return written


def _declared_once(tools: list[Any]) -> list[Any]:
    """The run's tools as a tools file declares them: each name once, its first declaration.
    A run whose samples declare a tool differently (BFCL's questions: ``import --format bfcl``
    keeps every distinct function) holds each sample's own in its dataset entry's ``tools``,
    which is what scores it; the manifest's copy keeps them all."""
    seen = set()
    out = []
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        if name is None or name not in seen:
            seen.add(name)
            out.append(tool)
    return out


# what each export writes (``tables``: the store's tables, see tcbreplay._store.export)
_WRITES = {
    "tables": {"samples.jsonl", "messages.jsonl", MANIFEST},
    "otlp": {OTLP_TRACES, DATASET, TOOLS, MANIFEST},
    **{fmt: {TRACES, DATASET, TOOLS, MANIFEST} for fmt in EXPORT_FORMATS if fmt != "otlp"},
}


def check_export_folder(out_dir: Path, fmt: str) -> None:
    """Refuse a folder holding the files of another export that this one (``fmt``) would
    leave beside its own: a manifest of one run beside the traces of another, in silence."""
    other = set().union(*_WRITES.values()) - _WRITES.get(fmt, set())
    left = sorted(name for name in other if (out_dir / name).exists())
    if left:
        raise InputError(
            f"-o {out_dir}: it holds {', '.join(left)} of another export, which this one "
            f"(--format {fmt}) would leave beside its own files",
            hint="give an empty folder, or remove those files",
        )


class Dataset:
    """A run's dataset file, held as its text, its entries parsed as they are asked for (an
    entry is found by its id: the last line with that id)."""

    # where a line ends: at "\n" only, as the dataset reader cuts them (str.splitlines would
    # also cut inside strings holding U+2028, U+2029 or U+0085, which JSON leaves unescaped)
    _ENDS = re.compile("\n")

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines: dict[str, int] = {}
        self._spans = array("q")
        start = 0
        for found in itertools.chain(self._ENDS.finditer(text), [None]):
            end = found.start() if found else len(text)
            if text[start:end].strip():
                self._lines[str(_json.parse(text[start:end]).get("id"))] = len(self._spans) // 2
                self._spans.extend((start, end))
            start = found.end() if found else end

    def get(self, sample_id: str) -> dict[str, Any] | None:
        """The entry of ``sample_id``, None if the dataset has none."""
        k = self._lines.get(sample_id)
        if k is None:
            return None
        return _json.parse(self.text[self._spans[2 * k] : self._spans[2 * k + 1]])

    def entries(self) -> Entries:
        """The entries as a mapping by id (which raises KeyError for an id it lacks)."""
        return Entries(self)

    def only(self, ids: set[str]) -> str:
        """The dataset's text with only the entries of ``ids``, in its order (its whole text
        when it has no other)."""
        if not set(self._lines) - ids:
            return self.text
        spans, kept = self._spans, sorted(self._lines[i] for i in ids if i in self._lines)
        return "".join(self.text[spans[2 * k] : spans[2 * k + 1]] + "\n" for k in kept)


def _warn_of_left_out(run: Run, fmt: str, user_calls: int, unsent: Unsent | None) -> None:
    """Warn, in one line, of what the export leaves out: the user's own tool calls
    (τ²-bench's user, in dual control), which the OpenAI and OTLP forms cannot hold (they
    give only the assistant calls: an import of the export scores ``--side user`` and
    ``both`` otherwise); and in OTLP, the messages after a trial's last model answer, which
    no model call was sent (see :mod:`tcbreplay._importers.otel.write`)."""
    left = []
    if user_calls:
        left.append(f"{user_calls} user messages of run {run.run_id} make tool calls")
    if unsent is not None and unsent.count:
        of_run = "" if left else f" of run {run.run_id}"
        left.append(
            f"{unsent.count} messages{of_run} come after their trial's last model answer (the "
            f"first in {unsent.first})"
        )
    if left:
        warnings.warn(
            TcbReplayWarning(
                f"{' and '.join(left)}, which --format {fmt} cannot hold: they are left out "
                "(--format langchain keeps them)"
            ),
            stacklevel=3,
        )


def _user_calls(run: Run) -> int:
    """How many of the run's user messages make tool calls (τ²-bench's user, in dual
    control)."""
    import pyarrow.compute as pc

    from tcbreplay._store.parquet import read_table
    from tcbreplay._store.schema import MESSAGES

    try:
        table = read_table(run.dir / MESSAGES, columns=["type", "calls"])
    except OSError as exc:
        raise StoreError(f"{run.dir / MESSAGES}: cannot read it: {exc}") from exc
    human = pc.equal(table["type"], "human")
    calling = pc.and_(human, pc.not_equal(pc.fill_null(table["calls"], "[]"), "[]"))
    return int(pc.sum(calling).as_py() or 0)


def _held(run: Run) -> set[str]:
    """The ids of the samples the run holds (a row of its, even of status missing): what an
    import of the export stores again. A partial run's others are not in it, and the export's
    dataset leaves them out, or the import would store them as missing, and score them."""
    from tcbreplay._store.parquet import read_table
    from tcbreplay._store.schema import SAMPLES

    try:
        column = read_table(run.dir / SAMPLES, columns=["sample_id"]).column("sample_id")
    except OSError as exc:
        raise StoreError(f"{run.dir / SAMPLES}: cannot read it: {exc}") from exc
    return set(column.unique().to_pylist())


class Entries(Mapping[str, dict[str, Any]]):
    """A dataset's entries by id, each parsed when it is looked up."""

    def __init__(self, dataset: Dataset) -> None:
        self._dataset = dataset

    def __getitem__(self, sample_id: str) -> dict[str, Any]:
        entry = self._dataset.get(sample_id)
        if entry is None:
            raise KeyError(sample_id)
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._dataset._lines)

    def __len__(self) -> int:
        return len(self._dataset._lines)


def _stored_line(run: Run, trace: dict[str, Any], dataset: Dataset, fmt: str) -> dict[str, Any]:
    entry = dataset.get(trace["sample_id"]) or {}
    try:
        return _line(trace, entry.get("metadata") or {}, fmt)
    except TraceError as exc:
        raise StoreError(f"run {run.run_id!r}: sample {trace['sample_id']!r}: {exc}") from exc


def _write_lines(tmp: Path, lines: Iterable[tuple[dict[str, Any], bool]]) -> None:
    """Write each line (and whether orjson may write it, see :func:`_json.dumps_plain`)."""
    with tmp.open("w", encoding="utf-8") as f:
        for line, plain in lines:
            f.write(_json.dumps_plain(line, plain) + "\n")


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
    timings.put(line, trace, fmt)  # (the forms have no fields of their own for them)
    return line


def import_command(out_dir: Path, fmt: str, run_id: str) -> str:
    """The command that imports an export back."""
    q = shlex.quote
    if fmt == "otlp":  # its spans hold the entries and tools of the samples they trace; the
        # dataset and tools files hold those of the samples without a trace (missing) too
        return (
            f"tcbreplay import --traces {q(str(out_dir / OTLP_TRACES))} --dataset "
            f"{q(str(out_dir / DATASET))} --tools {q(str(out_dir / TOOLS))} --run-id {q(run_id)}"
        )
    return (
        f"tcbreplay import --format {fmt} --traces {q(str(out_dir / TRACES))} --dataset "
        f"{q(str(out_dir / DATASET))} --tools {q(str(out_dir / TOOLS))} --run-id {q(run_id)}"
    )
