"""The tau2 dialect (``tcbreplay._importers.tau2``): τ²-bench's results files, which hold the
samples too, and their scores against an independent computation from the raw files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import DATA, TESTS
from helpers import as_the_run_wrote, cli, with_messages
from reference_metrics import score_sample, tp, tsa, values_equal

from tcbreplay._importers import tau2
from tcbreplay._importers.dialect import TraceFile
from tcbreplay.errors import TraceError

TAU2 = DATA / "tau2"
AIRLINE = TAU2 / "gpt-4.1_airline_sample.json"
TELECOM = TAU2 / "gpt-4.1_telecom_sample.json"
# the whole shared sample (20 airline and 40 telecom simulations), where the machine has it
SHARED = TESTS.parent.parent / "shared" / "reference" / "tau2"
SIDES = ("agent", "user", "both")
# τ²'s requestor of an action or a call, as the side of tcbreplay's scoring
REQUESTOR = {"assistant": "agent", "user": "user"}


def read(path: Path, **options: Any):
    return tau2.read(TraceFile(path.name, data=path.read_bytes()), None, **options)


def edited(tmp_path: Path, path: Path, edit) -> Path:
    """A copy of the results file ``path`` changed by ``edit`` (of its parsed object)."""
    doc = json.loads(path.read_text())
    edit(doc)
    out = tmp_path / path.name
    out.write_text(json.dumps(doc))
    return out


# ---------------------------------------------------------------- reading


def test_it_sniffs_a_results_file():
    verdict = tau2.sniff(TraceFile.at(TELECOM))
    assert verdict.fits and verdict.reason.startswith("a τ²-bench results file")
    half = tau2.sniff(TraceFile("t.json", data=b'{"simulations": []}'))
    assert not half.fits and half.close
    assert not tau2.sniff(TraceFile("t.json", data=b"[]")).close


def test_import_tells_it_from_the_file(tmp_path):
    result = cli("import", "--traces", AIRLINE, "--run-id", "air", "--store", tmp_path)
    assert result.exit_code == 0, result.output
    assert "format: tau2 (a τ²-bench results file" in result.stderr
    assert "5/5 samples imported" in result.output


def test_tasks_are_the_samples_with_the_assistants_actions_as_gold():
    source = read(AIRLINE)
    doc = json.loads(AIRLINE.read_text())
    assert source.benchmark == ("tau2", "τ²-bench") and source.model == "gpt-4.1"
    assert set(source.dataset.by_id) == {t["id"] for t in doc["tasks"]}
    for task in doc["tasks"]:
        gold = [c.to_dict() for c in source.dataset.by_id[task["id"]].target]
        actions = task["evaluation_criteria"]["actions"] or []
        assert gold == [{"name": a["name"], "args": a["arguments"]} for a in actions]
    assert {t["name"] for t in source.tools} >= {"book_reservation", "get_user_details"}
    roles = {t["name"]: t.get("role") for t in source.tools}
    assert roles["cancel_reservation"] == "write" and roles["get_user_details"] == "read"


def test_users_actions_are_gold_of_the_user_side_and_compare_args_a_rule():
    source = read(TELECOM)
    doc = json.loads(TELECOM.read_text())
    sides, compares = set(), []
    for task in doc["tasks"]:
        gold = source.dataset.by_id[task["id"]].target
        for call, action in zip(gold, task["evaluation_criteria"]["actions"], strict=True):
            assert (call.side or "agent") == REQUESTOR[action["requestor"]]
            sides.add(call.side)
            compares.append(call.compare)
    assert sides == {None, "user"}
    assert compares.count(()) == 2  # transfer_to_human_agents, compare_args: []
    # the user's device tools ship beside the agent's
    assert {"toggle_airplane_mode", "enable_roaming"} <= {t["name"] for t in source.tools}


def test_trials_keep_reward_reward_info_and_termination_reason(tmp_path):
    assert cli("import", "--traces", TELECOM, "--run-id", "tel", "--store", tmp_path).exit_code == 0
    rows = cli("sql", "select sample_id, metadata from samples where run_id = 'tel' order by all",
               "--format", "json", "--store", tmp_path)  # fmt: skip
    assert rows.exit_code == 0, rows.output
    stored = {r["sample_id"]: json.loads(r["metadata"]) for r in json.loads(rows.stdout)}
    for sim in json.loads(TELECOM.read_text())["simulations"]:
        meta = stored[sim["task_id"]]
        assert meta["reward"] == sim["reward_info"]["reward"]
        assert meta["reward_info"] == sim["reward_info"]
        assert meta["termination_reason"] == sim["termination_reason"]
        assert meta["simulation_id"] == sim["id"]


def test_a_simulation_failed_by_the_infrastructure_is_stored_as_an_error(tmp_path):
    """τ² leaves a simulation that ended in an infrastructure error out of every metric
    (reward_info null, no messages): it was stored ok, with no calls, and scored tp 0."""

    def fail_first(doc):
        sim = doc["simulations"][0]
        sim.update(termination_reason="infrastructure_error", reward_info=None, messages=[])

    path = edited(tmp_path, AIRLINE, fail_first)
    failed_task = json.loads(path.read_text())["simulations"][0]["task_id"]
    source = read(path)
    (line,) = [x for x in source.lines if x.sample_id == str(failed_task)]
    assert (line.status, line.error_type) == ("error", "infrastructure_error")
    assert [x.status for x in source.lines].count("ok") == len(source.lines) - 1
    root = tmp_path / "traces"
    assert cli("import", "--traces", path, "--run-id", "a", "--store", root).exit_code == 0
    scored = cli("score", "a", "--format", "json", "--store", root)
    assert json.loads(scored.stdout)["n_errors"] == 1


def test_the_users_device_calls_are_never_the_agents(tmp_path):
    source = read(TELECOM)
    user_tools = {
        t["name"] for t in json.loads((tau2.VENDOR / "tau2-telecom-user-tools.json").read_text())
    }
    by_type: dict[str, set[str]] = {"ai": set(), "human": set()}
    for line in source.lines:
        for m in line.messages:
            data = json.loads(m["message"])["data"]
            if m["type"] in by_type:
                by_type[m["type"]] |= {c["name"] for c in data.get("tool_calls") or []}
    assert by_type["human"] and by_type["human"] <= user_tools
    assert not by_type["ai"] & user_tools
    cli("import", "--traces", TELECOM, "--run-id", "tel", "--store", tmp_path)
    calls = cli("sql", "select distinct name from tool_calls", "--format", "json",
                "--store", tmp_path)  # fmt: skip
    assert not {r["name"] for r in json.loads(calls.stdout)} & user_tools


def test_tools_option_overrides_the_shipped_ones(tmp_path):
    # the shipped airline tools without their roles: no write role, so no write_exact
    tools = [{k: v for k, v in t.items() if k != "role"} for t in tau2.builtin_tools("airline")]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    for run_id, extra in (("shipped", ()), ("given", ("--tools", path))):
        result = cli("import", "--traces", AIRLINE, *extra, "--run-id", run_id,
                     "--store", tmp_path / "s")  # fmt: skip
        assert result.exit_code == 0, result.output
    shipped, given = (
        json.loads(cli("--format", "json", "score", r, "--store", tmp_path / "s").stdout)
        for r in ("shipped", "given")
    )
    assert shipped["write_exact"] is not None and given["write_exact"] is None
    # a tools list without the file's tools is refused, naming one
    path.write_text(json.dumps([{"name": "book_reservation", "parameters": {}}]))
    result = cli("import", "--traces", AIRLINE, "--tools", path, "--run-id", "x",
                 "--store", tmp_path / "s")  # fmt: skip
    assert result.exit_code == 2 and "get_user_details" in result.output


@pytest.mark.parametrize(
    ("domain", "said"),
    [
        ("mock", "tcbreplay ships no tools for the τ² domain 'mock', only for airline, retail, "
                 "telecom"),
        (None, "the file names no τ² domain (info.environment_info.domain_name), and tcbreplay "
               "ships the tools of airline, retail, telecom only"),
    ],
)  # fmt: skip
def test_a_domain_without_shipped_tools_is_named_when_tools_are_asked_for(tmp_path, domain, said):
    """τ²'s own mock domain (or a file naming none) said only "--tools is required"."""
    doc = json.loads(AIRLINE.read_text())
    if domain is None:
        del doc["info"]["environment_info"]["domain_name"]
    else:
        doc["info"]["environment_info"]["domain_name"] = domain
    path = tmp_path / "mock.json"
    path.write_text(json.dumps(doc))
    store = tmp_path / "s"
    result = cli("import", "--traces", path, "--run-id", "m", "--store", store)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"Error: --tools is required: {said}\n"), result.output
    assert not (store / "m").exists()
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(tau2.builtin_tools("airline")))
    given = cli("import", "--traces", path, "--tools", tools, "--run-id", "m", "--store", store)
    assert given.exit_code == 0, given.output


