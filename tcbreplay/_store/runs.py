"""The trace store: one directory per run, a versioned manifest, Parquet at rest.

Layout of ``<store>/<run_id>/`` (``schema_version`` 1, documented in the README):

- ``manifest.json``: everything needed to score the run without its inputs.
- ``dataset.jsonl``: the run's dataset, normalised, one entry per line (for resuming).
- ``samples.parquet``: one row per sample (``SAMPLES_SCHEMA``).
- ``messages.parquet``: one row per message, the raw LangChain serialization (``MESSAGES_SCHEMA``),
  in row groups of one message type each (:class:`MessagesWriter`).
- ``journal.jsonl``: while recording, one line per finished sample; folded into the
  Parquet files when the run finishes, so a crash loses only samples in flight
  (:mod:`tcbreplay._store.journal`).
- ``writer.lock``: held (``flock``) by the one process writing the run.
- ``scores/<scoring>/``: per-sample scores and a summary, one folder per scoring options.
- ``evaluations/``: the dashboard file.

A run is deleted by renaming its folder to ``.deleted-<run_id>-<random>`` in the store, then
removing that: no view reads such a folder, and the next creation or deletion of a run removes
one that a killed deletion left.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import re
import secrets
import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tcbreplay._inputs import limits
from tcbreplay._store.files import (  # noqa: F401  (output_target: imported from here by its users)
    json_text,
    output_target,
    replace_with,
    staged,
    write_error,
    write_json_atomic,
    write_jsonl_atomic,
    writing,
)
from tcbreplay._store.locks import (
    WAIT_HINT,
    WRITABLE_HINT,
    deleted_meanwhile,
    dir_lock,
    lock_holder,
    same_file,
    take_lock,
)
from tcbreplay.errors import (
    InputError,
    RunExistsError,
    RunLockedError,
    RunNotFoundError,
    StoreError,
    TcbReplayError,
    first_line,
)

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
DATASET = "dataset.jsonl"
SAMPLES = "samples.parquet"
MESSAGES = "messages.parquet"
JOURNAL = "journal.jsonl"
LOCK = "writer.lock"
DATA_FILES = (SAMPLES, MESSAGES)
SCORES = "scores"
EVALUATIONS = "evaluations"
DEFAULT_STORE = "traces"
# Row groups of 128Ki rows: DuckDB scans a file one row group per thread, so a run's
# million rows in one group would be read by one core.
ROW_GROUP_ROWS = 128 * 1024
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 6}

_TS = pa.timestamp("us", tz="UTC")
SAMPLES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("sample_id", pa.string()),
        ("sample_index", pa.int32()),
        ("input", pa.string()),
        ("gold", pa.string()),  # JSON: [{"name", "args"}, ...]
        ("category", pa.string()),
        ("status", pa.string()),  # ok | error | missing
        ("attempts", pa.int32()),
        ("error_type", pa.string()),
        ("error", pa.string()),
        ("started_at", _TS),
        ("finished_at", _TS),
        ("duration_s", pa.float64()),
        ("n_messages", pa.int32()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
    ]
)
MESSAGES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("sample_id", pa.string()),
        ("sample_index", pa.int32()),  # the sample's, so scoring needs no join on ids
        ("position", pa.int32()),
        ("type", pa.string()),  # human | ai | tool | system | ...
        ("message", pa.string()),  # JSON, as langchain_core.messages.message_to_dict writes it
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("total_tokens", pa.int64()),
        ("latency_s", pa.float64()),
    ]
)
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def validate_run_id(run_id: str) -> str:
    """Run ids name directories: letters, digits, ``.``, ``_`` and ``-`` only."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise InputError(
            f"run id {run_id!r}: use letters, digits, '.', '_' and '-' (at most 128, "
            "starting with a letter or digit)"
        )
    return run_id


