"""`tcbreplay audit verify`: stored scores follow from the raw traces, and tampering is caught."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, as_the_run_wrote, cli, snapshot, unscored_copy

from tcbreplay._compare.audit import verify_run
from tcbreplay._compare.audit_scores import label
from tcbreplay._score import audit_record
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.result_hashes import seal
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCORES_SCHEMA, WRITTEN_MESSAGES_SCHEMA
from tcbreplay._version import __version__
from tcbreplay.errors import InputError, RunNotFoundError, StoreError

REL_FOLDER = "spec_rel-0.001_abs-0"
SCORES_CHANGED = "changed since scoring: scores/spec/scores.parquet"


def verify(root: Path, run_id: str, *extra: str):
    return cli("audit", "verify", run_id, "--store", root, *extra)


def score(root: Path, run_id: str, *extra: str) -> dict:
    result = cli("score", run_id, "--store", root, "--format", "json", *extra)
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def scored_template(sim_run, tmp_path_factory) -> tuple[Path, str]:
    """The sim run scored once with the defaults, through the CLI; copied by ``scored``."""
    root, run_id = unscored_copy(*sim_run, tmp_path_factory.mktemp("audit") / "traces")
    score(root, run_id)
    return root, run_id


@pytest.fixture
def scored(scored_template, tmp_path) -> tuple[Path, str]:
    """A private copy of the scored run, to tamper with."""
    template, run_id = scored_template
    root = tmp_path / "traces"
    shutil.copytree(template / run_id, root / run_id)
    return root, run_id


def rewrite_scores(path: Path, sample_id: str, **changes) -> None:
    frame = pl.read_parquet(path)
    frame = frame.with_columns(
        pl.when(pl.col("sample_id") == sample_id)
        .then(pl.lit(value, dtype=frame.schema[column]))
        .otherwise(pl.col(column))
        .alias(column)
        for column, value in changes.items()
    )
    pq.write_table(frame.to_arrow().cast(SCORES_SCHEMA), path)


def without_file_hashes(path: Path) -> None:
    """Make a stored summary one written before scorings recorded the sha256 of their own
    files."""
    summary = json.loads(path.read_text())
    del summary["summary_sha256"], summary["audit"]["results_sha256"]
    path.write_text(json.dumps(summary))


def resealed(path: Path, summary: dict) -> str:
    """The text of ``summary`` (stored at ``path``) as a scoring that wrote it and the
    Parquet files now beside it would have recorded their sha256: a record made so (by an
    earlier version's SQL, say), not one edited since."""
    summary = json.loads(json.dumps(summary))
    hashes = summary["audit"]["results_sha256"]
    seal(summary, {name: sha256(path.parent / name) for name in hashes})
    return json.dumps(summary)


# ---------------------------------------------------------------- the audit record


def test_a_scoring_never_made_says_how_to_make_it(scored):
    """Reported: `audit verify --scoring abet` of a run never scored with abet said only
    'score it: tcbreplay score RUN', which makes the spec scoring."""
    root, run_id = scored
    cases = {
        "abet": f"score it so first: tcbreplay score {run_id} --scorer abet",
        "spec_rel-0.001_abs-1e-09": f"score it so first: tcbreplay score {run_id} "
        "--rel-tol 0.001 --abs-tol 1e-09",
        "abte": "did you mean 'abet'?",
        "xyz": "a scoring is named spec, abet, bfcl or spec followed by the options that "
        "differ, as spec_rel-<rel-tol>_abs-<abs-tol>_strings-bfcl_types-strict",
    }
    for scoring, first in cases.items():
        with pytest.raises(InputError) as info:
            verify_run(Store(root), run_id, scoring)
        assert info.value.hint == f"{first} (scorings of {run_id}: spec)", scoring


def test_scored_run_verifies(scored):
    root, run_id = scored
    result = verify(root, run_id)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.strip() == (
        f"verified: spec of {run_id}: 94 samples identical to a re-score from raw traces"
    )
    report = verify_run(Store(root), run_id)
    assert report.ok and report.scorings == ["spec"] and report.samples_checked == 94


def test_a_renamed_run_still_verifies(scored):
    """A run directory copied under another name (which the views show under its new name)
    verifies: its stored scores still say the old name, which is no difference in a number."""
    root, run_id = scored
    (root / run_id).rename(root / "renamed")
    report = verify_run(Store(root), "renamed")
    assert report.ok, report.differences[:3]
    assert report.samples_checked == 94


def test_summary_holds_an_audit_record(scored):
    root, run_id = scored
    run_dir = root / run_id
    summary = json.loads((run_dir / "scores" / "spec" / "summary.json").read_text())
    record = summary["audit"]
    assert record["inputs_sha256"] == {
        name: sha256(run_dir / name)
        for name in ("manifest.json", "samples.parquet", "messages.parquet")
    }
    assert re.fullmatch(r"[0-9a-f]{64}", record["sql_sha256"])
    assert record["sql_sha256"] == audit_record.sql_sha256()
    assert record["options"] == {
        "scorer": "spec",
        "rel_tol": 1e-9,
        "abs_tol": 0.0,
        "strings": "exact",
        "types": "lenient",
    }
    assert record["options"] == summary["options"]
    assert re.fullmatch(r"[0-9a-f]{64}", record["options_sha256"])
    assert record["toolkit_version"] == __version__


def test_audit_record_is_the_same_when_scoring_again(scored):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    first = json.loads(path.read_text())["audit"]
    score(root, run_id)
    assert json.loads(path.read_text())["audit"] == first


def hashed_files(monkeypatch) -> list[str]:
    """The names of the files the scorings that follow read whole to hash, in order."""
    names: list[str] = []
    real = audit_record.sha256_file

    def counted(path):
        names.append(path.name)
        return real(path)

    monkeypatch.setattr(audit_record, "sha256_file", counted)
    return names


def test_a_copied_run_is_hashed_by_its_first_scoring_only(scored, monkeypatch):
    """Files newer than the manifest says (a copy that kept no times, an upload) are hashed
    once: the next scoring takes the sha256 the one before recorded for that version."""
    root, run_id = scored
    run_dir = root / run_id
    hashed = hashed_files(monkeypatch)
    for name in ("samples.parquet", "messages.parquet"):
        stat = (run_dir / name).stat()
        os.utime(run_dir / name, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    first = score(root, run_id)["audit"]
    assert hashed == ["samples.parquet", "messages.parquet"]  # the manifest: as it was
    assert first["inputs_sha256"] == {
        name: sha256(run_dir / name)
        for name in ("manifest.json", "samples.parquet", "messages.parquet")
    }
    stat = (run_dir / "messages.parquet").stat()
    assert first["inputs_seen"]["messages.parquet"] == {
        "size": stat.st_size, "mtime_ns": stat.st_mtime_ns
    }  # fmt: skip
    hashed.clear()
    assert score(root, run_id)["audit"] == first
    assert hashed == []
    assert verify(root, run_id).exit_code == 0
    # another version of a file (here its time only) is hashed again, and only it
    os.utime(run_dir / "messages.parquet", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = score(root, run_id)["audit"]
    assert hashed == ["messages.parquet"]
    assert again["inputs_sha256"] == first["inputs_sha256"]
    # an earlier record that is not one to take hashes from is no reason to fail: hashed
    path = run_dir / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    summary["audit"]["inputs_seen"] = ["messages.parquet"]
    path.write_text(json.dumps(summary))
    hashed.clear()
    assert score(root, run_id)["audit"]["inputs_sha256"] == first["inputs_sha256"]
    assert hashed == ["manifest.json", "samples.parquet", "messages.parquet"]


def test_other_tolerances_get_their_own_folder_and_both_verify(scored):
    root, run_id = scored
    spec_summary = json.loads((root / run_id / "scores" / "spec" / "summary.json").read_text())
    got = score(root, run_id, "--rel-tol", "1e-3")
    assert got["scoring"] == REL_FOLDER
    folders = sorted(p.name for p in (root / run_id / "scores").iterdir())
    assert folders == ["spec", REL_FOLDER]
    rel = json.loads((root / run_id / "scores" / REL_FOLDER / "summary.json").read_text())
    assert rel["audit"]["options"] == {
        "scorer": "spec",
        "rel_tol": 1e-3,
        "abs_tol": 0.0,
        "strings": "exact",
        "types": "lenient",
    }
    assert rel["audit"]["options_sha256"] != spec_summary["audit"]["options_sha256"]
    assert rel["audit"]["inputs_sha256"] == spec_summary["audit"]["inputs_sha256"]
    assert rel["audit"]["sql_sha256"] == spec_summary["audit"]["sql_sha256"]

    result = verify(root, run_id)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"verified: spec, {REL_FOLDER} of {run_id}: 94 samples")
    only = verify(root, run_id, "--scoring", REL_FOLDER)
    assert only.exit_code == 0
    assert only.stdout.startswith(f"verified: {REL_FOLDER} of {run_id}")


def test_abet_scoring_verifies_too(scored):
    root, run_id = scored
    score(root, run_id, "--scorer", "abet")
    result = verify(root, run_id, "--format", "json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["scorings"] == ["abet", "spec"]
    # the dashboard file it wrote (a scorer of the whole run writes it in one go) is recorded
    summary = json.loads((root / run_id / "scores" / "abet" / "summary.json").read_text())
    (board,) = (root / run_id / "evaluations").glob("*.json")
    assert summary["audit"]["dashboard"]["sha256"] == sha256(board)


# ---------------------------------------------------------------- tampering


def test_edited_per_sample_score_is_caught(scored):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    frame = pl.read_parquet(path)
    victim = frame.filter(pl.col("tp") < 1).sort("sample_index").row(0, named=True)
    rewrite_scores(path, victim["sample_id"], tp=1.0)

    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        f"{SCORES_CHANGED} (sha256 differs from the audit record)",
        f"spec: sample {victim['sample_id']}: tp: stored 1.0, recomputed {victim['tp']!r}",
    ]
    assert "verified" not in result.stdout

    report = verify_run(Store(root), run_id)
    assert not report.ok and report.changed_files == ["scores/spec/scores.parquet"]
    assert [(d.sample_id, d.field, d.stored, d.recomputed) for d in report.differences] == [
        (victim["sample_id"], "tp", 1.0, victim["tp"])
    ]


def test_one_changed_file_and_one_difference_are_said_in_the_singular(scored):
    """The markdown table's caption said "1 files changed, 1 differences", and the lines
    past the limit "... and 1 more differences"."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    frame = pl.read_parquet(path)
    victim = frame.filter(pl.col("tp") < 1).sort("sample_index")["sample_id"][0]
    rewrite_scores(path, victim, tp=1.0)
    result = verify(root, run_id, "--format", "markdown")
    assert result.exit_code == 1, (result.output, result.exception)
    assert "1 file changed, 1 difference" in result.stdout, result.stdout
    # 201 numbers edited: the lines show 200 of them
    edited = pl.read_parquet(path).with_columns(
        tp=pl.lit(-1.0),
        tsa=pl.lit(-1.0),
        ahr=pl.when(pl.col("sample_index") < 13).then(-1.0).otherwise(pl.col("ahr")),
    )
    pq.write_table(edited.to_arrow().cast(SCORES_SCHEMA), path)
    lines = verify(root, run_id).stdout.splitlines()
    assert len(verify_run(Store(root), run_id).differences) == 201
    assert lines[-1] == "... and 1 more difference", lines[-3:]


def test_a_run_of_many_parts_is_verified_a_part_at_a_time(scored, monkeypatch):
    """The re-score's parts are compared as they come with the stored rows of their samples,
    read alongside (never the whole file at once): an edit in a late part is reported as
    when the run is one part (tests/compare/test_audit_scores.py cuts the comparison finer)."""
    from tcbreplay._compare import audit
    from tcbreplay._compare.audit_scores import ScoresCheck
    from tcbreplay._score import read_results
    from tcbreplay._score import run as scoring

    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    frame = pl.read_parquet(path)
    victim = frame.filter(pl.col("tp") < 1).sort("sample_index").row(-1, named=True)
    assert victim["sample_index"] >= 50
    rewrite_scores(path, victim["sample_id"], tp=1.0)
    monkeypatch.setattr(scoring, "SPLIT_MIN_SAMPLES", 1)
    monkeypatch.setattr(scoring, "PART_SAMPLES", 24)  # 4 parts
    monkeypatch.setattr(scoring, "usable_cores", lambda: 1)
    monkeypatch.setattr(read_results, "BATCH_ROWS", 8)
    read = [0]  # the stored rows read so far
    seen = []  # per part: its rows, the fresh rows so far, the stored rows read by then
    real_batches, real_add = audit.scoring_file_batches, ScoresCheck.add

    def counted(*args):
        empty, batches = real_batches(*args)
        if args[1].name != "scores.parquet":  # (the pairs file is read alongside too)
            return empty, batches

        def each():
            for batch in batches:
                read[0] += batch.height
                yield batch

        return empty, each()

    def add(self, fresh):
        real_add(self, fresh)
        seen.append((fresh.height, self.rows, read[0]))

    monkeypatch.setattr(audit, "scoring_file_batches", counted)
    monkeypatch.setattr(ScoresCheck, "add", add)
    parted = verify(root, run_id)
    assert parted.exit_code == 1, (parted.output, parted.exception)
    assert parted.stdout.splitlines() == [  # as one part says it (the test before)
        f"{SCORES_CHANGED} (sha256 differs from the audit record)",
        f"spec: sample {victim['sample_id']}: tp: stored 1.0, recomputed {victim['tp']!r}",
    ]
    assert len(seen) == 4 and max(rows for rows, _, _ in seen) <= 24
    for _, fresh_rows, stored_rows in seen:  # as far as the part's samples, a batch past
        assert stored_rows <= fresh_rows + 8
    assert read[0] == 94


def test_an_edited_or_removed_pairs_file_is_caught(scored):
    """diff reads a scoring's pairs (each call's counts, per tool): verify passed a pairs file
    edited, emptied or removed."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "pairs.parquet"
    pairs = pl.read_parquet(path)
    row = pairs.row(4, named=True)
    edited = pairs.with_columns(
        pl.when(pl.int_range(pl.len()) == 4).then(pl.col("args_invalid") + 5)
        .otherwise(pl.col("args_invalid")).alias("args_invalid")
    )  # fmt: skip
    pq.write_table(edited.to_arrow(), path)
    report = verify_run(Store(root), run_id)
    assert [(d.sample_id, d.field, d.stored, d.recomputed) for d in report.differences] == [
        (
            row["sample_id"],
            "pairs row 4: args_invalid",
            row["args_invalid"] + 5,
            row["args_invalid"],
        )
    ]
    pq.write_table(pairs.clear().to_arrow(), path)
    found = [(d.field, d.stored, d.recomputed) for d in verify_run(Store(root), run_id).differences]
    assert found == [("pairs rows", 0, pairs.height)]
    path.unlink()
    result = verify(root, run_id)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "changed since scoring: scores/spec/pairs.parquet (sha256 differs from the audit record)",
        "spec: run: pairs.parquet: stored None, recomputed 'present'",
    ]