def test_tasks_that_do_not_match_their_simulations_are_reported(tmp_path):
    def edit(doc):
        doc["tasks"][0]["evaluation_criteria"]["actions"][0]["arguments"]["summary"] = "other"
        doc["tasks"].pop()

    path = edited(tmp_path, AIRLINE, edit)
    with pytest.raises(TraceError) as caught:
        read(path)
    text = str(caught.value)
    assert "2 of 5 simulations do not match the file's tasks" in text
    assert "checked against other actions than its task's" in text
    assert "its task is not among the file's tasks" in text
    assert "--gold-from action-checks" in caught.value.hint
    result = cli("import", "--traces", path, "--run-id", "x", "--store", tmp_path / "s")
    assert result.exit_code == 2 and "do not match the file's tasks" in result.output
    # the gold calls the simulations were checked against, for every task they name
    source = read(path, gold_from="action-checks")
    for sim in json.loads(AIRLINE.read_text())["simulations"]:
        gold = [c.to_dict() for c in source.dataset.by_id[sim["task_id"]].target]
        checks = sim["reward_info"]["action_checks"] or []
        assert gold == [{"name": c["action"]["name"], "args": c["action"]["arguments"]}
                        for c in checks]  # fmt: skip


def test_gold_from_is_tau2s_alone(tmp_path):
    result = cli("import", "--format", "tau-bench", "--gold-from", "action-checks",
                 "--traces", AIRLINE, "--run-id", "x", "--store", tmp_path)  # fmt: skip
    assert result.exit_code == 2 and "--gold-from goes with --format tau2" in result.output


