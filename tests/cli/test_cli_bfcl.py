"""BFCL in, BFCL out (command line): `import --format bfcl` and `score --scorer bfcl` on
BFCL's own files (the subset under tests/data/bfcl), held to BFCL's own checker."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from bfcl_data import ALL_ANSWERS, ALL_QUESTIONS, ANSWERS, BY_ID, QUESTIONS, joined_files
from helpers import cli, snapshot

from bench.bfcl_bench import DIFFERENCES
from bench.bfcl_variants import VARIANTS, form_of, render


def results_file(path: Path, variant: str, questions: list = QUESTIONS) -> tuple[Path, dict]:
    """The variant's answers to the vendored questions as a BFCL results file."""
    results = {}
    for question in questions:
        calls = VARIANTS[variant](question, ALL_ANSWERS[question["id"]])
        if calls is not None:
            results[question["id"]] = render(calls, form_of(len(results)), question)
    path.write_text("".join(json.dumps({"id": k, "result": v}) + "\n" for k, v in results.items()))
    return path, results


@pytest.fixture
def bfcl_files(tmp_path):
    questions, answers = joined_files(tmp_path)
    return {"questions": questions, "answers": answers, "store": tmp_path / "traces"}


def import_run(files, traces, run_id="bfcl-run"):
    return cli(
        "import", "--format", "bfcl", "--dataset", files["questions"], "--answers",
        files["answers"], "--traces", traces, "--run-id", run_id, "--store", files["store"],
    )  # fmt: skip


@pytest.mark.parametrize(
    "variant",
    ["exact", *(pytest.param(v, marks=pytest.mark.slow)  # (3 s each: in test-slow)
                for v in ("parallel calls reordered", "optional left out"))],
)  # fmt: skip
def test_imported_answers_score_as_bfcls_checker_judges_them(bfcl_files, tmp_path, variant):
    pytest.importorskip("bfcl_eval", reason="BFCL's checker: make install puts it in .venv")
    from bench import bfcl_reference

    traces, results = results_file(tmp_path / "results.jsonl", variant)
    imported = import_run(bfcl_files, traces)
    assert imported.exit_code == 0, imported.output
    missing = len(QUESTIONS) - len(results)
    assert f"{len(results)}/{len(QUESTIONS)} samples imported" in imported.stdout
    scored = cli("score", "bfcl-run", "--scorer", "bfcl", "--format", "json",
                 "--store", bfcl_files["store"])  # fmt: skip
    assert scored.exit_code == 0, scored.output
    summary = json.loads(scored.stdout)
    expected = {
        qid: bfcl_reference.verdict(BY_ID[qid], ANSWERS[qid], result)
        for qid, result in results.items()
    }
    scores = pl.read_parquet(summary["scores_file"])
    for row in scores.iter_rows(named=True):
        if row["sample_id"] in expected:
            assert (row["valid"], row["error_type"]) == expected[row["sample_id"]], row
        else:  # no answer: judged as no calls
            assert row["status"] == "missing" and row["valid"] is False
    valid = sum(v for v, _ in expected.values())
    assert (summary["valid"], summary["total"]) == (valid, len(QUESTIONS))
    assert summary["accuracy"] == valid / len(QUESTIONS)
    assert set(summary["categories"]) == {
        "simple_python",
        "multiple",
        "parallel",
        "parallel_multiple",
    }
    parallel = [qid for qid in BY_ID if qid.startswith("parallel_") and "multiple" not in qid]
    assert summary["categories"]["parallel"] == {
        "accuracy": sum(expected.get(q, (False,))[0] for q in parallel) / len(parallel),
        "valid": sum(expected.get(q, (False,))[0] for q in parallel),
        "total": len(parallel),
    }
    assert summary["n_errors"] == summary["n_missing"] == missing


# the variants the spec scorer once judged otherwise than BFCL (the rest: make test-slow)
_SPEC_FAST = ("optional supplied as empty", "a float the answer lists for an integer",
              "optional supplied as its default")  # fmt: skip