def test_a_pairs_file_its_audit_record_holds_no_sha256_of_is_caught(scored):
    """Every pairs file a scoring writes is hashed as it is written: verify passed one that
    the record holds no sha256 of (the record sealed without it, or edited to remove it)."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    del summary["audit"]["results_sha256"]["pairs.parquet"]
    unchecked = "changed since scoring: scores/spec/{} (sha256 differs from the audit record)"
    path.write_text(resealed(path, summary))
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [unchecked.format("pairs.parquet")]
    path.write_text(json.dumps(summary))  # (not sealed again: its summary_sha256 differs)
    report = verify_run(Store(root), run_id)
    assert report.changed_files == ["scores/spec/summary.json", "scores/spec/pairs.parquet"]
    assert report.differences == []


def test_an_edited_model_in_the_summary_is_caught(scored):
    """The summary names the model the report and runs show: taken from the manifest, which
    the audit record vouches for."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "model": "gpt-4o", "simulated": False}))
    report = verify_run(Store(root), run_id)
    assert [(d.field, d.stored, d.recomputed) for d in report.differences] == [
        ("model", "gpt-4o", summary["model"]),
        ("simulated", False, True),
    ]


def test_scores_without_their_summary_are_not_taken_for_a_scoring(scored):
    """A scoring writes its summary last: a folder with scores and no summary (forged, or
    its summary removed) was read by diff as stored (tp 1.0 everywhere) while verify passed
    over it."""
    from tcbreplay._compare.diff import diff_runs

    root, run_id = scored
    folder = root / run_id / "scores" / "spec"
    true_tp = json.loads((folder / "summary.json").read_text())["tp"]
    (folder / "summary.json").unlink()
    frame = pl.read_parquet(folder / "scores.parquet").with_columns(tp=pl.lit(1.0))
    pq.write_table(frame.to_arrow().cast(SCORES_SCHEMA), folder / "scores.parquet")
    assert diff_runs(Store(root), run_id, run_id).runs["tp"]["a"] == pytest.approx(true_tp)
    assert cli("score", run_id, "--store", root, "--strings", "bfcl").exit_code == 0
    report = verify_run(Store(root), run_id)
    assert [(d.scoring, d.field, d.recomputed) for d in report.differences] == [
        ("spec", "summary.json", "scores without a summary")
    ]


