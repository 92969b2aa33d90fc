"""A run exported as JSON Lines: its samples, its messages and a copy of its manifest
(``export --format tables``), and its traces read back sample by sample for the exports
that ``import`` reads (:func:`run_traces`).

Both read the run a slice of :data:`SLICE_SAMPLES` samples at a time (a range of
``sample_index``, as scoring cuts a run into parts) and write each slice before reading the
next: an export's memory holds one slice, whatever the run's size."""

from __future__ import annotations

import bisect
import datetime as dt
import warnings
from collections.abc import Callable, Collection, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tcbreplay import _json
from tcbreplay._store.files import (
    json_text,
    staged,
)
from tcbreplay._store.locks import being_written
from tcbreplay._store.parquet import parquet_file, read_table
from tcbreplay._store.run_dir import Run
from tcbreplay._store.schema import (
    MANIFEST,
    MESSAGES,
    MESSAGES_SCHEMA,
    SAMPLES,
    SAMPLES_SCHEMA,
    with_optional_columns,
)
from tcbreplay._store.shards import finish_hint
from tcbreplay._words import count
from tcbreplay.errors import (
    InputError,
    StoreError,
    TcbReplayError,
    TcbReplayWarning,
    read_error,
)

# samples (distinct sample_index values) an export reads, converts and writes at a time
SLICE_SAMPLES = 20_000
# memory the row groups that span slices may keep for the next ones (see Slices.read)
KEEP_BYTES = 512 * 2**20
# a slice's bounds: lo (inclusive) and hi (exclusive) sample_index; (None, None) for the
# rows that have no sample_index, which every ordering here puts last
Bounds = tuple[int | None, int | None]
_UNNUMBERED: Bounds = (None, None)


def check_run(run: Any, function: str) -> None:
    """Refuse what is no :class:`Run` (a run id given for one), and a run with nothing stored
    yet (killed before its first fold), in one line; warn of a run not finished, whose
    export holds what its Parquet files hold (not the samples waiting in its journal)."""
    if not isinstance(run, Run):
        raise InputError(
            f"{function}: takes a run (store.open_run(run_id)), not {type(run).__name__} {run!r}"
        )
    status = run.status
    if status == "recording" and not being_written(run.dir):  # its writer killed
        status = "interrupted"
    if not run.has_data():  # (as score says it: a read of the file named what it lacks)
        raise StoreError(
            f"run {run.run_id!r} has no stored samples yet (status {status})",
            hint=finish_hint(run),
        )
    waiting = run.unfolded_records()
    if waiting or status not in ("complete", "imported", "partial"):
        said = (
            f"{count(waiting, 'finished sample')} in its journal, not in this export"
            if waiting
            else "not every sample was recorded"
        )
        warnings.warn(
            TcbReplayWarning(f"run {run.run_id!r} is {status}: {said}; {finish_hint(run)}"),
            stacklevel=3,
        )


def export_jsonl(
    run: Run, out_dir: str | Path, *, error: type[TcbReplayError] = InputError
) -> list[Path]:
    """Write the run's samples and messages as JSONL files beside a copy of the manifest.

    The three files are written under temporary names and renamed once all are whole: an
    export that fails or is killed leaves the files of an earlier one as they were. A failure
    to write is ``error`` (``out_dir`` is the user's choice; StoreError inside the store).
    Samples keep the file's order, messages go in sample order and position (whatever the
    file's row groups), a slice of samples at a time."""
    check_run(run, "export_jsonl")
    out_dir = Path(out_dir) if isinstance(out_dir, str) else out_dir  # (a URL's path stays)
    with run.reading():  # not deleted (record --overwrite) while it is read
        hint = partial(_unfinished_hint, run)
        # both opened before anything is written
        samples = Slices(run.dir / SAMPLES, None, hint=hint)
        messages = Slices(run.dir / MESSAGES, None, hint=hint)
        bounds = messages.bounds()  # its own: every message, whether or not its sample is
        manifest = json_text(run.manifest)
        written = [out_dir / name.replace(".parquet", ".jsonl") for name in (SAMPLES, MESSAGES)]
        with staged(error) as files:
            files.folder(out_dir)
            files.write(written[0], partial(_write_jsonl, samples.batches()))
            sorted_messages = (
                messages.read(b).sort_by([("sample_index", "ascending"), ("position", "ascending")])
                for b in bounds
            )
            files.write(written[1], partial(_write_jsonl, sorted_messages))
            written.append(out_dir / MANIFEST)
            files.write(written[-1], lambda tmp: tmp.write_text(manifest, encoding="utf-8"))
    return written


def _unfinished_hint(run: Run) -> str | None:
    unfinished = run.status not in ("complete", "imported")
    return f"the run is {run.status}; {finish_hint(run)}" if unfinished else None


def _write_jsonl(tables: Iterator[pa.Table], path: Path) -> None:
    import jsonlines

    with jsonlines.open(path, mode="w") as writer:
        for table in tables:
            for batch in table.to_batches(max_chunksize=10_000):
                writer.write_all(_jsonable(row) for row in batch.to_pylist())


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in row.items()}