def file_record(path: Path) -> dict[str, Any]:
    """sha256, size and modification time of a file, as the manifest keeps them."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    stat = path.stat()
    return {"sha256": digest.hexdigest(), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


class Run:
    """A run directory in the store, read-only."""

    def __init__(self, path: Path) -> None:
        self.dir = path
        self.run_id = path.name
        self._manifest: dict[str, Any] | None = None

    @property
    def manifest(self) -> dict[str, Any]:
        if self._manifest is None:
            self._manifest = read_manifest(self.dir)
        return self._manifest

    @property
    def samples_path(self) -> Path:
        return self.dir / SAMPLES

    @property
    def messages_path(self) -> Path:
        return self.dir / MESSAGES

    @property
    def status(self) -> str:
        return str(self.manifest["status"])

    def _source(self) -> str | None:
        try:
            return self.manifest.get("source")
        except StoreError:  # no manifest (yet): a recording
            return None

    def resume_command(self) -> str:
        """The command that finishes recording this run (naming its store unless default)."""
        store = self.dir.parent
        where = "" if store == Path(DEFAULT_STORE) else f" --store {shlex.quote(str(store))}"
        if self._source() == "import":  # an import that was killed
            return f"the same tcbreplay import again (it replaces the unfinished run){where}"
        return f"tcbreplay record --resume {shlex.quote(self.run_id)}{where}"

    def has_data(self) -> bool:
        return self.samples_path.exists() and self.messages_path.exists()

    def unfolded_records(self) -> int:
        """How many finished samples wait in the journal, not yet in the Parquet files (a
        recording still going, or one that was killed)."""
        try:
            with (self.dir / JOURNAL).open("rb") as f:
                return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
        except FileNotFoundError:
            return 0

    def recorded_ids(self) -> dict[str, str]:
        """Map every stored sample id to its status (journal entries override Parquet)."""
        out: dict[str, str] = {}
        if self.samples_path.exists():
            try:
                table = pq.read_table(self.samples_path, columns=["sample_id", "status"])
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise StoreError(
                    f"{self.samples_path}: not a readable Parquet file ({first_line(exc)})"
                ) from exc
            out.update(
                zip(table["sample_id"].to_pylist(), table["status"].to_pylist(), strict=True)
            )
        from tcbreplay._store.journal import read_journal

        for record in read_journal(self.dir / JOURNAL):
            out[record["sample_id"]] = record["status"]
        return out

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Keep the run from being deleted (``record --overwrite``) while it is read; any
        number of readers at once."""
        try:
            fd = os.open(self.dir, os.O_RDONLY)
        except FileNotFoundError:
            raise deleted_meanwhile(self.run_id) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunLockedError(
                    f"run {self.run_id!r} is being deleted to be recorded anew (--overwrite)",
                    hint="read it once that recording is done",
                ) from None
            if not same_file(fd, self.dir):  # renamed away by a deletion, finished since
                raise deleted_meanwhile(self.run_id)
            yield
        finally:
            os.close(fd)

    @contextmanager
    def writing_results(self) -> Iterator[None]:
        """One process at a time writes the run's results (scores, dashboard file); another
        waits for its turn."""
        with writing(self.dir / SCORES, hint=WRITABLE_HINT):
            (self.dir / SCORES).mkdir(exist_ok=True)
        with dir_lock(self.dir / SCORES, fcntl.LOCK_EX):
            yield

    def scores_dir(self, scoring: str) -> Path:
        return self.dir / SCORES / scoring