def test_a_scoring_by_other_sql_is_said_and_edited_options_are_caught(scored):
    """A record whose SQL hash is not today's SQL (an earlier version's) verifies on its
    numbers and says so; one whose options' hash is not its options' fails. diff took such a
    scoring's numbers as stored (report scored it again)."""
    from tcbreplay._compare.diff import diff_runs

    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    audit = summary["audit"]
    forged = {**summary, "tp": 0.5, "audit": {**audit, "sql_sha256": "0" * 64}}
    path.write_text(json.dumps(forged))
    scores = root / run_id / "scores" / "spec" / "scores.parquet"
    frame = pl.read_parquet(scores)
    pq.write_table(frame.with_columns(tp=pl.lit(0.5)).to_arrow().cast(SCORES_SCHEMA), scores)
    assert diff_runs(Store(root), run_id, run_id).runs["tp"]["a"] == pytest.approx(summary["tp"])
    report = verify_run(Store(root), run_id)
    assert report.other_sql == ["spec"] and not report.ok  # (its numbers were forged too)
    pq.write_table(frame.to_arrow().cast(SCORES_SCHEMA), scores)
    path.write_text(resealed(path, {**summary, "audit": {**audit, "sql_sha256": "0" * 64}}))
    result = verify(root, run_id)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "note: spec was scored by other SQL than this version's (an earlier version's): its "
        "numbers are compared with a re-score by this version's",
        f"verified: spec of {run_id}: 94 samples identical to a re-score from raw traces",
    ]
    path.write_text(json.dumps({**summary, "audit": {**audit, "options_sha256": "1" * 64}}))
    report = verify_run(Store(root), run_id)
    assert [(d.field, d.stored) for d in report.differences] == [("options_sha256", "1" * 64)]


