"""A replay its live model stopped before answering: which a rerun of other inputs replaces.

``replay --then`` stops as ``record`` does when its live model cannot be used: a first wave
of samples failed with no answer of it, or it refused a call (a key, a model name, a
permission). The user's fix is most often in the command itself (``--then``, a
``--model-option`` such as ``base_url``), which makes the rerun a replay of other inputs,
refused on a run that exists. A run stopped so that holds no sample the live model answered
holds nothing a replay cannot make again from the recording at no cost but time (samples in
error, and samples the recording answered alone): the rerun replaces it, and says so in one
line (:func:`replaced_stop`). A run holding any live answer is refused as before. The run
is looked at before the replay starts, and again, as it is deleted, under the lock its
writers take (:func:`still_replaced`): a rerun of its own command that came and went in
between (its live model answering now) is kept, and the replay refused.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

from tcbreplay._record.failures import PROCESS_DIED
from tcbreplay._store.parquet import read_table
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._words import count
from tcbreplay.errors import TcbReplayWarning

SOURCE = "replay"  # (as tcbreplay._replay.run names a replay's manifest source)


def replaced_stop(store: Store, run_id: str, parent_run_id: str, fingerprint: str) -> str | None:
    """What says that replay ``run_id`` (of ``parent_run_id``) is replaced by a replay whose
    fingerprint is ``fingerprint``: one line, when the run exists with other inputs, its
    live model stopped it (the manifest's ``stopped``, not a process that died) and none of
    its samples was answered by the live model; None otherwise (the run is resumed, or
    refused as before)."""
    if not store.exists(run_id):
        return None
    return _replaced(store.open_run(run_id, writing=True), parent_run_id, fingerprint)


def still_replaced(parent_run_id: str, fingerprint: str) -> Callable[[Run], bool]:
    """What :meth:`~tcbreplay._store.runs.Store.delete_run` asks of the run under its lock
    before deleting it: whether it is still the run :func:`replaced_stop` said the replay
    replaces (a warning says so then)."""

    def check(run: Run) -> bool:
        run.check(writing=True)
        said = _replaced(run, parent_run_id, fingerprint)
        if said is not None:
            warnings.warn(said, TcbReplayWarning, stacklevel=2)
        return said is not None

    return check


def _replaced(run: Run, parent_run_id: str, fingerprint: str) -> str | None:
    """:func:`replaced_stop` of the run as it is now."""
    run_id = run.run_id
    manifest = run.manifest
    stopped = manifest.get("stopped")
    if (
        manifest.get("source") != SOURCE
        or (manifest.get(SOURCE) or {}).get("parent_run_id") != parent_run_id
        or manifest.get("fingerprint") == fingerprint
        or manifest.get("status") != "failed"
        or not isinstance(stopped, str)
        or stopped.startswith(PROCESS_DIED)
        or run.unfolded_records()  # (a stop folds its journal: this run is another's)
    ):
        return None
    statuses: list[str] = []
    if run.samples_path.exists():
        rows = read_table(run.samples_path, columns=["status", "metadata"]).to_pylist()
        if any(_answered_live(row) for row in rows):
            return None
        statuses = [row["status"] for row in rows]
    ok = statuses.count("ok")
    said = "all in error" if not ok else f"{ok} ok without it"
    held = f"its {count(len(statuses), 'sample')} ({said})" if statuses else "it holds no sample"
    return (
        f"run {run_id!r} exists with other inputs, but its live model stopped it "
        f"({stopped.split(':', 1)[0]}) before answering any call: {held}, replaced by this "
        "replay"
    )


def _answered_live(row: dict[str, Any]) -> bool:
    """Whether a sample's row holds an answer of the live model. A row written before rows
    said it (``live_answered``) is taken to, if it called the live model at all."""
    metadata = row.get("metadata") or {}
    replay = (json.loads(metadata) if isinstance(metadata, str) else metadata).get(SOURCE) or {}
    answered = replay.get("live_answered", replay.get("live_calls"))
    return bool(answered)
