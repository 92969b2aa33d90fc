"""A run directory in the store, read: its manifest and data files, the checks that it can
be read (the one place every command decides it; its Parquet files in the store's format and
inside its folder), and the locks of those who read it or write its results. Opening,
creating and deleting runs is the store's (:mod:`tcbreplay._store.runs`).
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pyarrow as pa

from tcbreplay._store import objects
from tcbreplay._store.files import (
    FOLDING,
    TEMPORARY_SUFFIX,
    made_again,
    make_dir,
    writing,
)
from tcbreplay._store.locks import (
    WRITABLE_HINT,
    deleted_meanwhile,
    dir_lock,
    same_file,
    wait_for_lease,
)
from tcbreplay._store.manifest import read_manifest
from tcbreplay._store.objects import is_remote
from tcbreplay._store.parquet import fold_of, read_schema, read_table
from tcbreplay._store.schema import (
    DIVERGENCES,
    DIVERGENCES_SCHEMA,
    LOCK,
    MESSAGES,
    MESSAGES_SCHEMA,
    OPTIONAL_COLUMNS,
    SAMPLES,
    SAMPLES_SCHEMA,
    SCORES,
)
from tcbreplay._store.store_urls import DEFAULT_STORE
from tcbreplay.errors import (
    InputError,
    RunLockedError,
    StoreError,
    first_line,
)

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def validate_run_id(run_id: str) -> str:
    """Run ids name directories: letters, digits, ``.``, ``_`` and ``-`` only."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise InputError(
            f"run id {run_id!r}: use letters, digits, '.', '_' and '-' (at most 128, "
            "starting with a letter or digit)"
        )
    return run_id


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
    def samples_paths(self) -> list[Path]:
        """The run's samples files (see :meth:`data_dirs`)."""
        return [folder / SAMPLES for folder in self.data_dirs()]

    @property
    def messages_paths(self) -> list[Path]:
        """The run's messages files, beside its samples files."""
        return [folder / MESSAGES for folder in self.data_dirs()]

    def data_dirs(self) -> list[Path]:
        """The folders that hold the run's samples and messages files (shards' journals
        are folded into the run's own: one folder)."""
        return [self.dir]

    @property
    def divergences_path(self) -> Path:
        """A replay's divergences (other runs have no such file)."""
        return self.dir / DIVERGENCES

    @property
    def status(self) -> str:
        return str(self.manifest["status"])

    def _source(self) -> str | None:
        try:
            return self.manifest.get("source")
        except StoreError:  # no manifest (yet): a recording
            return None

    def store_option(self) -> str:
        """`` --store STORE`` as the commands a hint gives name the run's store ('' for the
        default one)."""
        store = self.dir.parent
        return "" if store == Path(DEFAULT_STORE) else f" --store {shlex.quote(str(store))}"

    def resume_command(self, flag: str = "--resume") -> str:
        """The command that finishes recording this run (naming its store unless default);
        ``flag="--retry-errors"`` records its failed samples again too."""
        where = self.store_option()
        if self._source() == "import":  # an import that was killed
            return (
                "the same tcbreplay import again"
                + (f" (with{where})" if where else "")
                + ": it replaces the unfinished run"
            )
        if self._source() == "collect":  # a collection that was killed
            return f"tcbreplay collect --run-id {shlex.quote(self.run_id)}{where}"
        if self._source() == "replay":  # the command that made it, which resumes it
            return str(((self.manifest.get("replay") or {}).get("command")) or "the same "
                       "tcbreplay replay again")  # fmt: skip
        return f"tcbreplay record {flag} {shlex.quote(self.run_id)}{where}"

    def changed_since(self, summary: dict[str, Any]) -> bool:
        """Whether the run's data files are other than those a stored scoring (its
        ``summary``) scored: the sha256 the manifest records for samples.parquet or
        messages.parquet is not the one the scoring's audit record holds. A resumed run, or
        a shard folded in since, rewrites them. No file is read (the manifest is); a scoring
        or manifest without the hashes (older, or an import's) is taken as current."""
        audit = summary.get("audit")
        scored = audit.get("inputs_sha256") if isinstance(audit, dict) else None
        files = self.manifest.get("files")
        if not isinstance(scored, dict) or not isinstance(files, dict):
            return False
        for name in (SAMPLES, MESSAGES):
            entry = files.get(name)
            now = entry.get("sha256") if isinstance(entry, dict) else None
            then = scored.get(name)
            if isinstance(now, str) and isinstance(then, str) and now != then:
                return True
        return False

    def has_data(self) -> bool:
        return all(self._present(SAMPLES, MESSAGES))

    def _present(self, *names: str) -> list[bool]:
        """Whether each of the files ``names`` is in the run's folder: on object storage by
        one listing of the folder, not a request per file."""
        if is_remote(self.dir):
            listed = set(objects.list_names(self.dir))
            return [name in listed for name in names]
        return [(self.dir / name).exists() for name in names]

    def check(self, *, writing: bool = False) -> None:
        """Refuse a run that cannot be read, the one place every command decides it: a
        folder whose name is no run id, or that is a symbolic link (it must be in the store
        folder itself: SQL may read the runs' folders and nothing else), a manifest that
        cannot be read, or Parquet files not in the store format (footers only) or linked
        out of the folder; and, but to a writer (``writing``: it folds them again), data
        files of two folds."""
        try:
            validate_run_id(self.run_id)
        except InputError as exc:  # a folder renamed by hand: no command could name it
            raise StoreError(f"{self.dir}: {exc}; rename the folder") from exc
        with objects.failures(self.dir):
            self._check_files(writing)

    def _check_files(self, writing: bool = False) -> None:
        target = self.dir.resolve()
        if not is_remote(self.dir) and target != self.dir.parent.resolve() / self.run_id:
            raise StoreError(
                f"{self.dir}: a symbolic link to {target}; tcbreplay reads only run folders "
                "that are in the store folder itself (copy the run into it)"
            )
        self.manifest  # noqa: B018 (read and checked on first use)
        there = self._present(SAMPLES, MESSAGES, DIVERGENCES)
        diverged = there.pop()
        # one of the two removed, its rows lost; but a fold cut short between its two renames
        # (the first of a run: no file before) is folded again from its journal (FOLDING)
        if any(there) and not all(there) and not self.manifest.get(FOLDING):
            missing = self.messages_path if there[0] else self.samples_path
            raise StoreError(
                f"{missing}: missing, where the run's other data file is there: the run's files "
                f"are damaged (restore the file, or {made_again(self.manifest)})"
            )
        if all(there):
            folds: dict[str, str | None] = {}
            for path, schema in ((self.samples_path, SAMPLES_SCHEMA),
                                 (self.messages_path, MESSAGES_SCHEMA)):  # fmt: skip
                check_inside(path, self.dir)
                folds[path.name] = fold_of(check_columns(path, schema))
            if diverged:
                check_inside(self.divergences_path, self.dir)
                found = check_columns(self.divergences_path, DIVERGENCES_SCHEMA)
                folds[self.divergences_path.name] = fold_of(found)
            # (a file without the mark: written by an older version, or by hand; no telling)
            if not writing and len({fold for fold in folds.values() if fold}) > 1:
                self._two_folds(folds)

    def _two_folds(self, folds: dict[str, str | None]) -> None:
        """Refuse data files written by two folds: one of the journal into them was cut
        short between its renames, or is under way; read, they mix two versions of the run
        (a sample's row of one, its messages of the other)."""
        raise StoreError(
            f"run {self.run_id!r}: its data files are of two versions ("
            + ", ".join(sorted(folds))
            + "): a fold of its journal into them is under way, "
            "or was cut short; reading them would mix the two",
            hint="wait for the command that writes it to end; if none does, finish the run "
            f"with: {self.resume_command()}",
        )

    def unfolded_records(self) -> int:
        """How many finished samples wait in the journal, not yet in the Parquet files (a
        recording still going, or one that was killed); see
        :func:`tcbreplay._store.journal.unfolded`."""
        from tcbreplay._store.journal import unfolded

        return unfolded(self.dir, self.manifest.get("files"))

    def recorded_ids(self) -> dict[tuple[str, int], str]:
        """Map every stored (sample id, trial) to its status (journal entries override
        Parquet)."""
        out: dict[tuple[str, int], str] = {}
        if self.samples_path.exists():
            try:
                names = read_schema(self.samples_path).names
                columns = ["sample_id", "status"] + (["trial"] if "trial" in names else [])
                table = read_table(self.samples_path, columns=columns)
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise StoreError(
                    f"{self.samples_path}: not a readable Parquet file ({first_line(exc)})"
                ) from exc
            ids = table["sample_id"].to_pylist()
            trials = table["trial"].to_pylist() if "trial" in columns else [0] * len(ids)
            out.update(zip(zip(ids, trials, strict=True), table["status"].to_pylist(), strict=True))
        from tcbreplay._store.journal import journal_records

        for record in journal_records(self.dir):
            out[(record["sample_id"], record.get("trial", 0))] = record["status"]
        return out

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Keep the run from being deleted (``record --overwrite``) while it is read; any
        number of readers at once. (On object storage, where readers take no lock, a run
        deleted as it is read makes that read fail.)"""
        if is_remote(self.dir):
            yield
            return
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
    def writing_results(self) -> Iterator[Callable[[], None]]:
        """One process at a time writes the run's results (scores, dashboard file); another
        waits for its turn. The ``scores`` folder is made for them, and removed again when
        the block fails and leaves it empty (a local store). Yields what to call before each
        file is put in place (:func:`~tcbreplay._store.files.staged`'s ``before_write``): on
        object storage, a check that this process still holds the lock (it may have been
        paused past its lease meanwhile, and another scoring taken over)."""
        if is_remote(self.dir):
            where = self.dir / SCORES / LOCK
            with writing(where, hint=WRITABLE_HINT):
                lock = wait_for_lease(where, f"the scores of run {self.run_id!r}")
            try:
                yield lock.check
            finally:
                lock.release()
            return
        folder = self.dir / SCORES
        with writing(folder, hint=WRITABLE_HINT):
            made = make_dir(folder)
        try:
            with dir_lock(folder, fcntl.LOCK_EX):
                # what a scoring killed before its renames left (no other writes now)
                for stale in folder.glob(f"*/*{TEMPORARY_SUFFIX}"):
                    with suppress(OSError):
                        stale.unlink()
                yield _nothing_to_check
        except BaseException:
            if made:  # a first scoring that failed leaves no folder (once no other wrote)
                with suppress(OSError):
                    folder.rmdir()
            raise

    def scores_dir(self, scoring: str) -> Path:
        return self.dir / SCORES / scoring


def check_inside(path: Path, folder: Path) -> None:
    """Refuse a run file that is a symbolic link out of its run folder: the views' connection
    may read only the run folders. (Object storage has no links.)"""
    if is_remote(path):
        return
    target = path.resolve()
    if not target.is_relative_to(folder.resolve()):
        raise StoreError(f"{path}: a symbolic link to {target}, outside the run folder")


def check_columns(path: Path, schema: pa.Schema, added: tuple[str, ...] = ()) -> pa.Schema:
    """Refuse a run file without the store's columns (those older versions lacked, and
    ``added`` ones, may be left out), or with a column of another kind of type (text,
    integers, numbers, times; a column of nulls only fits any), read from its footer only;
    the footer's schema."""
    try:
        found = read_schema(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise StoreError(f"{path}: not a readable Parquet file ({exc})") from exc
    missing = [
        name
        for name in schema.names
        if name not in found.names and name not in OPTIONAL_COLUMNS and name not in added
    ]
    if missing:
        raise StoreError(
            f"{path}: no column {', '.join(missing)}; the file is not in this tcbreplay's "
            "store format (written by another tool or an older version?)"
        )
    for field in schema:
        if field.name not in found.names:
            continue  # a column added later, absent from an older file
        actual = found.field(field.name).type
        if not pa.types.is_null(actual) and _kind(actual) != _kind(field.type):
            raise StoreError(
                f"{path}: column {field.name} holds {actual}, where the store format has "
                f"{_kind(field.type)} ({field.type})"
            )
    return found


_TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)


def _kind(arrow_type: pa.DataType) -> str:
    """The kind of values a column holds, as far as the views and scoring care."""
    if any(check(arrow_type) for check in _TEXT_TYPES):
        return "text"
    if pa.types.is_integer(arrow_type):
        return "integers"
    if pa.types.is_floating(arrow_type):
        return "numbers"
    if pa.types.is_timestamp(arrow_type):
        return "times"
    return str(arrow_type)


def _nothing_to_check() -> None:
    """A folder's lock is the kernel's: held until the process ends, nothing to check."""