def test_edited_run_level_number_is_caught(scored):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    true_tsa = summary["tsa"]
    path.write_text(json.dumps({**summary, "tsa": 0.99}))
    result = verify(root, run_id)
    assert result.exit_code == 1
    assert f"spec: run: tsa: stored 0.99, recomputed {true_tsa!r}" in result.stdout.splitlines()


def test_removed_sample_row_is_caught(scored):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    frame = pl.read_parquet(path)
    gone = frame["sample_id"][5]
    pq.write_table(frame.filter(pl.col("sample_id") != gone).to_arrow().cast(SCORES_SCHEMA), path)
    report = verify_run(Store(root), run_id)
    assert [(d.sample_id, d.field, d.stored, d.recomputed) for d in report.differences] == [
        (gone, "sample", None, "present")
    ]


def test_a_row_given_twice_is_caught(scored):
    """A duplicated row paired with its sample twice and verified; validity, diff (an
    IndexError), report and sql then counted that sample three times."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    frame = pl.read_parquet(path)
    twice = pl.concat([frame, frame[1:2], frame[1:2]])
    pq.write_table(twice.to_arrow().cast(SCORES_SCHEMA), path)
    report = verify_run(Store(root), run_id)
    assert [(d.field, d.stored, d.recomputed) for d in report.differences] == [
        ("rows", frame.height + 2, frame.height)
    ]


def test_a_row_filed_under_another_scoring_is_caught(scored):
    """The views file a row by its scoring column: one set to abet in spec's file left spec's
    queries (and verify passed)."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    frame = pl.read_parquet(path)
    moved = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(pl.lit("abet")).otherwise(pl.col("scoring"))
        .alias("scoring")
    )  # fmt: skip
    pq.write_table(moved.to_arrow().cast(SCORES_SCHEMA), path)
    report = verify_run(Store(root), run_id)
    assert [(d.sample_id, d.field, d.stored, d.recomputed) for d in report.differences] == [
        (label(frame["sample_id"][3], frame["trial"][3]), "scoring", "abet", "spec")
    ]


@pytest.mark.parametrize("name", ["scores.parquet", "pairs.parquet", "summary.json"])
def test_a_scoring_file_not_as_its_scoring_wrote_it_is_caught(scored, name):
    """A stored scoring file written again with what it held (of the summary: a field the
    re-score does not give) verified, though its sha256 is not the one its scoring recorded:
    it is a changed file now, named, exit 1."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / name
    before = sha256(path)
    if name == "summary.json":
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({**summary, "run_id": "another"}))
    else:
        pq.write_table(pq.read_table(path), path)  # (the same rows, in other bytes)
    assert sha256(path) != before
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        f"changed since scoring: scores/spec/{name} (sha256 differs from the audit record)"
    ]
    report = verify_run(Store(root), run_id)
    assert report.changed_files == [f"scores/spec/{name}"] and report.differences == []


def test_an_edited_scored_at_alone_is_caught(scored):
    """Reported: an edit of the summary's ``scored_at`` alone verified, its summary_sha256
    being of the rest only; the time of the scoring is the scoring's too."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(path.read_text().replace(summary["scored_at"], "2020-01-01T00:00:00+00:00"))
    assert json.loads(path.read_text()) == {**summary, "scored_at": "2020-01-01T00:00:00+00:00"}
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        "changed since scoring: scores/spec/summary.json (sha256 differs from the audit record)"
    ]