class Store:
    """A folder of run directories."""

    def __init__(self, root: str | Path = DEFAULT_STORE) -> None:
        self.root = Path(root)

    def run_dir(self, run_id: str) -> Path:
        return self.root / validate_run_id(run_id)

    def exists(self, run_id: str) -> bool:
        return (self.run_dir(run_id) / MANIFEST).exists()

    def runs(self) -> list[Run]:
        """Every run in the store, by run id (not the folders of deletions cut short)."""
        if not self.root.is_dir():
            return []
        return [
            Run(p)
            for p in sorted(self.root.iterdir())
            if not p.name.startswith(DELETED_PREFIX) and (p / MANIFEST).is_file()
        ]

    def open_run(self, run_id: str) -> Run:
        path = self.run_dir(run_id)
        if not (path / MANIFEST).is_file():
            known = [r.run_id for r in self.runs()]
            if len(known) > 5:
                hint = (
                    f"runs in {self.root} include {', '.join(known[:5])} and {len(known) - 5} "
                    "more (tcbreplay runs lists them)"
                )
            elif known:
                hint = f"runs in {self.root}: {', '.join(known)}"
            else:
                hint = f"the store {self.root} holds no runs: is --store right?"
            raise RunNotFoundError(f"run {run_id!r} not found in store {self.root}", hint=hint)
        return Run(path)

    def create_run(
        self, manifest: dict[str, Any], dataset: list[dict[str, Any]] | None = None
    ) -> RunWriter:
        """Create a new run directory and return its locked writer.

        ``dataset`` (normalised entries) is written to ``dataset.jsonl`` first. A folder of the
        run's name without a manifest is taken only while it holds no more than a creation
        killed before its manifest leaves; a failure removes the folder if this made it.
        """
        run_id = validate_run_id(manifest["run_id"])
        path = self.root / run_id
        if (path / MANIFEST).exists():
            raise self._taken(path)
        self.sweep()
        with writing(path, hint=WRITABLE_HINT):
            self.root.mkdir(parents=True, exist_ok=True)
            made = _make_dir(path)
        lock = take_lock(path / LOCK)
        try:
            if (path / MANIFEST).exists():  # made by another writer since the look above
                raise RunExistsError(
                    f"run {run_id!r} was made by another process at the same moment",
                    hint="choose another --run-id",
                )
            _refuse_leftovers(path)
            writer = RunWriter(path, lock)
        except BaseException:
            os.close(lock)
            raise
        try:
            if dataset is not None:
                write_jsonl_atomic(path / DATASET, dataset)
            writer.write_manifest(
                {**manifest, "schema_version": SCHEMA_VERSION, "status": "recording"}
            )
        except BaseException:
            if made:
                writer.discard()
            else:
                writer.close()
            raise
        return writer

    def _taken(self, path: Path) -> TcbReplayError:
        """The error for creating a run the store holds: the process writing it, if one is."""
        holder = lock_holder(path / LOCK)
        if holder is not None:
            return RunLockedError(f"run {path.name!r} is being written by {holder}", hint=WAIT_HINT)
        return RunExistsError(
            f"run {path.name!r} already exists in {self.root}", hint="choose another --run-id"
        )

    def delete_run(self, run_id: str) -> None:
        """Remove a run directory (refused while another process writes or reads it), or a
        folder of that name that holds no manifest.

        The folder is renamed in one step to a hidden name that no view reads, then removed:
        a deletion cut short (kill -9) leaves only that folder, which the next creation or
        deletion of a run removes, and nothing of the run is ever read again.
        """
        path = self.run_dir(run_id)
        if not path.is_dir():
            self.open_run(run_id)  # not found: the error names the runs there are
        self.sweep()
        lock = take_lock(path / LOCK)  # refused while another process writes it
        try:
            with dir_lock(path, fcntl.LOCK_EX | fcntl.LOCK_NB) as held:
                if not held:
                    raise RunLockedError(
                        f"run {run_id!r} is being read (scored, reported, audited, diffed or "
                        "exported) by another process",
                        hint="wait for it to finish",
                    )
                _discard(path)
        finally:
            os.close(lock)

    def sweep(self) -> None:
        """Remove what deletions cut short left behind (their hidden folders)."""
        try:
            names = [p for p in self.root.iterdir() if p.name.startswith(DELETED_PREFIX)]
        except OSError:
            return
        for path in names:
            shutil.rmtree(path, ignore_errors=True)

    def resume_run(self, run_id: str) -> RunWriter:
        """Lock an existing run for more writing (resume or retry)."""
        run = self.open_run(run_id)
        return RunWriter(run.dir)

    def check_output(self, path: Path, option: str = "-o") -> None:
        """Refuse an output path inside the store, where a file written could replace one of a
        run's (``catalog -o RUN/manifest.json``) or be taken for one."""
        root = Path(os.path.realpath(self.root))
        target = Path(os.path.realpath(path))
        if target == root or root in target.parents:
            raise InputError(
                f"{option} {path}: inside the store {self.root}, which holds runs only",
                hint=f"give {option} a path outside {self.root}",
            )