# ---------------------------------------------------------------- scores, computed apart


def plain_calls(sim: dict[str, Any]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The calls of a simulation by side, in order, read from the raw messages."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {"agent": [], "user": []}
    for m in sim["messages"]:
        if m["role"] in REQUESTOR:
            out[REQUESTOR[m["role"]]] += [
                (c["name"], c["arguments"]) for c in m.get("tool_calls") or []
            ]
    return out


def plain_gold(task: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"agent": [], "user": []}
    for a in task["evaluation_criteria"]["actions"] or []:
        out[REQUESTOR[a["requestor"]]].append(a)
    return out


def plain_accepts(action: dict[str, Any], call: tuple[str, dict[str, Any]], params) -> bool:
    """The metric spec's acceptance with τ²'s compare_args: the same tool; every argument one
    the tool takes, and, where compared, gold's value (or, when gold leaves it out, the
    declared default); no compared gold argument left out."""
    name, args = call
    if name != action["name"]:
        return False
    gold, compared = action["arguments"], action["compare_args"]
    for key, value in args.items():
        if key not in params[name]:
            return False
        if compared is not None and key not in compared:
            continue
        if key in gold:
            if not values_equal(value, gold[key]):
                return False
        elif "default" not in params[name][key] or not values_equal(
            value, params[name][key]["default"]
        ):
            return False
    return all(k in args for k in gold if compared is None or k in compared)


def independent_scores(
    doc: dict[str, Any], brute: bool = True
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (task, side): covered from the raw file; on the agent's side also tsa and tp, and
    with ``brute`` the spec's other per-sample metrics by the brute-force reference
    (tests/reference_metrics.py, which enumerates every pairing: too slow for the longest
    simulations of the whole sample)."""
    tools = tau2.builtin_tools(doc["info"]["environment_info"]["domain_name"])
    params = {t["name"]: t["parameters"]["properties"] for t in tools}
    tasks = {t["id"]: t for t in doc["tasks"]}
    out = {}
    for sim in doc["simulations"]:
        calls, gold = plain_calls(sim), plain_gold(tasks[sim["task_id"]])
        calls["both"], gold["both"] = calls["agent"] + calls["user"], gold["agent"] + gold["user"]
        for side in SIDES:
            covered = all(any(plain_accepts(a, c, params) for c in calls[side]) for a in gold[side])
            out[(sim["task_id"], side)] = {"covered": covered}
        as_gold = [(a["name"], a["arguments"], {"compare": a["compare_args"]}
                    if a["compare_args"] is not None else {}) for a in gold["agent"]]  # fmt: skip
        agent_names, gold_names = [c[0] for c in calls["agent"]], [a[0] for a in as_gold]
        mine = out[(sim["task_id"], "agent")]
        mine.update(tsa=tsa(agent_names, gold_names), tp=tp(agent_names, gold_names))
        if brute:
            ref = score_sample(as_gold, calls["agent"], tools)
            mine.update(
                {k: ref[k] for k in ("args_invalid", "args_total", "args_missing", "exact")}
            )
    return out


def scored(root: Path, path: Path, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The file imported and scored on each side: each sample's scores by (task, side)."""
    assert cli("import", "--traces", path, "--run-id", run_id, "--store", root).exit_code == 0
    out = {}
    for side in SIDES:
        result = cli("score", run_id, "--side", side, "--store", root)
        assert result.exit_code == 0, result.output
        folder = "spec" if side == "agent" else f"spec_side-{side}"
        for row in pq.read_table(root / run_id / "scores" / folder / "scores.parquet").to_pylist():
            out[(row["sample_id"], side)] = row
    return out


def assert_scores_equal(
    root: Path, path: Path, run_id: str, brute: bool = True
) -> dict[tuple[str, str], dict[str, Any]]:
    doc = json.loads(path.read_text())
    expected, got = independent_scores(doc, brute), scored(root, path, run_id)
    assert set(got) == set(expected)
    for key, want in expected.items():
        row = got[key]
        for field, value in want.items():
            if isinstance(value, float):
                assert row[field] == pytest.approx(value, abs=1e-12), (key, field)
            else:
                assert row[field] == value, (key, field)
    # and with both sides, covered is τ²'s own verdict: every action checked matched
    for sim in doc["simulations"]:
        checks = sim["reward_info"]["action_checks"] or []
        assert got[(sim["task_id"], "both")]["covered"] == all(c["action_match"] for c in checks)
    return got


@pytest.mark.parametrize("path", [AIRLINE, TELECOM], ids=["airline", "telecom"])
def test_scores_equal_an_independent_computation(tmp_path, path):
    got = assert_scores_equal(tmp_path, path, "t")
    if path == TELECOM:  # the compare_args case: a summary of other words, still the gold call
        doc = json.loads(path.read_text())
        tasks = {t["id"]: t for t in doc["tasks"]}
        shown = 0
        for sim in doc["simulations"]:
            gold = plain_gold(tasks[sim["task_id"]])["agent"]
            if [a["compare_args"] for a in gold] != [[]]:
                continue
            summaries = [c[1].get("summary") for c in plain_calls(sim)["agent"]
                         if c[0] == "transfer_to_human_agents"]  # fmt: skip
            if summaries and gold[0]["arguments"]["summary"] not in summaries:
                assert got[(sim["task_id"], "agent")]["covered"] is True
                shown += 1
        assert shown


@pytest.mark.slow
def test_scores_equal_an_independent_computation_on_the_shared_sample(tmp_path):
    if not SHARED.is_dir():
        pytest.skip(f"the shared τ² sample is not at {SHARED}")
    for domain in ("airline", "telecom"):
        assert_scores_equal(tmp_path, SHARED / f"gpt-4.1_{domain}_1trial.json", domain, brute=False)


def test_validity_of_both_sides_on_telecom(tmp_path):
    assert cli("import", "--traces", TELECOM, "--run-id", "tel", "--store", tmp_path).exit_code == 0
    assert cli("score", "tel", "--side", "both", "--store", tmp_path).exit_code == 0
    result = cli("validity", "tel", "--scoring", "spec_side-both", "--format", "json",
                 "--bootstrap", "50", "--store", tmp_path)  # fmt: skip
    assert result.exit_code == 0, result.output
    # the scoring of both sides is checked as it was made
    assert cli("audit", "verify", "tel", "--store", tmp_path).exit_code == 0
    report = json.loads(result.stdout)
    assert (
        report["outcome"] == "abs(reward - 1) <= 1e-6" and report["n"] == 5
    )  # the default outcome
    # on these five, both sides' covered is the reward itself
    assert report["metrics"]["covered"]["auc"] == 1.0


def test_a_malformed_user_message_is_named_when_the_users_side_is_scored(tmp_path):
    assert cli("import", "--traces", TELECOM, "--run-id", "tel", "--store", tmp_path).exit_code == 0
    path = tmp_path / "tel" / "messages.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    row = next(
        i for i, r in enumerate(rows) if r["type"] == "human" and "tool_calls" in r["message"]
    )
    messages = table["message"].to_pylist()
    messages[row] = '{"type": "human", "data": {'
    pq.write_table(with_messages(table, messages), path)
    as_the_run_wrote(path)
    # the agent's side reads no human message
    assert cli("score", "tel", "--store", tmp_path).exit_code == 0
    result = cli("score", "tel", "--side", "user", "--store", tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"Error: cannot read the run's traces: messages.parquet: sample "
        f"{rows[row]['sample_id']!r}: its human message at position {rows[row]['position']} is "
        "not valid JSON"
    )