def test_a_scoring_that_recorded_no_sha256_of_its_files_is_said_once(scored):
    """Scorings stored before the sha256 of their own files was recorded are verified on
    their contents, and one note says their files' sha256 are not checked."""
    root, run_id = scored
    score(root, run_id, "--scorer", "abet")
    for scoring in ("abet", "spec"):
        folder = root / run_id / "scores" / scoring
        without_file_hashes(folder / "summary.json")
        scores = folder / "scores.parquet"
        pq.write_table(pq.read_table(scores), scores)  # (its contents kept: verified)
    result = verify(root, run_id)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        "note: scores/abet, scores/spec: the sha256 of summary.json, scores.parquet and "
        "pairs.parquet are not checked: scored by an earlier version, which recorded none "
        "(score again to record them)",
        f"verified: abet, spec of {run_id}: 94 samples identical to a re-score from raw traces",
    ]


def test_changed_raw_message_is_caught(scored):
    root, run_id = scored
    scores = pl.read_parquet(root / run_id / "scores" / "spec" / "scores.parquet")
    # A sample with one correct add/multiply call: changing one value makes 1 of 2 args invalid.
    victim = (
        scores.filter(
            (pl.col("n_gold") == 1)
            & (pl.col("n_agent") == 1)
            & (pl.col("args_total") == 2)
            & (pl.col("args_invalid") == 0)
            & (pl.col("tsa") == 1)
        )
        .sort("sample_index")
        .row(0, named=True)
    )
    sid = victim["sample_id"]
    path = root / run_id / "messages.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    for row in rows:
        if row["sample_id"] == sid and row["type"] == "ai":
            message = json.loads(row["message"])
            calls = message["data"]["tool_calls"]
            if calls:
                calls[0]["args"]["a"] = 12345.678
                row["message"] = json.dumps(message)
                break
    else:
        pytest.fail(f"no AI message with a call in sample {sid}")
    pq.write_table(pa.Table.from_pylist(rows, schema=WRITTEN_MESSAGES_SCHEMA), path)

    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "changed since the run wrote it: messages.parquet (sha256 differs from the manifest)",
        "changed since scoring: messages.parquet (sha256 differs from the audit record)",
    ]
    assert f"spec: sample {sid}: args_invalid: stored 0, recomputed 1" in lines
    assert f"spec: sample {sid}: ahr: stored 0.0, recomputed 0.5" in lines
    assert "verified" not in result.stdout

    report = json.loads(verify(root, run_id, "--format", "json").stdout)
    assert set(report) == {
        "run_id", "ok", "scorings", "samples_checked", "changed_files", "changed_since_written",
        "other_sql", "notes", "differences",
    }  # fmt: skip
    assert report["ok"] is False
    assert report["run_id"] == run_id and report["scorings"] == ["spec"]
    assert report["samples_checked"] == 94
    assert report["changed_files"] == report["changed_since_written"] == ["messages.parquet"]
    # scored again, the changed file is refused: it is not the one the run wrote
    again = cli("score", run_id, "--store", root)
    assert again.exit_code == 1
    assert "messages.parquet: not the file the run wrote" in again.output
    for d in report["differences"]:
        assert set(d) == {"scoring", "sample_id", "field", "stored", "recomputed"}
        assert d["scoring"] == "spec"
    per_sample = {(d["sample_id"], d["field"]) for d in report["differences"] if d["sample_id"]}
    # the wrong value also takes the sample off the gold path at its first call, and leaves
    # its gold call undone; its pair's count of invalid arguments differs too
    outcome = {(sid, "exact"), (sid, "first_divergence"), (sid, "covered")}
    pairs = {(i, f) for i, f in per_sample if f.startswith("pairs row ")}
    assert per_sample - pairs == {(sid, "args_invalid"), (sid, "ahr"), *outcome}
    assert [(i, f.split(": ")[-1]) for i, f in pairs] == [(sid, "args_invalid")]
    run_level = {d["field"]: d for d in report["differences"] if d["sample_id"] is None}
    assert set(run_level) == {
        "args_invalid", "ahr", "by_tool", "by_category",
        "exact", "exact_samples", "first_divergence", "n_first_divergence", "covered",
        "covered_samples",
    }  # fmt: skip
    assert run_level["args_invalid"]["recomputed"] == run_level["args_invalid"]["stored"] + 1