# Hidden folders of deletions under way or cut short: ``<prefix><run_id>-<random>``. No run id
# starts with a dot, so no run is ever named so.
DELETED_PREFIX = ".deleted-"
# What a creation of a run killed before its manifest leaves in the folder (the journal empty)
_FIRST_FILES = {LOCK, JOURNAL, DATASET, DATASET + ".tmp", MANIFEST + ".tmp"}


def _make_dir(path: Path) -> bool:
    """Make the folder ``path``; whether this made it (False: it was there)."""
    try:
        path.mkdir()
    except FileExistsError:
        return False
    return True


def _refuse_leftovers(path: Path) -> None:
    """Refuse a folder without a manifest that holds more than a creation's first files:
    samples of a run whose deletion was cut short by an older tcbreplay, or files put there
    by hand, that a new run would take for its own."""
    found = sorted(p.name for p in path.iterdir() if p.name not in _FIRST_FILES)
    journal = path / JOURNAL
    if journal.exists() and journal.stat().st_size:
        found.insert(0, JOURNAL)
    if found:
        listed = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise StoreError(
            f"{path}: holds {listed} but no {MANIFEST}: not a run, and not to be taken for a "
            "new one (left by a deletion cut short?)",
            hint="remove the folder if its files are not needed (record --overwrite does), or "
            "choose another run id",
        )


def _discard(path: Path) -> None:
    """Remove a folder of the store: renamed away in one step, then deleted."""
    away = path.with_name(f"{DELETED_PREFIX}{path.name}-{secrets.token_hex(4)}")
    with writing(path, hint=WRITABLE_HINT):
        os.rename(path, away)
    shutil.rmtree(away, ignore_errors=True)


class RunWriter:
    """The one writer of a run: appends finished samples to the journal, then folds it in."""

    def __init__(self, path: Path, lock: int | None = None) -> None:
        """Take the run (``lock``: its lock, already taken)."""
        self.dir = path
        self.run_id = path.name
        from tcbreplay._store.journal import drop_torn_tail

        self._lock_fd: int | None = take_lock(path / LOCK) if lock is None else lock
        self._failed: TcbReplayError | None = None
        try:
            with writing(path / JOURNAL, hint=WRITABLE_HINT):
                drop_torn_tail(path / JOURNAL)
                self._journal = (path / JOURNAL).open("a", encoding="utf-8")
        except BaseException:
            os.close(self._lock_fd)
            raise

    @property
    def manifest(self) -> dict[str, Any]:
        return read_manifest(self.dir)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json_atomic(self.dir / MANIFEST, manifest, hint=WRITABLE_HINT)

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        manifest = {**self.manifest, **fields}
        self.write_manifest(manifest)
        return manifest

    def append(self, record: dict[str, Any]) -> None:
        """Append one finished sample; it survives a crash of this process from now on."""
        self.append_line(journal_line(record))

    def append_line(self, line: str) -> None:
        """Append one finished sample already encoded by :func:`journal_line`. After a failed
        append (a full disk) none is tried again: a torn line stays the journal's last."""
        if self._failed is not None:
            raise self._failed
        try:
            self._journal.write(line + "\n")
            self._journal.flush()
        except OSError as exc:
            self._failed = write_error(self.dir / JOURNAL, exc, hint=WRITABLE_HINT)
            raise self._failed from exc

    def forget(self) -> None:
        """In a forked child: close this writer's files unflushed; the parent keeps the lock."""
        os.close(self._journal.fileno())
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        self._lock_fd = None

    def fold(self) -> None:
        """Fold the journal into the Parquet files and record their sha256 in the manifest."""
        from tcbreplay._store.journal import fold_journal

        self._close_journal()
        fold_journal(self.dir)
        self.update_manifest(files={name: file_record(self.dir / name) for name in DATA_FILES})

    def discard(self) -> None:
        """Remove the run (one this writer made and could not finish), then release it."""
        try:
            self._close_journal()
            _discard(self.dir)
        finally:
            self.close()

    def _close_journal(self) -> None:
        # a line a failed append left in the buffer is lost: that sample is recorded again
        with suppress(OSError):
            self._journal.close()

    def close(self) -> None:
        if not self._journal.closed:
            self._close_journal()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def journal_line(record: dict[str, Any]) -> str:
    """A finished sample as one line of the journal (without the newline)."""
    return json.dumps(record, ensure_ascii=False, default=str)


