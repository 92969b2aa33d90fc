"""The trace store: a folder of run directories, each opened, created, resumed or deleted here.

A run is deleted by renaming its folder to ``.deleted-<run_id>-<random>`` in the store, then
removing that: no view reads such a folder, and the next creation or deletion of a run removes
one that a killed deletion left. The layout of a run's folder is in :mod:`tcbreplay._store.schema`.
A store may be a URL of object storage (``s3://bucket/prefix``): :mod:`tcbreplay._store.objects`
says what differs there.
"""

from __future__ import annotations

import difflib
import fcntl
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pyarrow as pa

from tcbreplay._secrets import redact
from tcbreplay._store import objects
from tcbreplay._store.files import (
    DATASET_SHA256,
    FOLDING,
    TEMPORARY_SUFFIX,
    copy_atomic,
    file_record,
    made_again,
    write_jsonl_atomic,
    writing,
)
from tcbreplay._store.lock_clock import is_clock_probe
from tcbreplay._store.locks import (
    WAIT_HINT,
    WRITABLE_HINT,
    Lock,
    acquire_lock,
    deleted_meanwhile,
    dir_lock,
    lock_holder,
    release_lock,
    same_file,
    sign_lock,
    take_lock,
    wait_for_lease,
)
from tcbreplay._store.objects import is_remote
from tcbreplay._store.parquet import fold_of, read_schema, read_table
from tcbreplay._store.schema import (
    DATASET,
    DIVERGENCES,
    DIVERGENCES_SCHEMA,
    JOURNAL,
    LOCK,
    MANIFEST,
    MESSAGES,
    MESSAGES_SCHEMA,
    OPTIONAL_COLUMNS,
    SAMPLES,
    SAMPLES_SCHEMA,
    SCHEMA_VERSION,
    SCORES,
    read_manifest,
)
from tcbreplay._store.store_urls import store_root
from tcbreplay._store.writer import (
    DELETED_PREFIX,
    Claim,
    RunWriter,
    ShardWriter,
    discard_folder,
    refuse_shards,
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

DEFAULT_STORE = "traces"

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
            made = _make_dir(folder)
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


class Store:
    """A folder of run directories."""

    def __init__(self, root: str | Path = DEFAULT_STORE) -> None:
        """``root``: a folder, or a URL of object storage (``s3://bucket/prefix``)."""
        self.root = store_root(root)

    def run_dir(self, run_id: str) -> Path:
        return self.root / validate_run_id(run_id)

    def exists(self, run_id: str) -> bool:
        with objects.failures(self.root):
            return (self.run_dir(run_id) / MANIFEST).exists()

    def runs(self) -> list[Run]:
        """Every run in the store, by run id (not the folders of deletions cut short)."""
        with objects.failures(self.root):
            return self._runs()

    def _runs(self) -> list[Run]:
        if is_remote(self.root):  # one listing, rather than a look at each folder
            if not objects.exists(self.root):
                return []
            found = {p.parent.name for p in self.root.glob(f"*/{MANIFEST}")}
            return [Run(self.root / name) for name in sorted(found)]
        if not self.root.is_dir():
            return []
        return [
            Run(p)
            for p in sorted(self.root.iterdir())
            if not p.name.startswith(DELETED_PREFIX) and (p / MANIFEST).is_file()
        ]

    def open_run(self, run_id: str, *, writing: bool = False) -> Run:
        """The run ``run_id``, checked as :meth:`Run.check` says (a :class:`StoreError` if
        it cannot be read; ``writing``: for a writer, which folds its files again)."""
        path = self.run_dir(run_id)
        with objects.failures(self.root):
            found = objects.is_file(path / MANIFEST)
        if not found:
            known = [r.run_id for r in self.runs()]
            by_lower = {name.lower(): name for name in reversed(known)}
            close = [
                by_lower[name]
                for name in difflib.get_close_matches(run_id.lower(), by_lower, n=3, cutoff=0.6)
            ]
            if close:
                names = [repr(name) for name in close]
                either = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
                hint = f"did you mean {either}? (tcbreplay runs lists them)"
            elif len(known) > 5:
                hint = (
                    f"runs in {self.root} include {', '.join(known[:5])} and {len(known) - 5} "
                    "more (tcbreplay runs lists them)"
                )
            elif known:
                hint = f"runs in {self.root}: {', '.join(known)}"
            else:
                if objects.is_remote(self.root):  # a missing bucket is said as such
                    objects.check_bucket(self.root)
                hint = f"the store {self.root} holds no runs: is --store right?"
            raise RunNotFoundError(f"run {run_id!r} not found in store {self.root}", hint=hint)
        run = Run(path)
        run.check(writing=writing)
        return run

    def create_run(
        self, manifest: dict[str, Any], dataset: list[dict[str, Any]] | Path | None = None
    ) -> RunWriter:
        """Create a new run directory and return its locked writer.

        ``dataset`` (normalised entries, or a run's ``dataset.jsonl`` to copy as it is) is
        written to ``dataset.jsonl`` first. A folder of the
        run's name without a manifest is taken only while it holds no more than a creation
        killed before its manifest leaves; a failure removes the folder if this made it.
        """
        run_id = validate_run_id(manifest["run_id"])
        if redact(run_id) != run_id:  # it names a folder, and is printed in every next step
            raise InputError(
                "--run-id: the run id holds a secret's value (or a key by its form); choose another"
            )
        path = self.root / run_id
        if is_remote(path):
            return self._create_remote(path, manifest, dataset)
        if (path / MANIFEST).exists():
            raise self._taken(path)
        self.sweep()
        with writing(path, hint=WRITABLE_HINT):
            self.root.mkdir(parents=True, exist_ok=True)
            made = _make_dir(path)
        try:
            lock = acquire_lock(path / LOCK)
        except BaseException:
            if made:  # and still empty: no other process took it meanwhile
                with suppress(OSError):
                    path.rmdir()
            raise
        try:
            if (path / MANIFEST).exists():  # made by another writer since the look above
                raise RunExistsError(
                    f"run {run_id!r} was made by another process at the same moment",
                    hint="choose another --run-id",
                )
            _refuse_leftovers(path)
        except BaseException:
            os.close(lock)
            raise
        try:  # the folder is this writer's from here: a failure removes it if this made it
            sign_lock(lock, path / LOCK)
            writer = RunWriter(path, lock)
        except BaseException:
            if made:
                discard_folder(path)
            os.close(lock)
            raise
        try:
            manifest = _write_dataset(path / DATASET, dataset, manifest)
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

    def _create_remote(
        self, path: Path, manifest: dict[str, Any], dataset: list[dict[str, Any]] | Path | None
    ) -> RunWriter:
        """:meth:`create_run` on object storage: its lock object taken first (a conditional
        create), then the same checks; a failure removes what this wrote."""
        with objects.failures(path):
            if (path / MANIFEST).exists():
                raise self._taken(path)
            lock = take_lock(path / LOCK)
            try:
                if (path / MANIFEST).exists():  # made by another writer since the look above
                    raise RunExistsError(
                        f"run {path.name!r} was made by another process at the same moment",
                        hint="choose another --run-id",
                    )
                _refuse_leftovers(path)
                writer = RunWriter(path, lock)
            except BaseException:
                release_lock(lock)
                raise
        try:
            manifest = _write_dataset(path / DATASET, dataset, manifest)
            writer.write_manifest(
                {**manifest, "schema_version": SCHEMA_VERSION, "status": "recording"}
            )
        except BaseException:
            writer.discard()
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
        """Remove a run directory (refused while another process writes or reads it), a
        folder of that name that holds no manifest, or a symbolic link of that name.

        The folder is renamed in one step to a hidden name that no view reads, then removed:
        a deletion cut short (kill -9) leaves only that folder, which the next creation or
        deletion of a run removes, and nothing of the run is ever read again.
        """
        path = self.run_dir(run_id)
        if is_remote(path):
            self._delete_remote(path, run_id)
            return
        if not path.is_dir():
            self.open_run(run_id)  # not found: the error names the runs there are
        if path.is_symlink():  # no run (Run.check): the link goes, not what it points to
            with writing(path, hint=WRITABLE_HINT):
                path.unlink()
            return
        self.sweep()
        lock = take_lock(path / LOCK)  # refused while another process writes it
        try:
            refuse_shards(path)
            with dir_lock(path, fcntl.LOCK_EX | fcntl.LOCK_NB) as held:
                if not held:
                    raise RunLockedError(
                        f"run {run_id!r} is being read (scored, reported, audited, diffed, "
                        "exported or served) by another process",
                        hint="wait for it to finish",
                    )
                discard_folder(path)
        finally:
            release_lock(lock)

    def _delete_remote(self, path: Path, run_id: str) -> None:
        """:meth:`delete_run` on object storage: refused while another process writes the run
        (not while one reads it: readers take no lock there); its manifest is removed first."""
        with objects.failures(path):
            if not objects.list_names(path):
                self.open_run(run_id)  # not found: the error names the runs there are
            lock: Lock = take_lock(path / LOCK)
        try:
            discard_folder(path)
        finally:
            release_lock(lock)

    def sweep(self) -> None:
        """Remove what deletions cut short left behind (their hidden folders)."""
        if is_remote(self.root):
            return  # (deletions there rename nothing)
        try:
            names = [p for p in self.root.iterdir() if p.name.startswith(DELETED_PREFIX)]
        except OSError:
            return
        for path in names:
            shutil.rmtree(path, ignore_errors=True)

    def resume_run(
        self, run_id: str, shard: tuple[int, int] | None = None, claim: Claim | None = None
    ) -> RunWriter:
        """Lock an existing run for more writing (resume or retry); ``shard`` (I, N): only
        shard I of N of it, beside the others (see :class:`ShardWriter`); ``claim``: checks
        the manifest under the run's lock and says what to write into it (see
        :data:`~tcbreplay._store.writer.Claim`)."""
        run = self.open_run(run_id, writing=True)
        if shard is None:
            return RunWriter(run.dir, claim=claim, existing=True)
        return ShardWriter(run.dir, shard, claim)

    def check_output(self, path: Path, option: str = "-o") -> None:
        """Refuse an output path inside the store, where a file written could replace one of a
        run's (``catalog -o RUN/manifest.json``) or be taken for one."""
        if is_remote(self.root) or is_remote(path):
            return  # (outputs are local files; the store is not)
        root = Path(os.path.realpath(self.root))
        target = Path(os.path.realpath(path))
        if target == root or root in target.parents:
            raise InputError(
                f"{option} {path}: inside the store {self.root}, which holds runs only",
                hint=f"give {option} a path outside {self.root}",
            )


def _write_dataset(
    path: Path, dataset: list[dict[str, Any]] | Path | None, manifest: dict[str, Any]
) -> dict[str, Any]:
    """A new run's ``dataset.jsonl``: its entries written, or another run's file copied; the
    manifest with the file's sha256 in its dataset block (``export`` and ``audit verify``
    hold the file to it)."""
    if isinstance(dataset, list):
        write_jsonl_atomic(path, dataset)
    elif dataset is not None:
        copy_atomic(dataset, path)
    block = manifest.get("dataset")
    if dataset is None or not isinstance(block, dict):
        return manifest
    return {**manifest, "dataset": {**block, DATASET_SHA256: file_record(path)["sha256"]}}


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
    if is_remote(path):  # (a journal's batches are never empty; a lock may leave a probe)
        found = [
            name for name in objects.list_names(path)
            if name not in _FIRST_FILES and not is_clock_probe(name)
        ]  # fmt: skip
    else:
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