class Slices:
    """A run's Parquet file read a range of ``sample_index`` at a time: only the row groups
    whose statistics say they hold some of the range are read, and only its rows kept."""

    def __init__(
        self,
        path: Path,
        columns: list[str] | None,
        *,
        hint: Callable[[], str | None] | None = None,
        keep_bytes: int | None = None,
    ) -> None:
        """Open the file (its footer); ``columns``: those to read of the ones it has (all when
        None). A file that cannot be read is a StoreError naming it, with ``hint()``.
        ``keep_bytes``: what :meth:`read` may keep for the next slices (:data:`KEEP_BYTES`
        unless given)."""
        self.path = path
        self._hint = hint
        self._keep_bytes = keep_bytes
        try:
            self._file = parquet_file(path)
            names = self._file.schema_arrow.names
            self._columns = names if columns is None else [c for c in columns if c in names]
            self._groups = self._statistics()
            self._kept: dict[int, pa.Table] = {}  # a row group's rows after the last slice
            self._kept_from: int | None = None  # that slice's end
        except (OSError, pa.ArrowException) as exc:
            raise self._error(exc) from exc

    def _error(self, exc: BaseException) -> StoreError:
        hint = self._hint() if self._hint else None
        return read_error(self.path, exc, hint=hint)

    def _statistics(self) -> list[tuple[int, Any, Any, bool]]:
        """Each row group's least and greatest sample_index (None when unknown) and whether
        it may hold rows without one."""
        meta = self._file.metadata
        names = [meta.schema.column(k).name for k in range(meta.num_columns)]
        if "sample_index" not in names:
            raise self._error(ValueError("it has no sample_index column"))
        column = names.index("sample_index")
        groups = []
        for k in range(meta.num_row_groups):
            stats = meta.row_group(k).column(column).statistics
            if stats is None or not stats.has_min_max:
                groups.append((k, None, None, True))
            else:
                nulls = not stats.has_null_count or stats.null_count > 0
                groups.append((k, stats.min, stats.max, nulls))
        return groups

    def bounds(self) -> list[Bounds]:
        """The file's sample_index values cut into slices of :data:`SLICE_SAMPLES` values,
        ascending, then the rows without one (if any)."""
        try:
            column = read_table(self.path, columns=["sample_index"])["sample_index"]
        except (OSError, pa.ArrowException) as exc:
            raise self._error(exc) from exc
        values = pc.unique(column.drop_null()).sort().to_numpy()
        out: list[Bounds] = []
        for k in range(0, len(values), SLICE_SAMPLES):
            end = k + SLICE_SAMPLES
            out.append((int(values[k]), int(values[end]) if end < len(values) else None))
        if out:  # the last slice goes to the greatest value
            out[-1] = (out[-1][0], int(values[-1]) + 1)
        if column.null_count:
            out.append(_UNNUMBERED)
        return out

    def read(self, bounds: Bounds) -> pa.Table:
        """The rows of a slice, in the file's order.

        A row group that reaches past the slice keeps its later rows in memory for the next
        slice (when it is further on, and up to :data:`KEEP_BYTES` in all): a file written in
        sample order is then read once, though a row group spans several slices."""
        lo, hi = bounds
        if lo is None or (self._kept_from is not None and lo < self._kept_from):
            self._kept = {}
        parts = []
        try:
            for k, least, most, nulls in self._groups:
                if bounds == _UNNUMBERED:
                    if not nulls:
                        continue
                elif least is not None and (most < lo or least >= hi):
                    continue
                table = self._kept.pop(k, None)
                if table is None:
                    table = self._file.read_row_group(k, columns=self._columns)
                index = table["sample_index"]
                if bounds == _UNNUMBERED:
                    parts.append(table.filter(pc.is_null(index)))
                    continue
                parts.append(table.filter(pc.and_(pc.greater_equal(index, lo), pc.less(index, hi))))
                if most is not None and most >= hi:
                    later = table.filter(pc.greater_equal(index, hi))
                    keep = KEEP_BYTES if self._keep_bytes is None else self._keep_bytes
                    if later.nbytes + sum(t.nbytes for t in self._kept.values()) <= keep:
                        self._kept[k] = later
            self._kept_from = hi
            if not parts:
                return self._file.schema_arrow.empty_table().select(self._columns)
            return pa.concat_tables(parts)
        except (OSError, pa.ArrowException) as exc:
            raise self._error(exc) from exc

    def read_indices(self, indices: Collection[int]) -> pa.Table:
        """The rows whose sample_index is one of ``indices``, in the file's order: only the
        row groups whose statistics say they may hold one are read (a replay and a report read
        the few samples they need of a large run so)."""
        wanted = sorted(set(indices))
        if not wanted:
            return self._file.schema_arrow.empty_table().select(self._columns)
        ask = pa.array(wanted, self._file.schema_arrow.field("sample_index").type)
        parts = []
        try:
            for k, least, most, _ in self._groups:
                if least is not None:
                    at = bisect.bisect_left(wanted, least)
                    if at == len(wanted) or wanted[at] > most:
                        continue
                table = self._file.read_row_group(k, columns=self._columns)
                parts.append(table.filter(pc.is_in(table["sample_index"], value_set=ask)))
            if not parts:
                return self._file.schema_arrow.empty_table().select(self._columns)
            return pa.concat_tables(parts)
        except (OSError, pa.ArrowException) as exc:
            raise self._error(exc) from exc

    @property
    def row_groups(self) -> int:
        """How many row groups the file has."""
        return self._file.metadata.num_row_groups

    def batches(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        """The whole file in its order, a row group at a time (``columns``: these of the
        file's, else those it was opened with)."""
        for k in range(self._file.metadata.num_row_groups):
            yield self.read_group(k, columns)

    def read_group(self, k: int, columns: list[str] | None = None) -> pa.Table:
        """Row group ``k``'s rows (``columns``: as for :meth:`batches`)."""
        try:
            return self._file.read_row_group(k, columns=columns or self._columns)
        except (OSError, pa.ArrowException) as exc:
            raise self._error(exc) from exc


_TRACE_COLUMNS = ["sample_id", "trial", "sample_index", "status", "error", "error_type", "metadata"]
_TIMES = ["started_at", "finished_at", "attempts", "duration_s"]


def run_traces(run: Run, *, timings: bool = False) -> Iterator[dict[str, Any]]:
    """Every stored sample and trial of a run in ``sample_index`` order: ``sample_id``,
    ``trial``, ``status``, ``error``, ``error_type``, ``metadata`` (an object or None),
    ``messages`` (each as ``message_to_dict`` wrote it) and ``plain`` (whether orjson read
    every JSON value of it, see :func:`tcbreplay._json.parse_plain`); with ``timings``, also
    ``started_at``, ``finished_at``, ``attempts``, ``duration_s`` (None where the file has
    none) and ``latencies`` (each message's, by position).

    The files are opened here (a StoreError if they cannot be); the traces are read a slice
    of samples at a time as they are taken. The caller holds ``run.reading()`` until then."""
    samples = Slices(run.dir / SAMPLES, _TRACE_COLUMNS + (_TIMES if timings else []))
    extra = ["latency_s"] if timings else []
    messages = Slices(run.dir / MESSAGES, ["sample_index", "position", "message", *extra])
    bounds = samples.bounds()

    def traces() -> Iterator[dict[str, Any]]:
        for b in bounds:
            yield from _slice_traces(samples.read(b), messages.read(b), timings)

    return traces()


def _slice_traces(samples: pa.Table, messages: pa.Table, timings: bool) -> list[dict[str, Any]]:
    """The traces of a slice's samples and messages, in sample_index order."""
    samples = with_optional_columns(samples, SAMPLES_SCHEMA)
    messages = with_optional_columns(messages, MESSAGES_SCHEMA)
    by_index: dict[int, list[dict[str, Any]]] = {}
    # the sample_index values of the messages Python's reader read (see _json.parse_plain)
    not_plain: set[int] = set()
    ordered = messages.sort_by([("sample_index", "ascending"), ("position", "ascending")])
    for index, text in zip(
        ordered["sample_index"].to_pylist(), ordered["message"].to_pylist(), strict=True
    ):
        message, plain = _json.parse_plain(text)
        by_index.setdefault(index, []).append(message)
        if not plain:
            not_plain.add(index)
    samples = samples.sort_by("sample_index")
    out = []
    for row in samples.select(_TRACE_COLUMNS).to_pylist():
        meta = row.pop("metadata")
        row["metadata"], plain = _json.parse_plain(meta) if meta else (None, True)
        index = row.pop("sample_index")
        row["messages"] = by_index.get(index, [])
        row["plain"] = plain and index not in not_plain
        out.append(row)
    if timings:
        _add_timings(out, samples, messages)
    return out


def _add_timings(traces: list[dict[str, Any]], samples: pa.Table, messages: pa.Table) -> None:
    """Each trace's start and end, attempts and duration, and its messages' latencies."""
    columns = ["sample_id", "trial", "sample_index"]
    columns += [name for name in _TIMES if name in samples.column_names]
    latencies: dict[int, dict[int, float | None]] = {}
    for index, position, latency in zip(
        *(messages[c].to_pylist() for c in ("sample_index", "position", "latency_s")),
        strict=True,
    ):
        latencies.setdefault(index, {})[position] = latency
    rows = {(r["sample_id"], r["trial"]): r for r in samples.select(columns).to_pylist()}
    for trace in traces:
        row = rows[(trace["sample_id"], trace["trial"])]
        for name in _TIMES:
            trace[name] = row.get(name)
        own = latencies.get(row["sample_index"], {})
        trace["latencies"] = [own.get(k) for k in range(len(trace["messages"]))]