def test_calls_column_rewritten_with_every_hash_in_step_is_caught(scored):
    """Scoring reads each message's stored ``calls``, derived from the message when the file
    is written: a store rewritten with other calls there, its manifest's hashes and its
    scoring made again to match, re-scored to the same numbers and verified."""
    root, run_id = scored
    path = root / run_id / "messages.parquet"
    rows = pq.read_table(path).to_pylist()
    changed = [r for r in rows if r["calls"] and "add_numbers" in r["calls"]][:4]
    for row in changed:
        row["calls"] = row["calls"].replace("add_numbers", "multiply_numbers")
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    as_the_run_wrote(path)
    score(root, run_id)  # the scoring made again: its audit record vouches for the new bytes

    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    lines = result.stdout.splitlines()
    first = min(changed, key=lambda r: (r["sample_id"], r["trial"], r["position"]))
    held = json.dumps(json.loads(first["message"])["data"]["tool_calls"], separators=(",", ":"))
    assert lines[0] == (
        f"messages: sample {first['sample_id']}: calls of message {first['position']} "
        f"(trial {first['trial']}): stored {first['calls']!r}, recomputed {held!r}"
    )
    assert lines[3] == "messages: 1 more messages differ too"
    assert len(lines) == 4  # the scores follow from the (rewritten) column: no other line
    assert not verify_run(Store(root), run_id).ok


def test_changed_message_text_that_moves_no_score_is_still_reported(scored):
    root, run_id = scored
    path = root / run_id / "messages.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["message"] = rows[0]["message"].replace('"content": "', '"content": "edited ', 1)
    assert rows[0]["message"] != table["message"][0].as_py()
    pq.write_table(pa.Table.from_pylist(rows, schema=WRITTEN_MESSAGES_SCHEMA), path)
    report = verify_run(Store(root), run_id)
    assert report.changed_files == ["messages.parquet"]
    assert report.differences == []
    assert verify(root, run_id).exit_code == 1


def test_edited_per_tool_number_is_caught(scored):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    summary["by_tool"][0]["ahr"] = 0.99
    path.write_text(json.dumps(summary))
    assert verify(root, run_id).exit_code == 1


def test_missing_audit_record_is_not_verified(scored):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    del summary["audit"]
    path.write_text(json.dumps(summary))
    assert verify(root, run_id).exit_code == 1


def test_summary_without_a_files_sha256_is_not_verified(scored):
    """A record that does not vouch for a file (as one written while the manifest's entry for
    it was broken) leaves that file unchecked: not verified."""
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    del summary["audit"]["inputs_sha256"]["samples.parquet"]
    path.write_text(resealed(path, summary))
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        f"spec: run: inputs_sha256 samples.parquet: stored None, "
        f"recomputed {sha256(root / run_id / 'samples.parquet')!r}"
    ]


def test_an_edited_dataset_file_is_caught(scored):
    """Reported: a gold call changed in the run's dataset.jsonl verified (exit 0), though
    `export` takes its gold calls from that file, and the export's import scored otherwise."""
    root, run_id = scored
    path = root / run_id / "dataset.jsonl"
    manifest = json.loads((root / run_id / "manifest.json").read_text())
    assert manifest["dataset"]["stored_sha256"] == sha256(path)  # as the run wrote it
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    entry = next(e for e in entries if e["target"])
    entry["target"] = []
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        "changed since the run wrote it: dataset.jsonl (sha256 differs from the manifest)"
    ]
    assert verify_run(Store(root), run_id).changed_since_written == ["dataset.jsonl"]
    path.unlink()  # a removed one too
    assert verify_run(Store(root), run_id).changed_since_written == ["dataset.jsonl"]


def test_a_dataset_file_of_a_run_without_its_sha256_is_said_unchecked(scored):
    """A manifest written before it recorded dataset.jsonl's sha256 holds only the one of the
    file the run was made from: the file is checked against that where they agree, else a
    note says it is not checked."""
    root, run_id = scored
    manifest_path = root / run_id / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["dataset"]["stored_sha256"]
    manifest_path.write_text(json.dumps(manifest))
    score(root, run_id)  # (the manifest changed since scoring)
    result = verify(root, run_id)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.splitlines()[0] == (
        "note: dataset.jsonl not checked: its sha256 is not the manifest's dataset sha256, "
        "which is of the file the run was made from (a run written by an earlier version "
        "records none of dataset.jsonl itself)"
    )
    assert result.stdout.splitlines()[1].startswith("verified: ")
    manifest["dataset"]["sha256"] = sha256(root / run_id / "dataset.jsonl")  # stored as it was
    manifest_path.write_text(json.dumps(manifest))
    score(root, run_id)
    assert verify_run(Store(root), run_id).notes == []


def dashboard_file(root: Path, run_id: str) -> Path:
    (path,) = (root / run_id / "evaluations").glob("*.json")
    return path


def test_an_edited_dashboard_file_is_caught(scored):
    """Reported: the dashboard file (the published tsa, ahr and tp) edited to say tsa 1.0
    verified, exit 0. The scoring that writes it records its sha256, and its numbers are
    held to the scoring's."""
    root, run_id = scored
    path = dashboard_file(root, run_id)
    summary = json.loads((root / run_id / "scores" / "spec" / "summary.json").read_text())
    assert summary["audit"]["dashboard"] == {
        "file": f"evaluations/{path.name}", "sha256": sha256(path)
    }  # fmt: skip
    text = path.read_text()
    tsa = json.dumps(summary["tsa"])
    assert f'"tsa": {tsa}' in text.splitlines()[0]
    changed = (
        f"changed since scoring: evaluations/{path.name} (sha256 differs from the audit record)"
    )
    path.write_text(text.replace(f'"tsa": {tsa}', '"tsa": 1.0', 1))
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        changed,
        f"spec: run: dashboard results.tsa: stored 1.0, recomputed {summary['tsa']!r}",
    ]
    path.write_text(text.replace('"input":', '"input": ', 1))  # a sample's, the numbers kept
    assert verify(root, run_id).stdout.splitlines() == [changed]
    path.unlink()
    assert verify_run(Store(root), run_id).changed_files == [f"evaluations/{path.name}"]