@pytest.mark.parametrize(
    "variant",
    [*_SPEC_FAST, *(pytest.param(v, marks=pytest.mark.slow)
                    for v in VARIANTS if v not in _SPEC_FAST)],
)  # fmt: skip
def test_the_spec_scorer_with_bfcls_comparisons_is_clean_where_bfcl_is_valid(tmp_path, variant):
    """docs/bfcl.md: with --strings bfcl --types strict --rel-tol 0 a sample is clean (tsa 1,
    tp 1, ahr 0 or null, args_missing 0) exactly where BFCL's checker calls it valid, but
    for the differences it lists (which make-bench-bfcl counts, by BFCL's error type)."""
    pytest.importorskip("bfcl_eval", reason="BFCL's checker: make install puts it in .venv")
    from bench import bfcl_reference

    questions, answers = joined_files(tmp_path, with_derived=True)
    files = {"questions": questions, "answers": answers, "store": tmp_path / "traces"}
    traces, results = results_file(tmp_path / "results.jsonl", variant, ALL_QUESTIONS)
    assert import_run(files, traces).exit_code == 0
    scored = cli("score", "bfcl-run", "--strings", "bfcl", "--types", "strict", "--rel-tol", "0",
                 "--format", "json", "--store", files["store"])  # fmt: skip
    assert scored.exit_code == 0, scored.output
    scores = pl.read_parquet(json.loads(scored.stdout)["scores_file"])
    judged = 0
    for row in scores.iter_rows(named=True):
        qid = row["sample_id"]
        if qid not in results:
            continue
        question = next(q for q in ALL_QUESTIONS if q["id"] == qid)
        valid, error_type = bfcl_reference.verdict(question, ALL_ANSWERS[qid], results[qid])
        clean = (row["tsa"] in (None, 1.0) and row["tp"] == 1.0 and not row["ahr"]
                 and row["args_missing"] == 0)  # fmt: skip
        if clean and not valid and error_type.split(":")[-1] in DIFFERENCES:
            continue  # a difference the manual lists
        assert clean == valid, (qid, results[qid], error_type, row)
        judged += 1
    assert judged > 0


@pytest.mark.slow  # (about 4.5 s under the suite's load)
def test_the_table_and_the_scores_view(bfcl_files, tmp_path):
    traces, _ = results_file(tmp_path / "results.jsonl", "wrong value")
    assert import_run(bfcl_files, traces).exit_code == 0
    table = cli("score", "bfcl-run", "--scorer", "bfcl", "--store", bfcl_files["store"])
    assert table.exit_code == 0, table.output
    assert "parallel_multiple" in table.stdout and "overall" in table.stdout
    assert "value_error:string" in table.stdout  # the error types below the table
    rows = cli("sql", "select scoring, count(*) as n, count(valid) as judged, sum(valid::int) as ok"
               " from scores_all group by scoring", "--format", "json",
               "--store", bfcl_files["store"])  # fmt: skip
    assert json.loads(rows.stdout) == [{"scoring": "bfcl", "n": 33, "judged": 33, "ok": 0}]
    rows = cli("sql", "select distinct trial from scores_all", "--format", "json",
               "--store", bfcl_files["store"])  # fmt: skip
    assert json.loads(rows.stdout) == [{"trial": 0}]  # BFCL's results: one trial each
    # scored by the spec scorer since: no verdict in its rows, the bfcl scoring's kept
    assert cli("score", "bfcl-run", "--store", bfcl_files["store"]).exit_code == 0
    rows = cli("sql", "select scoring, count(valid) as judged, count(error_type) as typed"
               " from scores_all group by scoring order by scoring", "--format", "json",
               "--store", bfcl_files["store"])  # fmt: skip
    assert json.loads(rows.stdout) == [
        {"scoring": "bfcl", "judged": 33, "typed": 33},
        {"scoring": "spec", "judged": 0, "typed": 0},
    ]
    verified = cli("audit", "verify", "bfcl-run", "--store", bfcl_files["store"])
    assert verified.exit_code == 0, verified.output
    assert "bfcl" in verified.stdout


def test_the_trace_keeps_the_result_and_its_calls(bfcl_files, tmp_path):
    traces = tmp_path / "results.jsonl"
    result = [{"spotify_play": '{"artist": "Taylor Swift", "duration": 20}'}]
    traces.write_text(
        json.dumps({"id": "parallel_0", "result": result}) + "\n"
        + json.dumps({"id": "simple_python_0", "result": "calculate_triangle_area(base=(1, 2))"})
        + "\n"
    )  # fmt: skip
    assert import_run(bfcl_files, traces).exit_code == 0
    rows = cli("sql", "select sample_id, name, args from tool_calls order by sample_id",
               "--format", "json", "--store", bfcl_files["store"])  # fmt: skip
    assert json.loads(rows.stdout) == [
        {"sample_id": "parallel_0", "name": "spotify.play",
         "args": '{"artist":"Taylor Swift","duration":20}'},
        {"sample_id": "simple_python_0", "name": "calculate_triangle_area",
         "args": '{"base":[1,2]}'},
    ]  # fmt: skip
    rows = cli("sql", "select sample_id, message->>'$.data.content' as content,"
               " message->'$.data.response_metadata' as meta from messages where type = 'ai'"
               " order by sample_id", "--format", "json",
               "--store", bfcl_files["store"])  # fmt: skip
    first, second = json.loads(rows.stdout)
    assert json.loads(first["meta"]) == {
        "synthesized_from": "bfcl", "bfcl_result": result,
        "bfcl_renamed": {"spotify_play": "spotify.play"},
    }  # fmt: skip
    assert second["content"] == "calculate_triangle_area(base=(1, 2))"


