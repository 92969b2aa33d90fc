"""Replay (#29): a recorded run re-run through the agent with the recording as its model, its
divergences, tool drift, forks, scoring against the parent, and the audit of what it served.

The parent is the built-in benchmark recorded with ``sim:seed=7,error_rate=0.3`` (94
samples, a few with calls the sim got wrong on purpose)."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from helpers import TEST_DATA, cli, cli_process, journal_lines, wait_for

from tcbreplay._replay.fingerprint import message_hashes
from tcbreplay._replay.run import replay_run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCHEMA_VERSION

PARENT = "sim-seed7"


@pytest.fixture(scope="module")
def root(sim_run, tmp_path_factory) -> Path:
    """A store holding a copy of the sim run, which the tests replay (each into its own run)."""
    store, run_id = sim_run
    path = tmp_path_factory.mktemp("replay") / "traces"
    shutil.copytree(store.run_dir(run_id), path / run_id)
    shutil.rmtree(path / run_id / "scores", ignore_errors=True)
    return path


def replay(root: Path, *args: object) -> tuple[int, dict]:
    """``tcbreplay replay PARENT ARGS --format json``: its exit code and output."""
    result = cli("replay", PARENT, *args, "--workers", 8, "--quiet", "--format", "json",
                 "--store", root)  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def sql(root: Path, query: str) -> list[dict]:
    result = cli("sql", query, "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def conversations(root: Path, run_id: str) -> dict[tuple[str, int], list[dict]]:
    rows = sql(root, f"select sample_id, trial, message from messages where run_id = '{run_id}' "
               "order by sample_id, trial, position")  # fmt: skip
    out: dict[tuple[str, int], list[dict]] = {}
    for row in rows:
        out.setdefault((row["sample_id"], row["trial"]), []).append(json.loads(row["message"]))
    return out


def calls(root: Path, run_id: str) -> list[tuple]:
    rows = sql(root, "select sample_id, trial, call_index, name, args::varchar as args from "
               f"tool_calls where run_id = '{run_id}' order by all")  # fmt: skip
    return [tuple(r.values()) for r in rows]


def samples_calling(root: Path, tool: str) -> set[str]:
    rows = sql(root, f"select distinct sample_id from tool_calls where run_id = '{PARENT}' "
               f"and name = '{tool}'")  # fmt: skip
    return {r["sample_id"] for r in rows}


def prompt_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prompt.txt"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- unchanged


@pytest.fixture(scope="module")
def unchanged(root) -> dict:
    code, summary = replay(root, "--run-id", "same")
    assert code == 0, summary
    return summary


def test_an_unchanged_replay_serves_every_turn_and_calls_nothing_live(root, unchanged):
    ai = sql(root, f"select count(*) as n from messages where run_id = '{PARENT}' and type = 'ai'")
    assert unchanged["turns_served"] == ai[0]["n"] > 94
    assert unchanged["live_calls"] == 0
    assert unchanged["diverged_samples"] == 0
    assert unchanged["ok"] == unchanged["total"] == 94
    assert unchanged["tool_outputs_drifted"] == 0
    assert unchanged["tool_outputs"] == {"same": unchanged["tool_outputs_compared"]}
    assert sql(root, "select count(*) as n from divergences where run_id = 'same'") == [{"n": 0}]
    manifest = json.loads((root / "same" / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["source"] == "replay"
    assert manifest["replay"]["parent_run_id"] == PARENT
    assert manifest["replay"]["fork"] is None
    assert manifest["replay"]["live_calls"] == 0


def test_an_unchanged_replay_has_the_parents_calls_and_messages(root, unchanged):
    assert calls(root, "same") == calls(root, PARENT)
    mine, theirs = conversations(root, "same"), conversations(root, PARENT)
    assert mine.keys() == theirs.keys()
    for key in theirs:
        assert message_hashes(mine[key]) == message_hashes(theirs[key]), key
        # and each served turn is the parent's message as stored, id and usage included
        assert [m for m in mine[key] if m["type"] == "ai"] == [
            m for m in theirs[key] if m["type"] == "ai"
        ], key


def test_audit_verify_checks_the_served_turns_against_the_parent(root, unchanged):
    result = cli("audit", "verify", "same", "--store", root)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        f"verified: replay same: {unchanged['turns_served']} turns served, each the stored "
        f"message of {PARENT}"
    )
    # a served turn that is not the parent's message, and a live call without a fork rule
    forged = root.parent / "forged"
    shutil.copytree(root, forged)
    path = forged / "same" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["replay"]["live_calls"] = 1
    path.write_text(json.dumps(manifest))
    bad = cli("audit", "verify", "same", "--store", forged)
    assert bad.exit_code == 1
    assert "replay: run: replay.live_calls: parent's 0, replay's 1" in bad.stdout


def test_the_replay_scores_against_its_parent_as_a_scoring_of_its_own(root, unchanged):
    result = cli("score", "same", "--gold-run", PARENT, "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["scoring"] == "spec_gold-sim-seed7"
    assert summary["options"]["gold_run"] == PARENT
    assert (summary["tsa"], summary["tp"]) == (1.0, 1.0)  # the same calls as its gold
    assert (root / "same" / "scores" / "spec_gold-sim-seed7" / "scores.parquet").exists()
    assert not (root / "same" / "evaluations").exists()  # the dashboard is the dataset's
    rows = sql(root, "select scoring, gold_run from scorings where run_id = 'same'")
    assert rows == [{"scoring": "spec_gold-sim-seed7", "gold_run": PARENT}]
    verified = cli("audit", "verify", "same", "--store", root)
    assert verified.exit_code == 0, verified.output
    assert "spec_gold-sim-seed7 of same: 94 samples identical" in verified.stdout


# ---------------------------------------------------------------- changes under test


def test_a_changed_system_prompt_diverges_every_sample_at_turn_0_on_system(root, tmp_path):
    code, summary = replay(root, "--run-id", "prompt", "--system-prompt",
                           prompt_file(tmp_path, "Answer briefly."))  # fmt: skip
    assert code == 1
    assert summary["diverged_samples"] == 94
    assert summary["by_component"] == {"system": 94}
    # the first 20 listed, and how many there are (cut to 20 without a word, before)
    assert (len(summary["divergences"]), summary["divergences_total"]) == (20, 94)
    assert summary["already_replayed"] is False
    rows = sql(root, "select distinct turn, component, path, replayed from divergences "
               "where run_id = 'prompt'")  # fmt: skip
    assert rows == [{"turn": 0, "component": "system", "path": "system",
                     "replayed": '"Answer briefly."'}]  # fmt: skip
    statuses = sql(root, "select status, count(*) as n from samples where run_id = 'prompt' "
                   "group by 1")  # fmt: skip
    assert statuses == [{"status": "diverged", "n": 94}]
    allowed = cli("replay", PARENT, "--run-id", "prompt", "--system-prompt",
                  prompt_file(tmp_path, "Answer briefly."), "--allow-divergence", "--quiet",
                  "--store", root)  # fmt: skip
    assert allowed.exit_code == 0, allowed.output  # the same command: the run is complete
    again = replay(root, "--run-id", "prompt", "--system-prompt",
                   prompt_file(tmp_path, "Answer briefly."), "--allow-divergence")[1]  # fmt: skip
    assert again["already_replayed"] is True and again["divergences_total"] == 94


def test_an_empty_system_prompt_diverges_too(root, tmp_path):
    """An agent given an empty prompt sends no system message: that is not the recording's
    prompt (a request without one was taken for the run's prompt, and matched)."""
    code, summary = replay(root, "--run-id", "no-prompt", "--limit", 3, "--system-prompt",
                           prompt_file(tmp_path, ""))  # fmt: skip
    assert code == 1
    assert summary["by_component"] == {"system": 3}
    rows = sql(root, "select distinct component, replayed from divergences "
               "where run_id = 'no-prompt'")  # fmt: skip
    assert rows == [{"component": "system", "replayed": '""'}]


def test_a_changed_tool_schema_names_the_tool_and_the_parameter(root):
    code, summary = replay(root, "--run-id", "schema", "--tools", "replay_fixtures:SCHEMA",
                           "--limit", 10)  # fmt: skip
    assert code == 1
    first = summary["divergences"][0]
    assert (first["turn"], first["component"]) == (0, "tools")
    assert first["path"] == "tools.add_numbers.parameters.b.type"
    assert (first["recorded"], first["replayed"]) == ('"number"', '"integer"')


def test_a_changed_tool_drifts_on_exactly_the_samples_that_call_it(root):
    code, summary = replay(root, "--run-id", "drift", "--tools", "replay_fixtures:DRIFTED",
                           "--limit", 40)  # fmt: skip
    assert code == 1
    replayed = {r["sample_id"] for r in sql(root, "select sample_id from samples "
                                              "where run_id = 'drift'")}  # fmt: skip
    assert len(replayed) == 40
    rows = sql(root, "select sample_id, component, path from divergences where run_id = 'drift'")
    assert {r["sample_id"] for r in rows} == samples_calling(root, "add_numbers") & replayed
    assert rows
    assert {r["component"] for r in rows} == {"tool_output"}
    assert all(r["path"].endswith(".content.result") for r in rows)
    assert summary["tool_outputs_drifted"] == summary["tool_outputs"]["drift"] > 0


def test_a_tool_changed_under_the_same_name_is_a_replay_of_its_own(root, tmp_path, monkeypatch):
    """The default run id hashes the tools' code: a tool edited in place was reported as the
    earlier replay's result (0 diverged, exit 0) by the same command."""
    module = tmp_path / "edited_tools.py"
    source = (
        "from tcbreplay._inputs.benchmarks.tool_call.tools import add_numbers, list_items, "
        "multiply_numbers\nTOOLS = [list_items, add_numbers, multiply_numbers]\n"
    )
    module.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["--tools", "edited_tools:TOOLS", "--sample-id", "mul-7-by-8"]
    first = cli("replay", PARENT, *args, "--store", root)
    assert first.exit_code == 0, first.output
    again = cli("replay", PARENT, *args, "--store", root)
    assert again.exit_code == 0, again.output
    run_id = first.stdout.split()[1]
    assert again.stdout.split()[1] == run_id
    assert f"(already replayed: {run_id} holds every sample" in again.stdout
    assert "already" not in first.stdout
    module.write_text(source + "# edited\n")
    edited = cli("replay", PARENT, *args, "--store", root)
    assert edited.exit_code == 0, edited.output
    assert edited.stdout.split()[1] != run_id and "already" not in edited.stdout


def test_recorded_tools_serve_the_recorded_outputs_and_nothing_drifts(root):
    calling = sorted(samples_calling(root, "add_numbers"))[:12]
    code, summary = replay(
        root,
        "--run-id",
        "served",
        "--tools",
        "replay_fixtures:DRIFTED",
        "--recorded-tools",
        *(a for s in calling for a in ("--sample-id", s)),
    )
    assert code == 0, summary
    assert summary["diverged_samples"] == summary["tool_outputs_drifted"] == 0
    assert summary["tool_outputs_compared"] == 0  # served, not run
    manifest = json.loads((root / "served" / "manifest.json").read_text())
    assert manifest["replay"]["tool_outputs_served"] > 0
    assert calls(root, "served") == [c for c in calls(root, PARENT) if c[0] in calling]


def test_an_output_that_changes_only_its_form_is_cosmetic_and_no_divergence(root):
    code, summary = replay(root, "--run-id", "cosmetic", "--tools", "replay_fixtures:COSMETIC",
                           "--sample-id", "mul-7-by-8", "--sample-id", "mul-0.2-0.3")  # fmt: skip
    assert code == 0, summary
    # 7 x 8 = 56, now "56" where it was "56.0"; 0.3 x 0.2 as before
    assert summary["tool_outputs"] == {"cosmetic": 1, "same": 1}


def test_bad_input_exits_2(root, unchanged, tmp_path):
    assert cli("replay", "nope", "--store", root).exit_code == 2
    forked = cli("replay", PARENT, "--fork-at", 1, "--store", root)
    assert forked.exit_code == 2
    assert "--fork-at 1: needs --then MODEL" in forked.output
    # --offline without --then was taken in silence (and changed the replay's run id)
    offline = cli("replay", PARENT, "--offline", "--store", root)
    assert offline.exit_code == 2
    assert offline.stderr.splitlines()[0] == (
        "Error: --offline: refuses the --then model's calls; give --then MODEL"
    )
    resumed = cli("record", "--resume", "same", "--store", root)
    assert resumed.exit_code == 2
    assert "is a replay" in resumed.output and "tcbreplay replay sim-seed7" in resumed.output
    before = sorted(p.name for p in root.iterdir())
    keys = ("openai:gpt-4o?api_key=sk-proj-0123456789abcdef", "sim:seed=4,apiKey=0123456789ab")
    for then in keys:
        secret = cli("replay", PARENT, "--then", then, "--limit", 1, "--store", root)
        assert secret.exit_code == 2, secret.output
        assert "Error: --then: the model string has a setting" in secret.output
        assert then.rpartition("=")[2] not in secret.output
    named = cli("replay", PARENT, "--then", "bogus:model", "--limit", 1, "--store", root)
    assert named.exit_code == 2 and "Error: --then bogus:model: " in named.output
    unused = cli("replay", PARENT, "--model-option", "temperature=0", "--store", root)
    assert unused.exit_code == 2, unused.output
    assert "Error: --model-option temperature: sets the --then model" in unused.output
    failing = cli("replay", PARENT, "--agent", "replay_fixtures:failing_factory", "--limit", 1,
                  "--store", root)  # fmt: skip
    assert failing.exit_code == 2 and "the factory failed: ValueError: boom" in failing.output
    assert sorted(p.name for p in root.iterdir()) == before


def test_a_run_killed_before_its_first_fold_says_how_to_finish_it(tmp_path):
    """Its finished samples wait in the journal: replay and serve say so, and how to finish
    the run (they said only that it held no samples)."""
    import pyarrow.parquet as pq

    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=3,latency=0", "--run-id", "cut", "--limit", 3,
               "--quiet", "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output
    run = store / "cut"
    rows = pq.read_table(run / "samples.parquet").to_pylist()
    (run / "journal.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    for name in ("samples.parquet", "messages.parquet"):
        (run / name).unlink()
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    for command in ("replay", "serve"):
        result = cli(command, "cut", "--store", store)
        assert result.exit_code == 1, result.output
        assert result.output.splitlines() == [
            "Error: run 'cut' has no stored samples to replay (status interrupted): 3 finished "
            "samples in its journal, not yet folded into its Parquet files",
            f"Hint: finish it with: tcbreplay record --resume cut --store {store} --limit 3",
        ]


def test_a_damaged_parent_is_refused_before_the_replay_is_made(tmp_path):
    """A parent whose messages.parquet was damaged since it was written made a replay run
    that failed at its first sample, left in the store (status failed, no samples), as
    serve refuses the same parent at once: refused, the store as it was."""
    import pyarrow.parquet as pq

    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=3,latency=0", "--run-id", "p", "--limit", 3,
               "--quiet", "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output
    path = store / "p" / "messages.parquet"
    column = pq.ParquetFile(path).schema_arrow.get_field_index("message")
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(column)
    data = bytearray(path.read_bytes())
    # the zstd frame of the texts' first page, its magic number broken (the size kept)
    frame = data.index(b"\x28\xb5\x2f\xfd", chunk.data_page_offset)
    data[frame : frame + 4] = b"\xff" * 4
    path.write_bytes(bytes(data))
    with pytest.raises(OSError):  # (damaged indeed)
        pq.read_table(path)
    result = cli("replay", "p", "--run-id", "r", "--store", store)
    assert result.exit_code == 1, result.output
    assert sorted(p.name for p in store.iterdir()) == ["p"]
    assert result.output.splitlines()[0] == (
        f"Error: {path}: not the file the run wrote (its sha256 is not the one manifest.json "
        "recorded): it was changed or replaced since; restore it, or record the run again "
        "with --overwrite"
    )


def test_a_parent_whose_dataset_file_was_changed_is_refused(tmp_path):
    """A parent's dataset.jsonl edited since the run wrote it (a gold call changed) gave the
    replay other gold calls than the parent's, without a word."""
    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=3,latency=0", "--run-id", "p", "--limit", 3,
               "--quiet", "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output
    path = store / "p" / "dataset.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    entries[0]["target"] = [{"name": "list_items", "args": {}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = cli("replay", "p", "--run-id", "r", "--store", store)
    assert result.exit_code == 1, result.output
    assert sorted(p.name for p in store.iterdir()) == ["p"]
    assert result.output.splitlines()[0].startswith(
        f"Error: {path}: not the file the run wrote (its sha256 is not the one manifest.json"
    )


# ---------------------------------------------------------------- forks


@pytest.mark.slow  # (a few seconds under the suite's load: make test's budget)
def test_a_replay_of_a_partial_run_says_where_the_rest_comes_from(tmp_path):
    """score said to 'replay the rest with' the command that made the replay, which does
    nothing more: the replay holds every sample its partial parent holds."""
    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=1", "--limit", 4, "--run-id", "p",
               "--store", store, "--quiet")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert cli("replay", "p", "--run-id", "r0", "--store", store, "--quiet").exit_code == 0
    scored = cli("score", "r0", "--store", store)
    assert scored.exit_code == 0, scored.output
    said = ("the metrics cover only those (its parent p holds no more: record the rest of it "
            f"with: tcbreplay record --resume p --store {store}, then replay again)")  # fmt: skip
    assert said in scored.stdout


def test_a_run_recorded_in_part_replays_the_samples_it_holds(tmp_path):
    """A shard's run (as an interrupted one, an import of some traces) holds some of the
    dataset's samples: the others were replayed with nothing to serve, all 'diverged'."""
    store = tmp_path / "traces"
    shard = cli("record", "--model", "sim:seed=1", "--limit", 10, "--shard", "1/2",
                "--run-id", "sh", "--store", store, "--quiet")  # fmt: skip
    assert shard.exit_code == 0, shard.output
    result = cli("replay", "sh", "--store", store, "--quiet", "--format", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["recorded"], summary["diverged_samples"], summary["ok"]) == (5, 0, 5)
    # (of the 10 its recording asked for: the other 84 were not asked for)
    said = "Warning: run 'sh' holds no recording of 5 of the 10 samples its recording asked for"
    assert said in result.stderr
    held = {r["sample_id"] for r in sql(store, "select sample_id from samples where run_id = 'sh'")}
    assert len(held) == 5
    dataset = (store / "sh" / "dataset.jsonl").read_text().splitlines()
    missing = next(json.loads(line)["id"] for line in dataset if json.loads(line)["id"] not in held)
    refused = cli("replay", "sh", "--store", store, "--sample-id", missing)
    assert refused.exit_code == 2
    assert f"--sample-id {missing!r}: run 'sh' holds no recording of it" in refused.output


def test_a_failed_limit_run_warns_only_of_the_samples_it_was_asked_for(tmp_path):
    """A --limit run that failed (status failed, not partial) was warned of as lacking the 91
    of the dataset's samples it was never asked for: its manifest's selection decides."""
    store = tmp_path / "traces"
    failed = cli("record", "--model", "sim:seed=1,fault_rate=1", "--limit", 3, "--retries", 0,
                 "--max-errors", "100%", "--run-id", "f3", "--store", store, "--quiet")  # fmt: skip
    assert failed.exit_code == 1, failed.output
    assert json.loads((store / "f3" / "manifest.json").read_text())["status"] == "failed"
    result = cli("replay", "f3", "--store", store, "--quiet", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["recorded"] == 3
    assert "Warning" not in result.stderr
    # one stopped at its first sample (one worker), before it recorded all it was asked for:
    # warned of those it lacks
    stopped = cli("record", "--model", "sim:seed=1,fault_rate=1", "--limit", 10, "--retries", 0,
                  "--max-errors", "100%", "--workers", 1, "--run-id", "f10", "--store", store,
                  "--quiet")  # fmt: skip
    assert stopped.exit_code == 1, stopped.output
    result = cli("replay", "f10", "--store", store, "--quiet", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["recorded"] == 1
    assert ("Warning: run 'f10' holds no recording of 9 of the 10 samples its recording asked "
            "for") in result.stderr  # fmt: skip


def test_a_sample_recorded_in_error_ends_in_its_error_and_is_no_change(tmp_path):
    """A sample whose recording ended in error has no answer where it ended: the replay
    reported a 'messages' divergence there (exit 1) for an unchanged agent."""
    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=5,fault_rate=0.4", "--limit", 12, "--retries", 0,
               "--max-errors", "100%", "--run-id", "flt", "--store", store, "--quiet")  # fmt: skip
    assert made.exit_code == 0, made.output
    query = "select sample_id, status, error_type, error from samples where run_id = "
    parent = {r["sample_id"]: r for r in sql(store, query + "'flt'")}
    errors = {sid for sid, r in parent.items() if r["status"] == "error"}
    assert 0 < len(errors) < 12
    result = cli("replay", "flt", "--run-id", "again", "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["diverged_samples"] == 0
    assert summary["recorded_errors"] == summary["errors"] == len(errors)
    rows = sql(store, query + "'again'")
    assert {r["sample_id"]: r for r in rows} == parent  # each error as its recording's
    # with --then, such a sample goes on live where its recording ended: no divergence (it
    # reported one at a path the parent holds, recorded null, exit 1)
    result = cli("replay", "flt", "--run-id", "then", "--then", "sim:seed=7", "--store", store,
                 "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["diverged_samples"], summary["recorded_errors"]) == (0, 0)
    assert not sql(store, "select * from divergences where run_id = 'then'")
    went_on = {r["sample_id"] for r in sql(store, query + "'then'") if r["status"] == "ok"}
    assert errors <= went_on  # each went on live, and ended


def test_a_changed_request_where_the_recording_failed_is_a_divergence(tmp_path):
    """Only the very request a recording failed at gets its recorded error: a replay whose
    prompt changed, or whose tool output drifted right before the failure, was told "no
    change" for such samples (exit 0, no divergence) however the request had changed."""
    store = tmp_path / "traces"
    # (8 workers: the first wave holds a sample answered, and the recording goes on)
    made = cli("record", "--model", "sim:seed=7,fault_rate=0.5", "--limit", 20, "--retries", 0,
               "--max-errors", "100%", "--workers", 8, "--processes", 1, "--run-id", "flt",
               "--store", store, "--quiet")  # fmt: skip
    assert made.exit_code == 0, made.output
    errors = {r["sample_id"] for r in sql(store, "select sample_id from samples where "
                                          "run_id = 'flt' and status = 'error'")}  # fmt: skip
    assert errors
    prompt = prompt_file(tmp_path, "Reply in French.")
    result = cli("replay", "flt", "--run-id", "prompt", "--system-prompt", prompt, "--store",
                 store, "--format", "json")  # fmt: skip
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert (summary["diverged_samples"], summary["recorded_errors"]) == (20, 0)
    rows = sql(store, "select sample_id, turn, component, replayed from divergences "
               "where run_id = 'prompt'")  # fmt: skip
    failed = [r for r in rows if r["sample_id"] in errors]
    assert len(failed) == len(errors)
    # said against the request the recording failed at: its system prompt differs
    assert all((r["component"], r["replayed"]) == ("system", '"Reply in French."')
               for r in failed)  # fmt: skip
    # a tool output that drifted right before the recorded failure
    result = cli("replay", "flt", "--run-id", "drift", "--tools", "replay_fixtures:DRIFTED",
                 "--store", store, "--format", "json")  # fmt: skip
    assert result.exit_code == 1, result.output
    rows = sql(store, "select sample_id, turn, component, path from divergences "
               "where run_id = 'drift'")  # fmt: skip
    assert rows and all(r["sample_id"] in errors for r in rows)
    assert {(r["component"], r["path"]) for r in rows} == {
        ("tool_output", "messages[2].content.result")
    }
    drifted = {r["sample_id"] for r in rows}
    summary = json.loads(result.stdout)
    assert summary["recorded_errors"] == len(errors - drifted)


def test_a_trial_the_parent_lacks_is_not_replayed_and_no_divergence(tmp_path):
    """An import may hold some trials of a sample (a trace file without one of them): that
    trial was replayed with nothing to serve, a divergence, exit 1."""
    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=3", "--limit", 4, "--trials", 2, "--run-id", "tr",
               "--store", store, "--quiet")  # fmt: skip
    assert made.exit_code == 0, made.output
    out = tmp_path / "ex"
    assert cli("export", "tr", "-o", out, "--format", "openai", "--store", store).exit_code == 0
    seven = tmp_path / "seven.jsonl"
    seven.write_text("".join((out / "traces.jsonl").read_text().splitlines(True)[:7]))
    imported = cli("import", "--format", "openai", "--traces", seven, "--dataset",
                   out / "dataset.jsonl", "--tools", out / "tools.json", "--run-id", "seven",
                   "--store", store)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    result = cli("replay", "seven", "--run-id", "again", "--recorded-tools", "--store", store)
    assert result.exit_code == 0, result.output
    assert "0 trials diverged, 7 trials ok" in result.stdout
    assert "1 trial not replayed: seven holds no recording of it" in result.stdout
    lacking = sql(store, "select sample_id, trial from samples where run_id = 'seven' and "
                         "status = 'missing'")  # fmt: skip
    assert sql(store, "select sample_id, trial from samples where run_id = 'again' and "
                      "status = 'missing'") == lacking  # fmt: skip
    assert len(lacking) == 1


def test_then_goes_on_live_where_a_sample_diverges(root, tmp_path):
    code, summary = replay(root, "--run-id", "then", "--limit", 12, "--then", "sim:seed=11",
                           "--system-prompt", prompt_file(tmp_path, "Be brief."))  # fmt: skip
    assert code == 1  # the samples diverged, and went on
    assert summary["diverged_samples"] == 12 == summary["ok"]
    assert summary["live_calls"] >= 12 and summary["turns_served"] == 0
    manifest = json.loads((root / "then" / "manifest.json").read_text())
    assert manifest["replay"]["fork"] == {"rule": "then", "model": "sim:seed=11", "turn": None}
    scored = cli("score", "then", "--gold-run", PARENT, "--allow-incomplete", "--store", root)
    assert scored.exit_code == 0, scored.output
    verified = cli("audit", "verify", "then", "--store", root)  # live calls, with a fork rule
    assert verified.exit_code == 0, verified.output


def test_fork_at_forks_every_sample_at_that_turn(root):
    code, summary = replay(root, "--run-id", "fork", "--fork-at", 1, "--then", "sim:seed=11",
                           "--model-option", "error_rate=1", "--limit", 40)  # fmt: skip
    assert code == 0, summary  # a fork is no divergence
    rows = sql(root, "select s.sample_id, metadata->'replay'->>'forked_at' as forked, "
               "json_array_length(metadata->'replay'->'served') as served, p.turns from samples s "
               f"join (select sample_id, count(*) as turns from messages where run_id = '{PARENT}' "
               "and type = 'ai' group by 1) p using (sample_id) where run_id = 'fork'")  # fmt: skip
    # every sample's turn 0 is its recording's; each one that asks for a turn 1 forks there
    assert {r["served"] for r in rows} == {1}
    assert {r["sample_id"] for r in rows if r["forked"] == "1"} == {
        r["sample_id"] for r in rows if r["turns"] > 1
    }
    assert {r["forked"] for r in rows if r["turns"] == 1} == {None}
    assert summary["live_calls"] > sum(r["turns"] > 1 for r in rows) > 20
    assert summary["forked_samples"] == sum(r["turns"] > 1 for r in rows)
    # the table says it too (only the manifest and --format json did)
    shown = cli("replay", PARENT, "--run-id", "fork", "--fork-at", 1, "--then", "sim:seed=11",
                "--model-option", "error_rate=1", "--limit", 40, "--store", root)  # fmt: skip
    said = f"{summary['forked_samples']} samples went on with the --then model at the --fork-at"
    assert said in shown.stdout, shown.output
    manifest = json.loads((root / "fork" / "manifest.json").read_text())
    assert manifest["replay"]["fork"] == {"rule": "fork-at", "model": "sim:seed=11", "turn": 1}
    result = cli("score", "fork", "--gold-run", PARENT, "--format", "json", "--store", root)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["scoring"] == "spec_gold-sim-seed7" and summary["tp"] < 1.0
    command = json.loads((root / "fork" / "manifest.json").read_text())["replay"]["command"]
    assert summary["warnings"] == [
        "partial run: 40 of 94 samples recorded; the metrics cover only those (replay the "
        f"rest with: {command})"
    ]
    assert cli("diff", PARENT, "fork", "--store", root).exit_code in (0, 1)


def test_a_fork_at_no_sample_reaches_says_so(root):
    far = cli("replay", PARENT, "--run-id", "far", "--limit", 2, "--fork-at", 1000, "--then",
              "sim:seed=11", "--format", "json", "--store", root)  # fmt: skip
    assert far.exit_code == 0, far.output
    assert "Warning: --fork-at 1000: no sample reached turn 1000, so none was forked" in far.stderr
    assert json.loads(far.stdout)["forked_samples"] == 0


def test_offline_refuses_a_live_call_at_once(root):
    code, summary = replay(root, "--run-id", "offline", "--fork-at", 0, "--then", "sim:seed=11",
                           "--offline", "--limit", 5)  # fmt: skip
    assert code == 1
    assert summary["error_types"] == {"LiveCallRefused": 5}
    assert summary["live_calls"] == 0
    assert (summary["forked_samples"], summary["offline"]) == (5, True)
    # the summary said "5 samples went on with the --then model" beside 0 live calls
    table = cli("replay", PARENT, "--run-id", "offline", "--fork-at", 0, "--then",
                "sim:seed=11", "--offline", "--limit", 5, "--quiet", "--store", root)  # fmt: skip
    assert table.exit_code == 1, table.output
    assert "went on" not in table.stdout
    assert ("5 samples reached the --fork-at turn, where --offline refused their call to the "
            "--then model (LiveCallRefused)") in table.stdout  # fmt: skip


# ---------------------------------------------------------------- an agent of one's own


def test_a_langgraph_graph_of_ones_own_records_and_replays(tmp_path):
    store = Store(tmp_path / "traces")
    result = cli("record", "--model", "sim:seed=3", "--agent", "replay_fixtures:react_graph",
                 "--run-id", "mine", "--limit", 12, "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    manifest = json.loads((store.root / "mine" / "manifest.json").read_text())
    assert manifest["agent"]["factory"] == "replay_fixtures:react_graph"
    summary = replay_run(store, "mine", new_run_id="mine-again")  # the run's own agent
    assert (summary.diverged_samples, summary.live_calls, summary.ok) == (0, 0, 12)
    assert summary.turns_served > 12
    # it asks what the built-in agent asks: a built-in recording replays through it too
    result = cli("record", "--model", "sim:seed=3", "--run-id", "builtin", "--limit", 12,
                 "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    through = replay_run(store, "builtin", new_run_id="through",
                         agent="replay_fixtures:react_graph")  # fmt: skip
    assert (through.diverged_samples, through.turns_served) == (0, summary.turns_served)
    bad = cli("replay", "mine", "--agent", "replay_fixtures:DRIFTED", "--store", store.root)
    assert bad.exit_code == 2
    assert "--agent replay_fixtures:DRIFTED: DRIFTED is list, not callable" in bad.output


def graph_run(tmp_path: Path, limit: int) -> Store:
    """A store of run 'mine': ``limit`` samples recorded through a LangGraph graph of one's own."""
    store = Store(tmp_path / "traces")
    agent = "replay_fixtures:react_graph"
    result = cli("record", "--model", "sim:seed=3", "--agent", agent, "--run-id", "mine",
                 "--limit", limit, "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    return store


def test_an_agent_that_drops_its_prompt_diverges_on_system(tmp_path):
    """A request that began with no system message was given the prompt the replaying agent
    was given: an agent that drops it replayed a recording that was sent it "unchanged"."""
    store = Store(tmp_path / "traces")
    result = cli("record", "--model", "sim:seed=3", "--run-id", "builtin", "--limit", 3,
                 "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = replay_run(store, "builtin", new_run_id="dropped",
                         agent="replay_fixtures:drops_prompt")  # fmt: skip
    assert summary.diverged_samples == 3
    rows = sql(store.root, "select distinct turn, component, replayed from divergences "
               "where run_id = 'dropped'")  # fmt: skip
    assert rows == [{"turn": 0, "component": "system", "replayed": '""'}]


@pytest.mark.slow  # (a recording and three replays of it, each agent: 2-3 s)
@pytest.mark.parametrize("agent", ["own_prompt", "drops_prompt", "prompt_per_turn"])
def test_what_an_agent_of_ones_own_sent_is_kept_and_replays_unchanged(tmp_path, agent):
    """The stored messages do not say what system messages an agent of one's own began its
    requests with: the recording took them for the run's prompt, and the agent's own replay
    diverged at turn 0 (or, with no system message, matched only as any prompt-dropper did)."""
    store = Store(tmp_path / "traces")
    agent = f"replay_fixtures:{agent}"
    chosen = ["hi-there", "subtract-twice", "ten-minus-then-scale", "product-2-to-6"]
    result = cli("record", "--model", "sim:seed=3", "--agent", agent, "--run-id", "mine",
                 *(f"--sample-id={name}" for name in chosen), "--quiet",
                 "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    manifest = json.loads((store.root / "mine" / "manifest.json").read_text())
    assert manifest["agent"]["system_kept"] is True
    kept = sql(store.root, "select sample_id, s.metadata ->> '$.tcbreplay_system' as sent, "
               "count(*) as answers from samples s join messages m "
               "using (run_id, sample_id, trial) where run_id = 'mine' and m.type = 'ai' "
               "group by all")  # fmt: skip
    assert sorted(row["answers"] for row in kept) == [1, 3, 4, 4]
    for row in kept:  # a list per answered call: the ones before each stored answer
        sent = json.loads(row["sent"])
        assert len(sent) == row["answers"]
        if agent.endswith("drops_prompt"):
            assert set(map(json.dumps, sent)) == {"[]"}
        elif agent.endswith("own_prompt"):
            assert set(map(json.dumps, sent)) == {'["You are a careful calculator."]'}
        else:
            assert len(set(map(json.dumps, sent))) == len(sent)
    summary = replay_run(store, "mine", new_run_id="again")  # the run's own agent
    assert (summary.diverged_samples, summary.live_calls, summary.ok) == (0, 0, 4)
    # an agent that sends the prompt, as the built-in one does: not what this one sent
    sends = replay_run(store, "mine", new_run_id="sends", agent="replay_fixtures:react_graph")
    assert sends.diverged_samples == 4
    first = sql(store.root, "select distinct turn, component from divergences "
                "where run_id = 'sends'")  # fmt: skip
    assert first == [{"turn": 0, "component": "system"}]


@pytest.mark.slow  # (a recording and its replay: 2 s)
def test_a_run_of_ones_own_agent_from_before_is_taken_to_have_been_sent_its_prompt(tmp_path):
    """A run recorded by an agent of one's own before runs kept what their requests began
    with: its samples are taken to have been sent the prompt, as before (a request that
    begins with none is given the prompt the replaying agent was given)."""
    store = graph_run(tmp_path, 3)
    path = store.root / "mine" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["agent"]["system_kept"]
    path.write_text(json.dumps(manifest))
    summary = replay_run(store, "mine", new_run_id="again", agent="replay_fixtures:drops_prompt")
    assert (summary.diverged_samples, summary.ok) == (0, 3)


@pytest.mark.slow  # (a recording of its own, then its replay: 3-4 s)
def test_an_agent_that_asks_a_turn_twice_then_stops_diverges_where_it_stopped(tmp_path):
    """Answers served were counted, not turns asked for: an agent that asked its first turn
    twice and stopped had as many as a recording of two turns, and was no change."""
    store = graph_run(tmp_path, 12)
    query = ("select sample_id, count(*) n from messages where run_id = 'mine' and type = 'ai' "
             "group by sample_id")  # fmt: skip
    turns = {row["sample_id"]: row["n"] for row in sql(store.root, query)}
    longer = sorted(sid for sid, n in turns.items() if n > 1)
    assert longer and len(longer) < 12  # (some samples answer in one turn)
    summary = replay_run(store, "mine", new_run_id="twice",
                         agent="replay_fixtures:asks_twice_then_stops")  # fmt: skip
    rows = sql(store.root, "select sample_id, status from samples where run_id = 'twice'")
    assert sorted(r["sample_id"] for r in rows if r["status"] == "diverged") == longer
    at = sql(store.root, "select distinct turn from divergences where run_id = 'twice'")
    assert at == [{"turn": 1}]
    assert summary.diverged_samples == len(longer)


@pytest.mark.slow  # (a recording of its own, then its replay: 3-4 s)
def test_an_agent_that_forbids_the_recorded_calls_diverges_on_tool_choice(tmp_path):
    """tool_choice is in no fingerprint: an agent bound with tool_choice="none" was served
    every recorded tool call (0 diverged, exit 0)."""
    store = graph_run(tmp_path, 16)
    query = ("select sample_id, message from messages where run_id = 'mine' and type = 'ai' "
             "order by sample_id, position")  # fmt: skip
    first: dict[str, dict] = {}
    for row in sql(store.root, query):
        first.setdefault(row["sample_id"], json.loads(row["message"]))
    calling = sorted(sid for sid, m in first.items() if m["data"].get("tool_calls"))
    assert calling
    summary = replay_run(store, "mine", new_run_id="none",
                         agent="replay_fixtures:forbids_tools")  # fmt: skip
    assert summary.diverged_samples == len(calling)
    rows = sql(store.root, "select sample_id, component, path, replayed from divergences "
               "where run_id = 'none' order by sample_id")  # fmt: skip
    assert [r["sample_id"] for r in rows] == calling
    assert {(r["component"], r["path"], r["replayed"]) for r in rows} == {
        ("params", "params.tool_choice", '"none"')}  # fmt: skip


@pytest.mark.slow  # (a recording of its own, then its replay: 3-4 s)
def test_an_agent_that_binds_tool_choice_replays_its_own_recording_unchanged(tmp_path):
    """The sim answered as if no tool_choice were bound, so a recording of an agent bound
    with tool_choice="none" held calls, and its own replay diverged on every sample."""
    store = Store(tmp_path / "traces")
    result = cli("record", "--model", "sim:seed=3", "--agent", "replay_fixtures:forbids_tools",
                 "--run-id", "none", "--limit", 8, "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    calls = sql(store.root, "select count(*) n from messages where run_id = 'none' "
                "and type = 'ai' and calls <> '[]'")  # fmt: skip
    assert calls == [{"n": 0}]
    summary = replay_run(store, "none", new_run_id="again",
                         agent="replay_fixtures:forbids_tools")  # fmt: skip
    assert summary.diverged_samples == 0
    rows = sql(
        store.root, "select count(*) n from samples where run_id = 'again' and status = 'ok'"
    )
    assert rows == [{"n": 8}]


@pytest.mark.slow  # (a recording of its own, then its replay: 3-4 s)
def test_the_live_model_of_then_is_asked_with_the_calls_own_settings(tmp_path):
    """An agent asking each call with tool_choice="none" (not bound with it) diverged, and
    the live model --then names was asked without it: its answers called tools."""
    store = graph_run(tmp_path, 8)
    summary = replay_run(store, "mine", new_run_id="live", then="sim:seed=3",
                         agent="replay_fixtures:forbids_tools_per_call")  # fmt: skip
    assert summary.live_calls > 0
    calls = sql(store.root, "select count(*) n from messages where run_id = 'live' "
                "and type = 'ai' and calls <> '[]'")  # fmt: skip
    assert calls == [{"n": 0}]


@pytest.mark.slow  # (a recording of its own, then its replay: 3-4 s)
def test_an_agent_failing_itself_where_its_recording_did_is_no_change(tmp_path):
    """A recording whose samples ended in the agent's own error (the graph's recursion
    limit) replayed unchanged: every turn served, then the same error, reported as a
    failure (status failed, no recorded error counted) rather than as the recording's."""
    store = Store(tmp_path / "traces")
    agent = "replay_fixtures:requires_a_call"
    result = cli("record", "--model", "sim:seed=3", "--agent", agent, "--run-id", "loop",
                 "--limit", 3, "--max-errors", "1.0", "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    errors = sql(store.root, "select distinct error_type from samples where run_id = 'loop'")
    assert errors == [{"error_type": "GraphRecursionError"}]
    summary = replay_run(store, "loop", new_run_id="again", agent=agent)
    assert (summary.diverged_samples, summary.recorded_errors) == (0, 3)


# ---------------------------------------------------------------- imported runs


def test_an_imported_tau_bench_run_replays_up_to_its_second_user_message(tmp_path):
    from helpers import import_tau_bench

    root = import_tau_bench(tmp_path / "traces")
    without = cli("replay", "tau", "--store", root)
    assert without.exit_code == 2
    assert "--recorded-tools" in without.output  # its tools are JSON schemas
    result = cli("replay", "tau", "--run-id", "t", "--recorded-tools", "--quiet", "--format",
                 "json", "--store", root)  # fmt: skip
    summary = json.loads(result.stdout)
    # every trial's first request (system prompt, first user message, tools) is the recorded one
    assert summary["turns_served"] >= summary["recorded"] == 20
    # then its user simulator speaks again, which an agent cannot
    assert summary["awaiting_user"] == summary["diverged_samples"] == 20
    rows = sql(root, "select distinct component, replayed from divergences")
    assert rows == [{"component": "messages", "replayed": None}]


# ---------------------------------------------------------------- the library


def test_the_recorded_model_answers_in_ones_own_graph_and_test(root):
    """In place of the recorded model, outside the replay runner: any sample's turn answers a
    request that matches it; one that matches none says where it differs."""
    import asyncio

    from langchain_core.messages import HumanMessage, SystemMessage

    import tcbreplay
    from tcbreplay._inputs.benchmarks import load_inputs
    from tcbreplay.errors import DivergenceError

    inputs = load_inputs("tool-call")
    model = tcbreplay.RecordedChatModel.from_run(PARENT, root).bind_tools(inputs.toolset.tools)
    system = SystemMessage(inputs.system_prompt)
    answer = model.invoke([system, HumanMessage("Multiply 7 by 8 for me.")])
    assert [c["name"] for c in answer.tool_calls] == ["multiply_numbers"]
    assert answer.id == "sim-mul-7-by-8-0"  # the recorded message itself
    again = asyncio.run(model.ainvoke([system, HumanMessage("Multiply 7 by 8 for me.")]))
    assert again.tool_calls == answer.tool_calls
    with pytest.raises(DivergenceError) as caught:
        model.invoke([system, HumanMessage("Multiply 7 by 9 for me.")])
    divergence = caught.value.divergence
    assert (divergence.turn, divergence.component) == (0, "messages")
    assert divergence.path == "messages[0].content"
    assert json.loads(divergence.replayed) == "Multiply 7 by 9 for me."


def test_replay_run_is_the_librarys(root):
    import tcbreplay

    summary = tcbreplay.replay_run(Store(root), PARENT, new_run_id="lib", limit=3,
                                   recorded_tools=True)  # fmt: skip
    assert isinstance(summary, tcbreplay.ReplaySummary)
    assert (summary.recorded, summary.diverged_samples, summary.parent_run_id) == (3, 0, PARENT)
    assert summary.status == "partial"
    # the same call again goes on where it stopped (the run is resumed, not made anew); the
    # store given by its path, as serve_run and from_run take it (an AttributeError: 'str'
    # object has no attribute 'open_run')
    more = tcbreplay.replay_run(str(root), PARENT, new_run_id="lib", limit=5,
                                recorded_tools=True)  # fmt: skip
    assert (more.recorded, more.attempted, more.status) == (5, 2, "partial")
    again = tcbreplay.replay_run(root, PARENT, new_run_id="lib", limit=5, recorded_tools=True)
    assert (again.recorded, again.attempted) == (5, 0)
    other = cli("replay", PARENT, "--run-id", "lib", "--store", root)  # other options
    assert other.exit_code == 2
    assert "exists with other inputs" in other.output


def test_a_scoring_against_another_run_is_named_for_it():
    from tcbreplay._score.options import ScoreOptions
    from tcbreplay.errors import InputError

    options = ScoreOptions(gold_run="parent-1", without=("a_b",))
    assert options.scoring == "spec_without-a_b_gold-parent-1"
    assert ScoreOptions.from_scoring(options.scoring) == options
    assert ScoreOptions.from_dict(options.to_dict()) == options
    assert options.flags()[-2:] == ["--gold-run", "parent-1"]
    assert ScoreOptions.from_scoring("abet_gold-p") == ScoreOptions(scorer="abet", gold_run="p")
    assert "gold_run" not in ScoreOptions().to_dict()  # other scorings' options as before
    with pytest.raises(InputError, match="bfcl"):
        ScoreOptions(scorer="bfcl", gold_run="p")


SHOP = [
    {"id": "add", "input": "What is 2 plus 3?",
     "target": [{"name": "add_numbers", "args": {"a": 3, "b": 2}}]},
    {"id": "items", "input": "How much are 3 notebooks?",
     "target": [{"name": "list_items", "args": {}},
                {"name": "multiply_numbers", "args": {"a": 3, "b": 2.5}}]},
]  # fmt: skip
# the same two conversations as Anthropic's Messages API has them (both with the system
# prompt) and as OpenAI's Chat Completions has them ('items' without it, and with a call
# whose arguments are not JSON)
ANTHROPIC = [
    {"sample_id": "add", "system": "You are a shop.", "messages": [
        {"role": "user", "content": "What is 2 plus 3?"},
        {"role": "assistant", "id": "msg", "content": [
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "t1", "name": "add_numbers", "input": {"a": 3, "b": 2}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": '{"result": 5}'}]},
        {"role": "assistant", "id": "msg", "content": [{"type": "text", "text": "5"}]},
    ]},
    {"sample_id": "items", "messages": [
        {"role": "system", "content": "You are a shop."},
        {"role": "user", "content": [{"type": "text", "text": "How much are 3 notebooks?"}]},
        {"role": "assistant", "id": "msg", "content": [
            {"type": "tool_use", "id": "t1", "name": "list_items", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "multiply_numbers",
             "input": {"a": 3, "b": 2.5}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "[]"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "7.5"}]},
        {"role": "assistant", "id": "msg", "content": [{"type": "text", "text": "7.50"}]},
    ]},
]  # fmt: skip
OPENAI = [
    {"sample_id": "add", "messages": [
        {"role": "system", "content": "You are a shop."},
        {"role": "user", "content": "What is 2 plus 3?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "add_numbers", "arguments": '{"a": 3, "b": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"result": 5}'},
        {"role": "assistant", "content": "5"},
    ]},
    {"sample_id": "items", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "How much are 3 notebooks?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "list_items", "arguments": ""}},
            {"id": "c2", "type": "function",
             "function": {"name": "multiply_numbers", "arguments": '{"a": 3, "b"'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "[]"},
        {"role": "tool", "tool_call_id": "c2", "content": "error: bad arguments"},
        {"role": "assistant", "content": "7.50"},
    ]},
]  # fmt: skip


def test_imported_openai_and_anthropic_runs_replay_with_their_recorded_tools(tmp_path):
    """What a request needs is in the run (the system prompt its messages start with, its
    tools' schemas): each sample replays where its trace holds it, and says what differs
    where not."""
    root = tmp_path / "traces"
    dataset = tmp_path / "shop.json"
    dataset.write_text(json.dumps(SHOP))
    tools = TEST_DATA / "tools_shop.json"
    for run_id, lines in (("an", ANTHROPIC), ("oa", OPENAI)):
        traces = tmp_path / f"{run_id}.jsonl"
        traces.write_text("".join(json.dumps(line) + "\n" for line in lines))
        result = cli("import", "--dataset", dataset, "--tools", tools, "--traces", traces,
                     "--run-id", run_id, "--store", root)  # fmt: skip
        assert result.exit_code == 0, result.output
    an = json.loads(cli("replay", "an", "--run-id", "an2", "--recorded-tools", "--quiet",
                        "--format", "json", "--store", root).stdout)  # fmt: skip
    assert (an["diverged_samples"], an["ok"], an["turns_served"]) == (0, 2, 4)
    assert an["tool_outputs_compared"] == 0
    # every answer of the trace has the id "msg": each is served as its own message
    assert cli("audit", "verify", "an2", "--store", root).exit_code == 0
    oa = json.loads(cli("replay", "oa", "--run-id", "oa2", "--recorded-tools", "--quiet",
                        "--format", "json", "--store", root).stdout)  # fmt: skip
    # 'items' (a call's arguments not JSON among them) replays; 'add' was traced with a
    # system prompt the other was not, and the run's is none
    assert [(d["sample_id"], d["component"]) for d in oa["divergences"]] == [("add", "system")]
    prompt = prompt_file(tmp_path, "You are a shop.")
    oa = json.loads(
        cli(
            "replay",
            "oa",
            "--run-id",
            "oa3",
            "--recorded-tools",
            "--quiet",
            "--system-prompt",
            prompt,
            "--format",
            "json",
            "--store",
            root,
        ).stdout
    )
    assert [(d["sample_id"], d["component"]) for d in oa["divergences"]] == [("items", "system")]


def test_a_replay_in_several_processes_is_the_same(root):
    code, summary = replay(root, "--run-id", "procs", "--processes", 2, "--limit", 16,
                           "--tools", "replay_fixtures:DRIFTED")  # fmt: skip
    assert summary["processes"] == 2
    replayed = {r["sample_id"] for r in sql(root, "select sample_id from samples where "
                                            "run_id = 'procs'")}  # fmt: skip
    got = sql(root, "select sample_id, component from divergences where run_id = 'procs'")
    assert {r["sample_id"] for r in got} == samples_calling(root, "add_numbers") & replayed
    assert {r["component"] for r in got} == {"tool_output"} and code == 1
    assert cli("audit", "verify", "procs", "--store", root).exit_code == 0


def test_each_trial_is_answered_by_its_own_recording(tmp_path):
    """The sim draws its mistakes per trial: each trial's turns answer that trial only."""
    store = Store(tmp_path / "traces")
    result = cli("record", "--model", "sim:seed=5,error_rate=0.5", "--trials", 3, "--limit", 6,
                 "--run-id", "k", "--quiet", "--store", store.root)  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = replay_run(store, "k", new_run_id="k2", options={"workers": 6})
    assert (summary.trials, summary.recorded, summary.diverged_samples) == (3, 18, 0)
    assert calls(store.root, "k2") == calls(store.root, "k")
    by_trial: dict[int, list] = {}
    for sample_id, trial, *call in calls(store.root, "k"):
        by_trial.setdefault(trial, []).append((sample_id, *call))
    # the trials differ: a replay that answered every trial with one trial's turns would not
    # give the parent's calls
    assert len({json.dumps(v) for v in by_trial.values()}) > 1


@pytest.mark.slow
def test_a_replay_stopped_by_its_scheduler_keeps_its_samples_and_exits_143(root, tmp_path):
    # forked at turn 0 onto a slow live model: still going when SIGTERM comes
    store = tmp_path / "traces"
    shutil.copytree(root / PARENT, store / PARENT)
    slow = "sim:seed=11,latency=0.3"
    proc = cli_process("replay", PARENT, "--run-id", "stopped", "--fork-at", "0", "--then", slow,
                       "--workers", "2", "--store", str(store))  # fmt: skip
    wait_for(lambda: journal_lines(store / "stopped") >= 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err  # a scheduler's stop, as a shell reports it
    assert "Interrupted: kept" in err and "Traceback" not in err
    manifest = json.loads((store / "stopped" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