def test_a_dashboard_file_scored_before_its_sha256_is_held_to_its_numbers(scored):
    """A scoring stored before its audit record held the dashboard file's sha256: the file's
    numbers are checked against the scoring's, its samples are not, which a note says."""
    root, run_id = scored
    path = dashboard_file(root, run_id)
    summary_path = root / run_id / "scores" / "spec" / "summary.json"
    summary = json.loads(summary_path.read_text())
    del summary["audit"]["dashboard"]
    summary_path.write_text(resealed(summary_path, summary))
    note = (
        f"note: evaluations/{path.name}: its samples are not checked: it was written before "
        "scorings recorded its sha256 (score spec again to record one)"
    )
    result = verify(root, run_id)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.splitlines()[0] == note
    tsa = json.dumps(summary["tsa"])
    path.write_text(path.read_text().replace(f'"tsa": {tsa}', '"tsa": 1.0', 1))
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout.splitlines() == [
        f"spec: run: dashboard results.tsa: stored 1.0, recomputed {summary['tsa']!r}",
        note,
    ]


def test_the_dashboard_file_is_held_to_the_scoring_that_wrote_it_last(scored):
    """Each scoring with a dashboard writes the one file, and records it; a scoring again
    without a dashboard keeps the record of the file it wrote. The file verifies while it is
    one they record; else it changed since the latest of them, which says so."""
    root, run_id = scored
    score(root, run_id, "--rel-tol", "1e-3")
    assert verify(root, run_id).exit_code == 0
    score(root, run_id, "--dashboard", "none")  # spec again: the latest to record one
    assert verify(root, run_id).exit_code == 0
    path = dashboard_file(root, run_id)
    path.write_text(path.read_text().replace('"input":', '"input": ', 1))
    assert verify(root, run_id, "--scoring", REL_FOLDER).exit_code == 0  # not its to answer
    result = verify(root, run_id, "--scoring", "spec")
    assert result.stdout.splitlines() == [
        f"changed since scoring: evaluations/{path.name} (sha256 differs from the audit record)"
    ]


# ---------------------------------------------------------------- broken store files


@pytest.mark.parametrize("entry", ["number", "sha256"])
def test_broken_files_entry_of_the_manifest_fails_score_and_verify(scored, entry):
    root, run_id = scored
    run_dir = root / run_id
    manifest = json.loads((run_dir / "manifest.json").read_text())
    if entry == "number":
        manifest["files"]["samples.parquet"] = 3
        message = "files: samples.parquet: 3 is not an object (sha256, size, mtime_ns)"
    else:  # size and time unchanged, so the recorded sha256 would be taken as it is
        stat = (run_dir / "samples.parquet").stat()
        manifest["files"]["samples.parquet"] = {
            "sha256": 5, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns
        }  # fmt: skip
        message = "files: samples.parquet: sha256 5 is not a sha256 in hex"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    before = snapshot(root)
    expected = [f"Error: {run_dir / 'manifest.json'}: {message}"]
    result = cli("score", run_id, "--store", root)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.splitlines() == expected  # no traceback of the hashing thread
    assert snapshot(root) == before
    checked = verify(root, run_id)
    assert checked.exit_code == 1, (checked.output, checked.exception)
    assert checked.stderr.splitlines() == expected
    assert "verified" not in checked.stdout
    # the error reaches the caller of finish(), the call scoring makes
    pending = audit_record.audit_record(Store(root).open_run(run_id), {})
    with pytest.raises(StoreError, match=r"files: samples\.parquet"):
        pending.finish()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("summary.json", "{", "unreadable summary (Expecting property name"),
        ("summary.json", "[1]", "not a scoring summary (not a JSON object)"),
        ("summary.json", '{"options": {"scorer": "x"}}', "options: --scorer 'x'"),
        ("summary.json", '{"audit": {"inputs_sha256": {"../x": "0"}}}', "audit.inputs_sha256"),
        ("scores.parquet", None, "not a readable Parquet file ("),
    ],
)
def test_corrupt_stored_scoring_exits_1_naming_the_file(scored, name, content, message):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / name
    if content is None:
        with path.open("r+b") as f:
            f.truncate(10)
    else:
        path.write_text(content)
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"Error: {path}: {message}"), lines
    assert lines[1] == f"Hint: score it again: tcbreplay score {run_id} --store {root}"
    assert result.stdout == ""


def test_stored_scores_without_a_column_exit_1(scored):
    root, run_id = scored
    path = root / run_id / "scores" / "spec" / "scores.parquet"
    pq.write_table(pq.read_table(path).drop(["tp"]), path)
    result = verify(root, run_id)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.splitlines()[0] == f"Error: {path}: no column tp"
    assert "verified" not in result.stdout


def test_hint_names_the_options_of_other_scorings(scored):
    root, run_id = scored
    score(root, run_id, "--rel-tol", "1e-3")
    path = root / run_id / "scores" / REL_FOLDER / "summary.json"
    path.write_text("{")
    result = verify(root, run_id, "--scoring", REL_FOLDER)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[1] == (
        f"Hint: score it again: tcbreplay score {run_id} --rel-tol 0.001 --store {root}"
    )


# ---------------------------------------------------------------- nothing to verify


def test_never_scored_run_exits_2_with_a_hint(sim_copy):
    root, run_id = sim_copy
    result = verify(root, run_id)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.splitlines() == [
        f"Error: run {run_id!r} has no stored scores to verify",
        f"Hint: score it: tcbreplay score {run_id}",
    ]
    with pytest.raises(InputError):
        verify_run(Store(root), run_id)