# the manifest's fields that readers rely on, and the JSON type each must have when present
_MANIFEST_FIELDS: dict[str, type] = {
    "run_id": str,
    "status": str,
    "created_at": str,
    "finished_at": str,
    "benchmark": dict,
    "dataset": dict,
    "tools": dict,
    "system_prompt": dict,
    "model": dict,
    "runner": dict,
    "files": dict,
    "totals": dict,
}
_JSON_TYPES = {dict: "an object", list: "a list", str: "a string"}


def read_manifest(path: Path) -> dict[str, Any]:
    """A run's manifest, checked for the shape its readers rely on."""
    where = path / MANIFEST
    try:
        manifest = limits.loads(where.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise StoreError(
            f"{where}: unreadable manifest: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from exc
    except (OSError, ValueError) as exc:  # not JSON, or beyond the limits of JSON input
        raise StoreError(f"{where}: unreadable manifest: {exc}") from exc
    if not isinstance(manifest, dict):
        raise StoreError(f"{where}: not a manifest: {_json_type(manifest)}, not an object")
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{where}: schema_version {version!r}, this tcbreplay reads {SCHEMA_VERSION}"
        )
    if "status" not in manifest:  # every writer sets it first: recording, then how it ended
        raise StoreError(f"{where}: no status")
    for key, kind in _MANIFEST_FIELDS.items():
        value = manifest.get(key)
        if value is not None and not isinstance(value, kind):
            raise StoreError(f"{where}: {key} is {_json_type(value)}, not {_JSON_TYPES[kind]}")
    specs = (manifest.get("tools") or {}).get("specs", [])
    if not isinstance(specs, list) or not all(
        isinstance(spec, dict) and isinstance(spec.get("name"), str) for spec in specs
    ):
        raise StoreError(f"{where}: tools.specs is not a list of tool specs, each with a name")
    for spec in specs:  # scoring and the tools view read each tool's parameter properties
        field, value = "parameters", spec.get("parameters")
        if isinstance(value, dict):
            field, value = "parameters.properties", value.get("properties")
        if not isinstance(value, dict | None):
            raise StoreError(
                f"{where}: tools.specs: tool {spec['name']!r}: {field} is {_json_type(value)}, "
                "not an object"
            )
    return manifest


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _write_parquet(table: pa.Table, path: Path, level: int | None = None) -> None:
    options = (
        dict(PARQUET_OPTIONS) if level is None else {**PARQUET_OPTIONS, "compression_level": level}
    )
    replace_with(
        path,
        lambda tmp: pq.write_table(table, tmp, row_group_size=ROW_GROUP_ROWS, **options),
        hint=WRITABLE_HINT,
    )


def write_table(table: pa.Table, path: Path, level: int | None = None) -> None:
    """Write a Parquet file atomically with zstd (``level``: the store's unless given)."""
    with writing(path.parent, hint=WRITABLE_HINT):
        path.parent.mkdir(parents=True, exist_ok=True)
    _write_parquet(table, path, level)


class MessagesWriter:
    """``messages.parquet`` as the store lays it out: every row group holds messages of one
    type, so a scan of the AI messages (scoring's, the ``tool_calls`` view's) skips the
    others' row groups by their statistics, without reading their text. Within a type, rows
    keep the order they are written in (sample order, then position); files of other
    layouts read the same, only slower."""

    def __init__(self, path: Path) -> None:
        self._writer = pq.ParquetWriter(path, MESSAGES_SCHEMA, **PARQUET_OPTIONS)
        self._pending: dict[str | None, list[pa.Table]] = {}
        self.rows_written = 0

    def write(self, table: pa.Table) -> None:
        """Add rows (``MESSAGES_SCHEMA``); a type's full row groups are written at once."""
        import pyarrow.compute as pc  # here: commands that only read the store never load it

        types = table["type"]
        for kind in pc.unique(types).to_pylist():
            rows = table.filter(pc.is_null(types) if kind is None else pc.equal(types, kind))
            pending = self._pending.setdefault(kind, [])
            pending.append(rows)
            if sum(t.num_rows for t in pending) >= ROW_GROUP_ROWS:
                whole = pa.concat_tables(pending)
                full = whole.num_rows - whole.num_rows % ROW_GROUP_ROWS
                self._write(whole.slice(0, full))
                self._pending[kind] = [whole.slice(full)]

    def close(self) -> None:
        """Write each type's last rows (types in name order) and finish the file."""
        for kind in sorted(self._pending, key=lambda k: (k is None, k or "")):
            self._write(pa.concat_tables(self._pending[kind]))
        self._pending = {}
        self._writer.close()

    def abandon(self) -> None:
        """Close the file after a failure, unfinished (its writer removes it)."""
        with suppress(Exception):
            self._writer.close()

    def _write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
            self.rows_written += table.num_rows


def write_messages(table: pa.Table, path: Path) -> None:
    """Write ``messages.parquet`` atomically, laid out by :class:`MessagesWriter`."""

    def write(tmp: Path) -> None:
        writer = MessagesWriter(tmp)
        try:
            writer.write(table)
            writer.close()
        except BaseException:
            writer.abandon()
            raise

    replace_with(path, write, hint=WRITABLE_HINT)


def write_frame(frame: Any, path: Path, level: int = 1) -> None:
    """Write a Polars frame as Parquet atomically with zstd at ``level``, by Polars'
    writer (which encodes columns in parallel)."""
    with writing(path.parent, hint=WRITABLE_HINT):
        path.parent.mkdir(parents=True, exist_ok=True)
    replace_with(path, lambda tmp: write_frame_to(frame, tmp, level), hint=WRITABLE_HINT)


def write_frame_to(frame: Any, path: Path, level: int = 1) -> None:
    """Write a Polars frame to ``path`` as it is (no temporary name: see :func:`write_frame`)."""
    frame.write_parquet(path, compression="zstd", compression_level=level)


def export_jsonl(
    run: Run, out_dir: Path, *, error: type[TcbReplayError] = InputError
) -> list[Path]:
    """Write the run's samples and messages as JSONL files beside a copy of the manifest.

    The three files are written under temporary names and renamed once all are whole: an
    export that fails or is killed leaves the files of an earlier one as they were. A failure
    to write is ``error`` (``out_dir`` is the user's choice; StoreError inside the store)."""
    with run.reading():  # not deleted (record --overwrite) while it is read
        tables = {}
        for name in (SAMPLES, MESSAGES):  # both read before anything is written
            try:
                tables[name] = pq.read_table(run.dir / name)
            except (OSError, pa.ArrowException) as exc:
                unfinished = run.status not in ("complete", "imported")
                raise StoreError(
                    f"{run.dir / name}: cannot read it: {first_line(exc)}",
                    hint=f"the run is {run.status}; finish it with: {run.resume_command()}"
                    if unfinished
                    else None,
                ) from exc
        manifest = json_text(run.manifest)
    with writing(out_dir, error=error):
        out_dir.mkdir(parents=True, exist_ok=True)
    # messages in sample order and position, whatever the file's row groups
    tables[MESSAGES] = tables[MESSAGES].sort_by(
        [("sample_index", "ascending"), ("position", "ascending")]
    )
    written = [out_dir / name.replace(".parquet", ".jsonl") for name in tables]
    with staged(error) as files:
        for path, table in zip(written, tables.values(), strict=True):
            files.write(path, partial(_write_jsonl_table, table))
        written.append(out_dir / MANIFEST)
        files.write(written[-1], lambda tmp: tmp.write_text(manifest, encoding="utf-8"))
    return written


def _write_jsonl_table(table: pa.Table, path: Path) -> None:
    import jsonlines

    with jsonlines.open(path, mode="w") as writer:
        for batch in table.to_batches(max_chunksize=10_000):
            writer.write_all(_jsonable(row) for row in batch.to_pylist())


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in row.items()}
