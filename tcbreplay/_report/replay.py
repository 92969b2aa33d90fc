"""A replay run in the report: the ``replay`` block on its card, and for each sample that
diverged, its parent's transcript beside its own from the first divergence.

A divergence's path names the message where the two first differ (``messages[k]``: the
k-th message after the system prompt); the two transcripts are shown from there, that
message marked on both sides with the values that differ. A divergence in the system
prompt, the tools or the settings is before any message: both are shown from the start.
The parent is read from the same store; a replay whose parent is gone shows its
divergences without the parent's side.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from tcbreplay._report.data import RunData, keyed, read_columns, row_key
from tcbreplay._report.transcripts import transcripts_of
from tcbreplay._store.run_dir import Run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SAMPLES_SCHEMA
from tcbreplay.errors import TcbReplayError

# the replay block's figures a card shows, with their labels
_FIGURES = (
    ("turns_served", "turns served"),
    ("live_calls", "live calls"),
    ("diverged_samples", "samples diverged"),
    ("tool_outputs_compared", "tool outputs compared"),
    ("tool_outputs_drifted", "drifted"),
)


def is_replay(run: RunData) -> bool:
    return run.run.manifest.get("source") == "replay"


def replay_card(run: RunData) -> str:
    """The card's lines of a replay's block: its parent, fork rule and figures."""
    if not is_replay(run):
        return ""
    block = run.run.manifest.get("replay") or {}
    how = "served by tcbreplay serve" if block.get("served_by") else "replay"
    fork = block.get("fork") or {}
    if fork:
        rule = f"fork at turn {fork.get('turn')}" if fork.get("rule") == "fork-at" else "then"
        how += f" · {rule}: {fork.get('model')}"
    figures = "".join(
        f"<span><b>{int(block.get(key) or 0):,}</b> {label}</span>" for key, label in _FIGURES
    )
    return (
        f'<div class="replay-block"><div>{html.escape(how)} of '
        f"<code>{html.escape(str(block.get('parent_run_id') or '?'))}</code></div>"
        f'<div class="figures">{figures}</div></div>'
    )


def divergence_views(run: RunData, message: Any) -> dict[str, dict[str, Any]]:
    """Per diverged sample (by its row name): where it diverged and the parent's transcript
    from there (``message`` turns a transcript message into the page's row)."""
    if not is_replay(run) or not run.run.divergences_path.exists():
        return {}
    import pyarrow.parquet as pq

    rows = pq.read_table(run.run.divergences_path).to_pylist()
    if not rows:
        return {}
    if run.shown_indices is not None:  # the page shows some samples: theirs
        shown = set(run.agent)  # the rows whose calls the report kept
        rows = [r for r in rows if row_key(r["sample_id"], r["trial"]) in shown]
    parent_id = str((run.run.manifest.get("replay") or {}).get("parent_run_id") or "")
    metadata = {
        r[0]: json.loads(r[1]) if r[1] else {}
        for r in run.shown().select("sample_id", "metadata").iter_rows()
    }
    parent = None
    try:
        parent = Store(run.run.dir.parent).open_run(parent_id)
        theirs = transcripts_of(parent, _parent_indices(parent, rows, metadata, run))
    except TcbReplayError:
        theirs = {}
    mine = transcripts_of(run.run, run.shown_indices)
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = row_key(row["sample_id"], row["trial"])
        their_key = _their_key(row, metadata)
        own, other = mine.get(key, []), theirs.get(their_key, [])
        k = _message_index(row["path"]) if row["component"] in ("messages", "tool_output") else None
        at = 0 if k is None else k + _leading_system(own)
        their_at = 0 if k is None else k + _leading_system(other)
        view: dict[str, Any] = {
            "parent": parent_id,
            "found": parent is not None,
            **{f: row[f] for f in ("turn", "component", "path", "recorded", "replayed")},
            "at": at,
            "marked": k is not None,
            "pt": [message(m) for m in other[their_at:]],
        }
        out[key] = view
    return out


def _their_key(row: dict[str, Any], metadata: dict[str, Any]) -> str:
    """The parent's row a diverged row replayed (its sample, the trial it served)."""
    served = (metadata.get(row_key(row["sample_id"], row["trial"])) or {}).get("replay") or {}
    return row_key(row["sample_id"], int(served.get("parent_trial", row["trial"])))


def _parent_indices(
    parent: Run, rows: list[dict[str, Any]], metadata: dict[str, Any], run: RunData
) -> list[int] | None:
    """The parent's sample_index of each diverged row shown (None: every row is shown)."""
    if run.shown_indices is None:
        return None
    wanted = {_their_key(row, metadata) for row in rows}
    columns = ["sample_id", "trial", "sample_index"]
    frame = keyed(read_columns(parent.samples_path, SAMPLES_SCHEMA, columns))
    return [i for sid, i in frame.select("sample_id", "sample_index").iter_rows() if sid in wanted]


def _message_index(path: str) -> int | None:
    """The message a divergence's ``messages[k]...`` path is in (the store's form of a path,
    see docs/commands/replay.md)."""
    found = re.match(r"messages\[(\d+)\]", path)
    return int(found.group(1)) if found else None


def _leading_system(messages: list[dict[str, Any]]) -> int:
    """How many system messages a stored transcript starts with (imports keep them)."""
    n = 0
    while n < len(messages) and messages[n]["type"] == "system":
        n += 1
    return n