def test_an_answer_bfcl_cannot_decode_is_its_decoder_error(bfcl_files, tmp_path):
    traces = tmp_path / "results.jsonl"
    traces.write_text(json.dumps({"id": "simple_python_0", "result": "Sorry, I can't."}) + "\n")
    assert import_run(bfcl_files, traces).exit_code == 0
    scored = cli("score", "bfcl-run", "--scorer", "bfcl", "--format", "json",
                 "--store", bfcl_files["store"])  # fmt: skip
    summary = json.loads(scored.stdout)
    assert summary["error_types"]["ast_decoder:decoder_failed"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "bfcl"], "--format bfcl needs --answers"),
        (["--format", "bfcl", "--answers", "{answers}", "--tools", "t.json"], "takes no --tools"),
        (["--answers", "{answers}", "--tools", "t.json"], "--answers goes with --format bfcl"),
        # --format left out: bfcl is never told from the file, it needs the answers
        (["--answers", "{answers}"], "--answers goes with --format bfcl"),
        (["--format", "langchain", "--answers", "{answers}"], "--answers goes with --format bfcl"),
    ],
)
def test_import_options_that_do_not_go_together(bfcl_files, tmp_path, args, message):
    traces, _ = results_file(tmp_path / "results.jsonl", "exact")
    args = [a.format(answers=bfcl_files["answers"]) for a in args]
    before = snapshot(bfcl_files["store"])
    result = cli("import", "--dataset", bfcl_files["questions"], "--traces", traces,
                 "--run-id", "r", "--store", bfcl_files["store"], *args)  # fmt: skip
    assert result.exit_code == 2
    assert message in result.output
    assert snapshot(bfcl_files["store"]) == before


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"id": "simple_python_999", "result": []},
         "line 1: id 'simple_python_999' is not a question"),
        ({"id": "simple_python_0", "result": {"f": {}}},
         "line 1: result must be a list of calls or a string"),
        ("not json", "line 1: not valid JSON"),
    ],
)  # fmt: skip
def test_a_results_file_that_is_not_bfcls_is_refused(bfcl_files, tmp_path, line, message):
    traces = tmp_path / "results.jsonl"
    traces.write_text((line if isinstance(line, str) else json.dumps(line)) + "\n")
    result = import_run(bfcl_files, traces)
    assert result.exit_code == 2
    assert f"results.jsonl: {message}" in result.output
    assert not (bfcl_files["store"] / "bfcl-run").exists()


def test_a_results_line_given_twice_is_refused(bfcl_files, tmp_path):
    traces = tmp_path / "results.jsonl"
    traces.write_text(2 * (json.dumps({"id": "simple_python_0", "result": []}) + "\n"))
    result = import_run(bfcl_files, traces)
    assert result.exit_code == 2
    assert "line 2: id 'simple_python_0' given twice (also line 1)" in result.output


def test_the_bfcl_scorer_needs_bfcls_gold(sim_copy):
    root, run_id = sim_copy
    result = cli("score", run_id, "--scorer", "bfcl", "--store", root)
    assert result.exit_code == 2
    assert "has no BFCL answer" in result.output
    assert "--format bfcl" in result.output


def test_diff_has_no_bfcl_scoring(bfcl_files, tmp_path):
    traces, _ = results_file(tmp_path / "results.jsonl", "exact")
    assert import_run(bfcl_files, traces).exit_code == 0
    result = cli("diff", "bfcl-run", "bfcl-run", "--scoring", "bfcl",
                 "--store", bfcl_files["store"])  # fmt: skip
    assert result.exit_code == 2
    assert "--scoring bfcl" in result.output and "--scorer bfcl --format json" in result.output


def test_a_bfcl_results_file_without_format_asks_for_it(bfcl_files, tmp_path):
    """The format is told from other files; a BFCL results file gets a hint, not a guess."""
    traces, _ = results_file(tmp_path / "results.jsonl", "exact")
    result = cli("import", "--traces", traces, "--run-id", "r", "--store", bfcl_files["store"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Error: results.jsonl: cannot tell its format: it looks like a BFCL results file "
        "(id, result)",
        "Hint: give --format bfcl, with BFCL's questions as --dataset and --answers",
    ]
    assert not bfcl_files["store"].exists()