def test_unknown_scoring_and_unknown_run_exit_2(scored):
    root, run_id = scored
    result = verify(root, run_id, "--scoring", "abet")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: run {run_id!r} has no ")
    assert "scoring named 'abet'" in result.stderr.splitlines()[0]
    missing = verify(root, "no-such-run")
    assert missing.exit_code == 2
    assert missing.stderr.startswith("Error: run 'no-such-run' not found")
    with pytest.raises(RunNotFoundError):
        verify_run(Store(root), "no-such-run")


def test_verify_writes_nothing(scored):
    root, run_id = scored
    before = {p: sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}
    assert verify(root, run_id).exit_code == 0
    assert {p: sha256(p) for p in sorted(root.rglob("*")) if p.is_file()} == before


def test_library_score_then_verify(sim_copy):
    root, run_id = sim_copy
    store = Store(root)
    score_run(store, run_id, ScoreOptions(rel_tol=1e-3))
    report = verify_run(store, run_id)
    assert report.ok and report.scorings == [REL_FOLDER]
    assert report.to_dict() == {
        "run_id": run_id, "ok": True, "scorings": [REL_FOLDER], "samples_checked": 94,
        "changed_files": [], "changed_since_written": [], "other_sql": [], "notes": [],
        "differences": [],
    }  # fmt: skip


# ---------------------------------------------------------------- the former default abs_tol


@pytest.fixture
def former_default(tmp_path) -> Path:
    """An imported run whose numbers differ under abs_tol 1e-9 (the default before 0.2) and
    0 (today's), with a "spec" scoring as tcbreplay 0.1 stored it: scored with abs_tol
    1e-9, its record naming only the tolerances."""
    from traces import ai_message, human_message

    root = tmp_path / "traces"
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([{"id": "q", "input": "x", "target": [
        {"name": "add_numbers", "args": {"a": 0, "b": 2.5}}]}]))  # fmt: skip
    messages = [{"type": "human", "data": json.loads(human_message("x"))["data"]},
                {"type": "ai", "data": json.loads(ai_message([
                    ("add_numbers", {"a": 5e-10, "b": 2.5})]))["data"]}]  # fmt: skip
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps({"sample_id": "q", "messages": messages}) + "\n")
    tools = TEST_DATA / "tools_shop.json"
    imported = cli("import", "--dataset", dataset, "--tools", tools, "--traces", traces,
                   "--run-id", "r", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    assert score(root, "r", "--abs-tol", "1e-9")["args_invalid"] == 0
    scores = root / "r" / "scores"
    (scores / "spec_rel-1e-09_abs-1e-09").rename(scores / "spec")
    rows = scores / "spec" / "scores.parquet"  # its rows filed under spec, as 0.1 wrote them
    frame = pl.read_parquet(rows).with_columns(scoring=pl.lit("spec"))
    pq.write_table(frame.to_arrow().cast(SCORES_SCHEMA), rows)
    path = scores / "spec" / "summary.json"
    summary = json.loads(path.read_text())
    old = {"scorer": "spec", "rel_tol": 1e-9, "abs_tol": 1e-9}
    summary.update(scoring="spec", options=old)
    summary["audit"]["options"] = old
    text = json.dumps(old, sort_keys=True)  # (its hash, as every version has written it)
    summary["audit"]["options_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    path.write_text(json.dumps(summary))
    without_file_hashes(path)  # (0.1 recorded none)
    return root


def test_a_spec_scoring_of_the_former_default_still_verifies(former_default):
    """Its record names abs_tol 1e-9, which verify re-scores with: the same numbers."""
    result = verify(former_default, "r")
    assert result.exit_code == 0, result.output
    note, verified = result.stdout.splitlines()
    assert note.startswith("note: scores/spec: the sha256 of summary.json")
    assert verified.startswith("verified")


def test_report_and_diff_do_not_take_a_former_default_for_todays(former_default):
    """report and diff want today's defaults under "spec": they score such a run in memory
    (ahr 1/2 under abs_tol 0, not the stored 0); score then writes today's over it, and
    that verifies too."""
    from tcbreplay._compare.diff import diff_runs
    from tcbreplay._compare.scored_runs import load_scores
    from tcbreplay._report.data import load_run

    store = Store(former_default)
    data = load_run(store, "r")
    assert data.scored_in_memory and data.scores["args_invalid"].to_list() == [1]
    run = store.open_run("r")
    assert load_scores(store, run, "spec")[0]["args_invalid"].to_list() == [1]
    assert diff_runs(store, "r", "r").samples["ahr_a"].to_list() == [0.5]
    assert score(former_default, "r")["args_invalid"] == 1  # 5e-10 is not 0 under abs_tol 0
    assert not load_run(store, "r").scored_in_memory
    assert verify(former_default, "r").exit_code == 0


def test_a_replay_of_one_sample_verifies_in_the_singular(tmp_path):
    """It said "1 turns served, each the stored message of one; spec of rp: 1 samples
    identical"."""
    root = tmp_path / "traces"
    made = cli("record", "--model", "sim", "--sample-id", "hi-there", "--run-id", "one",
               "--quiet", "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output
    replayed = cli("replay", "one", "--run-id", "rp", "--quiet", "--store", root)
    assert replayed.exit_code == 0, replayed.output
    score(root, "rp")
    result = verify(root, "rp")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        "verified: replay rp: 1 turn served, each the stored message of one; spec of rp: "
        "1 sample identical to a re-score from raw traces"
    )
