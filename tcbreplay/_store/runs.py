"""The trace store: a folder of run directories, each opened, created, resumed or deleted here.

A run is deleted by renaming its folder to ``.deleted-<run_id>-<random>`` in the store, then
removing that: no view reads such a folder, and the next creation or deletion of a run removes
one that a killed deletion left. The layout of a run's folder is in :mod:`tcbreplay._store.schema`;
a run opened is read through :class:`tcbreplay._store.run_dir.Run`.
A store may be a URL of object storage (``s3://bucket/prefix``): :mod:`tcbreplay._store.objects`
says what differs there.
"""

from __future__ import annotations

import difflib
import fcntl
import os
import shutil
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from tcbreplay._secrets import redact
from tcbreplay._store import objects
from tcbreplay._store.files import (
    DATASET_SHA256,
    copy_atomic,
    file_record,
    make_dir,
    write_jsonl_atomic,
    writing,
)
from tcbreplay._store.lock_clock import is_clock_probe
from tcbreplay._store.locks import (
    WAIT_HINT,
    WRITABLE_HINT,
    Lock,
    acquire_lock,
    dir_lock,
    lock_holder,
    release_lock,
    sign_lock,
    take_lock,
)
from tcbreplay._store.objects import is_remote
from tcbreplay._store.run_dir import Run, validate_run_id
from tcbreplay._store.schema import (
    DATASET,
    JOURNAL,
    LOCK,
    MANIFEST,
    SCHEMA_VERSION,
)
from tcbreplay._store.store_urls import DEFAULT_STORE, store_root
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
)


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
            made = make_dir(path)
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

    def delete_run(self, run_id: str, only_if: Callable[[Run], bool] | None = None) -> bool:
        """Remove a run directory (refused while another process writes or reads it), a
        folder of that name that holds no manifest, or a symbolic link of that name; whether
        it was removed.

        ``only_if``: asked of the run under the lock writers take, which this holds until the
        run is gone, so that what it answers holds still when the run is removed (a check
        made before taking the lock may be out of date: a writer may have come and gone);
        False leaves the run as it is.

        The folder is renamed in one step to a hidden name that no view reads, then removed:
        a deletion cut short (kill -9) leaves only that folder, which the next creation or
        deletion of a run removes, and nothing of the run is ever read again.
        """
        path = self.run_dir(run_id)
        if is_remote(path):
            return self._delete_remote(path, run_id, only_if)
        if not path.is_dir():
            self.open_run(run_id)  # not found: the error names the runs there are
        if path.is_symlink():  # no run (Run.check): the link goes, not what it points to
            with writing(path, hint=WRITABLE_HINT):
                path.unlink()
            return True
        self.sweep()
        lock = take_lock(path / LOCK)  # refused while another process writes it
        try:
            if only_if is not None and not only_if(Run(path)):
                return False
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
        return True

    def _delete_remote(
        self, path: Path, run_id: str, only_if: Callable[[Run], bool] | None
    ) -> bool:
        """:meth:`delete_run` on object storage: refused while another process writes the run
        (not while one reads it: readers take no lock there); its manifest is removed first."""
        with objects.failures(path):
            if not objects.list_names(path):
                self.open_run(run_id)  # not found: the error names the runs there are
            lock: Lock = take_lock(path / LOCK)
        try:
            if only_if is not None and not only_if(Run(path)):
                return False
            discard_folder(path)
        finally:
            release_lock(lock)
        return True

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
