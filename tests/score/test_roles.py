"""Tool roles (from tool specs, Python tool modules and ``score --role``) and ``write_exact``,
on τ-bench's own airline trajectories and tools file (tests/data/tau-bench)."""

from __future__ import annotations

import json
import sys
import textwrap
from collections import Counter

import polars as pl
import pytest
import reference_metrics as ref
from helpers import TEST_DATA, cli

from tcbreplay._inputs.tools import ToolSchema, load_toolset, schemas_from_items
from tcbreplay._score.options import ScoreOptions
from tcbreplay._score.roles import parse_roles, tool_roles
from tcbreplay.errors import InputError, ToolSchemaError

TAU = TEST_DATA / "tau-bench"
# the six airline tools that change τ-bench's database (its tools file: the others read it,
# think or calculate)
WRITES = (
    "book_reservation", "cancel_reservation", "update_reservation_flights",
    "update_reservation_passengers", "update_reservation_baggages", "send_certificate",
)  # fmt: skip
WRITE_ROLE = "write=" + ",".join(WRITES)


def test_the_six_write_tools_are_tau_benchs_state_changing_ones():
    names = {t["function"]["name"] for t in json.loads((TAU / "airline-tools.json").read_text())}
    assert set(WRITES) <= names and len(names) == 14
    reads = {n for n in names if n.startswith(("get_", "search_", "list_"))}
    assert names - set(WRITES) - reads == {"think", "calculate", "transfer_to_human_agents"}


# --- roles in tool specs ---------------------------------------------------------------------

PARAMS = {"type": "object", "properties": {"id": {"type": "string"}}}


@pytest.mark.parametrize(
    "item",
    [
        {"name": "cancel", "parameters": PARAMS, "role": "write"},
        {"type": "function", "function": {"name": "cancel", "parameters": PARAMS, "role": "write"}},
        {"type": "function", "role": "write", "function": {"name": "cancel", "parameters": PARAMS}},
        {"name": "cancel", "input_schema": PARAMS, "role": "write"},
        {"name": "cancel", "inputSchema": PARAMS, "role": "write"},
    ],
    ids=["bare", "openai-inside", "openai-beside", "anthropic", "mcp"],
)
def test_a_role_is_read_from_every_tool_shape(item):
    (schema,) = schemas_from_items([item], "tools.json")
    assert schema.role == "write"
    assert schema.to_dict() == {
        "name": "cancel", "description": "", "parameters": PARAMS, "role": "write"
    }  # fmt: skip


def test_a_tool_without_role_is_stored_as_before():
    (schema,) = schemas_from_items([{"name": "get", "parameters": PARAMS}], "tools.json")
    assert schema.role is None
    assert "role" not in schema.to_dict()


@pytest.mark.parametrize("role", ["writer", "", 1, ["write"]])
def test_an_unknown_role_is_refused_naming_the_tool(role):
    with pytest.raises(ToolSchemaError, match=r"tools.json: tool 0 \(cancel\): role .*choose one"):
        schemas_from_items([{"name": "cancel", "parameters": PARAMS, "role": role}], "tools.json")


def test_openai_role_beside_and_inside_must_agree():
    inner = {"name": "cancel", "parameters": PARAMS, "role": "read"}
    with pytest.raises(ToolSchemaError, match="role both beside and inside function"):
        schemas_from_items([{"type": "function", "role": "write", "function": inner}], "t.json")


def test_a_tool_declared_twice_with_other_roles_is_refused():
    tools = [
        {"name": "x", "parameters": PARAMS},
        {"name": "x", "parameters": PARAMS, "role": "read"},
    ]
    with pytest.raises(ToolSchemaError, match="with different roles"):
        schemas_from_items(tools, "t.json")


def test_a_python_tool_module_gives_roles_by_attribute(tmp_path, monkeypatch):
    (tmp_path / "role_tools.py").write_text(
        textwrap.dedent(
            '''
            from langchain_core.tools import tool

            def cancel(reservation_id: str) -> str:
                """Cancel a reservation."""
                return "ok"

            cancel.role = "write"

            def lookup(reservation_id: str) -> str:
                """Read a reservation."""
                return "{}"

            @tool
            def think(thought: str) -> str:
                """Think."""
                return ""

            think.metadata = {"role": "scratch"}

            TOOLS = [cancel, lookup, think]
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    try:
        toolset = load_toolset("role_tools:TOOLS")
    finally:
        sys.modules.pop("role_tools", None)
    assert {s.name: s.role for s in toolset.schemas} == {
        "cancel": "write", "lookup": None, "think": "scratch"
    }  # fmt: skip


# --- --role --------------------------------------------------------------------------------


def test_parse_roles():
    given = parse_roles(["write=b,a", "scratch=think", "write=c"])
    assert given == (("a", "write"), ("b", "write"), ("c", "write"), ("think", "scratch"))
    for bad, message in [
        ("writer=a", "unknown role 'writer'"),
        ("write", "expected ROLE=NAME"),
        ("write=a,,b", "a tool name is empty"),
    ]:
        with pytest.raises(InputError, match=message):
            parse_roles([bad])
    with pytest.raises(InputError, match="given the roles write and read"):
        parse_roles(["write=a", "read=a"])


def test_a_name_holding_a_comma_a_quote_or_end_spaces_is_quoted_as_in_csv():
    given = parse_roles(['write="book,cancel", pay', 'read=" look "', 'scratch="say ""hi"""'])
    assert given == ((" look ", "read"), ("book,cancel", "write"), ("pay", "write"),
                     ('say "hi"', "scratch"))  # fmt: skip
    options = ScoreOptions(roles=given)
    flags = options.flags()
    assert flags == ["--role", 'read=" look "', "--role", 'write="book,cancel",pay',
                     "--role", 'scratch="say ""hi"""']  # fmt: skip
    assert parse_roles(flags[1::2]) == given  # the rescore hint gives the same roles back
    assert options.score_flags() == (  # quoted for the shell, where the hint is pasted
        " --role 'read=\" look \"' --role 'write=\"book,cancel\",pay'"
        ' --role \'scratch="say ""hi"""\''
    )
    for bad, message in [
        ('write="book,cancel', 'a quote " without its closing one'),
        ('write=bo"ok', "a quote inside an unquoted name"),
        ('write="book"x', "after the quoted name 'book'"),
        ('write=""', "a tool name is empty"),
    ]:
        with pytest.raises(InputError, match=message):
            parse_roles([bad])


def test_a_tool_named_with_a_comma_gets_a_role_and_a_focus(tmp_path):
    """Accepted at import, it could be given no role (the comma split it) and so no focus."""
    (tmp_path / "tools.json").write_text(json.dumps([
        {"name": name, "description": "", "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}}}} for name in ("look,up", "other")
    ]))  # fmt: skip
    (tmp_path / "dataset.json").write_text(json.dumps([
        {"id": "s1", "input": "q", "target": [{"name": "look,up", "args": {"a": 1}},
                                              {"name": "other", "args": {"a": 2}}]}
    ]))  # fmt: skip
    calls = [{"name": "look,up", "args": {"a": 1}, "id": "c1"},
             {"name": "other", "args": {"a": 3}, "id": "c2"}]  # fmt: skip
    (tmp_path / "traces.jsonl").write_text(json.dumps({"sample_id": "s1", "messages": [
        {"type": "human", "data": {"content": "q"}},
        {"type": "ai", "data": {"content": "", "tool_calls": calls}}]}) + "\n")  # fmt: skip
    root = tmp_path / "traces"
    result = cli("import", "--dataset", tmp_path / "dataset.json", "--tools",
                 tmp_path / "tools.json", "--traces", tmp_path / "traces.jsonl", "--run-id",
                 "r", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    result = cli("score", "r", "--role", 'write="look,up"', "--only", "write", "--format",
                 "json", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["scoring"] == "spec_only-write"
    assert summary["roles"] == {"look,up": "write"}
    assert (summary["tsa"], summary["ahr"], summary["write_exact"]) == (1.0, 0.0, 1.0)
    # the focus the hint offers for a name a folder cannot hold
    result = cli("score", "r", "--only", '"look,up"', "--store", root)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Hint: give the tool a role, as --role 'write=\"look,up\"', and name the role"
    )


def test_role_option_wins_over_the_spec_and_unknown_tools_are_refused():
    specs = [{"name": "a", "role": "read"}, {"name": "b"}]
    assert tool_roles(specs, (("a", "write"),)) == {"a": "write"}
    assert tool_roles(specs, ()) == {"a": "read"}
    assert tool_roles(specs, (), own=[("c", "scratch")]) == {"a": "read", "c": "scratch"}
    with pytest.raises(InputError, match="--role write=z: the run has no tool 'z'"):
        tool_roles(specs, (("z", "write"),))
    with pytest.raises(InputError, match="declared with the roles read and write"):
        tool_roles(specs, (), own=[("a", "write")])


def test_roles_round_trip_through_the_options():
    options = ScoreOptions(roles=parse_roles([WRITE_ROLE]))
    assert options.scoring == "spec"
    assert ScoreOptions.from_dict(options.to_dict()) == options
    assert "roles" not in ScoreOptions().to_dict()  # a scoring without roles hashes as before
    assert options.flags() == ["--role", "write=" + ",".join(sorted(WRITES))]


# --- write_exact on τ-bench -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tau_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("tau")
    result = cli("import", "--format", "tau-bench", "--traces", TAU / "gpt-4o-airline-sample.json",
                 "--tools", TAU / "airline-tools.json", "--run-id", "tau",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    return root


def score_json(root, *args):
    result = cli("score", "tau", "--store", root, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def independent_write_exact(root) -> dict[tuple[str, int], bool]:
    """Per trial: the agent's calls to the six tools equal gold's as a multiset, arguments as
    JSON objects compared key by key (τ-bench's gold has no rules; its arguments are
    strings, integers and lists, so Python's == is the spec's equality here)."""
    out = {}
    sql = ("select sample_id, trial, name, args from {} where run_id = 'tau' "
           "order by sample_id, trial")  # fmt: skip
    sides = []
    for view in ("tool_calls", "gold_calls"):
        result = cli("sql", sql.format(view), "--store", root, "--format", "json")
        assert result.exit_code == 0, result.output
        calls: dict[tuple[str, int], Counter] = {}
        for row in json.loads(result.stdout):
            key = (row["sample_id"], row["trial"])
            calls.setdefault(key, Counter())
            if row["name"] in WRITES:
                args = row["args"] if isinstance(row["args"], str) else json.dumps(row["args"])
                calls[key][(row["name"], json.dumps(json.loads(args), sort_keys=True))] += 1
        sides.append(calls)
    agent, gold = sides
    result = cli("sql", "select sample_id, trial from samples", "--store", root, "--format", "json")
    for key in [(row["sample_id"], row["trial"]) for row in json.loads(result.stdout)]:
        out[key] = agent.get(key, Counter()) == gold.get(key, Counter())
    return out


def test_write_exact_is_null_without_roles_and_says_so(tau_store):
    summary = score_json(tau_store)
    assert summary["write_exact"] is None and summary["n_write_exact"] == 0
    assert summary["roles"] == {}
    scores = pl.read_parquet(tau_store / "tau" / "scores" / "spec" / "scores.parquet")
    assert scores["write_exact"].null_count() == scores.height == 20
    table = cli("score", "tau", "--store", tau_store)
    assert "write_exact: no tool has the role write (score --role write=NAME,...)" in table.stdout
    assert "no write role" in table.stdout


def test_write_exact_with_roles_matches_an_independent_count(tau_store):
    summary = score_json(tau_store, "--role", WRITE_ROLE)
    assert summary["roles"] == {name: "write" for name in sorted(WRITES)}
    scores = pl.read_parquet(tau_store / "tau" / "scores" / "spec" / "scores.parquet")
    expected = independent_write_exact(tau_store)
    got = {(r["sample_id"], r["trial"]): r["write_exact"] for r in scores.iter_rows(named=True)}
    assert got == expected
    assert sum(expected.values()) == 7  # of 20 trials: not a column of constants
    assert summary["write_exact"] == 7 / 20 and summary["write_exact_samples"] == 7
    assert summary["n_write_exact"] == 20
    # with trials: per sample and pass^k of write_exact beside exact's
    assert summary["by_sample"]["write_exact"] == pytest.approx(0.35)
    assert summary["pass_k"][0]["pass_hat_k_write_exact"] == pytest.approx(0.35)
    # the tsa, tp and ahr of the run do not move with roles
    plain = score_json(tau_store)
    for key in ("tsa", "tp", "ahr", "exact", "first_divergence", "by_tool"):
        assert plain[key] == summary[key]


def test_a_scoring_with_roles_verifies(tau_store):
    assert cli("score", "tau", "--store", tau_store, "--role", WRITE_ROLE).exit_code == 0
    result = cli("audit", "verify", "tau", "--store", tau_store)
    assert result.exit_code == 0, result.output


def test_roles_from_the_tools_file(tmp_path):
    tools = json.loads((TAU / "airline-tools.json").read_text())
    for tool in tools:
        if tool["function"]["name"] in WRITES:
            tool["role"] = "write"
    path = tmp_path / "airline-tools-roles.json"
    path.write_text(json.dumps(tools))
    result = cli("import", "--format", "tau-bench", "--traces", TAU / "gpt-4o-airline-sample.json",
                 "--tools", path, "--run-id", "tau", "--store", tmp_path / "s")  # fmt: skip
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "s" / "tau" / "manifest.json").read_text())
    roles = {t["name"]: t.get("role") for t in manifest["tools"]["specs"]}
    assert {n for n, r in roles.items() if r == "write"} == set(WRITES)
    summary = score_json(tmp_path / "s")
    assert summary["write_exact"] == 7 / 20


@pytest.mark.parametrize(
    ("role", "message"),
    [
        ("write=nope", "Error: --role write=nope: the run has no tool 'nope'"),
        ("writer=think", "Error: --role 'writer=think': unknown role 'writer'"),
    ],
)
def test_role_option_errors_are_one_line_exit_2(tau_store, role, message):
    result = cli("score", "tau", "--store", tau_store, "--role", role)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith(message)


def test_role_goes_with_the_spec_scorer_only(tau_store):
    result = cli("score", "tau", "--store", tau_store, "--scorer", "abet", "--role", WRITE_ROLE)
    assert result.exit_code == 2
    assert "--role applies to --scorer spec" in result.stderr


def test_tool_schema_equality_includes_role():
    assert ToolSchema("a", "", {}) != ToolSchema("a", "", {}, role="read")


# --- focused scoring --------------------------------------------------------------------------


def calls_by_trial(root, view: str) -> dict[tuple[str, int], list[str]]:
    sql = f"select sample_id, trial, name from {view} where run_id = 'tau' order by all"
    result = cli("sql", sql.replace("order by all", "order by sample_id, trial, call_index"),
                 "--store", root, "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    out: dict[tuple[str, int], list[str]] = {}
    for row in json.loads(result.stdout):
        out.setdefault((row["sample_id"], row["trial"]), []).append(row["name"])
    return out


def test_only_write_scores_the_write_calls_alone_beside_the_default(tau_store):
    # the default scoring made here: the module's other tests may run on another worker
    score_json(tau_store, "--role", WRITE_ROLE)
    before = pl.read_parquet(tau_store / "tau" / "scores" / "spec" / "scores.parquet")
    summary = score_json(tau_store, "--role", WRITE_ROLE, "--only", "write")
    assert summary["scoring"] == "spec_only-write"
    assert summary["options"]["only"] == ["write"]
    assert summary["focus"] == {"tools": sorted(WRITES)}
    folder = tau_store / "tau" / "scores" / "spec_only-write"
    focused = pl.read_parquet(folder / "scores.parquet")
    # tp by an independent computation: the reference's edit distance over the names of the
    # write calls alone
    agent, gold = calls_by_trial(tau_store, "tool_calls"), calls_by_trial(tau_store, "gold_calls")
    for row in focused.iter_rows(named=True):
        key = (row["sample_id"], row["trial"])
        a = [n for n in agent.get(key, []) if n in WRITES]
        g = [n for n in gold.get(key, []) if n in WRITES]
        assert row["tp"] == pytest.approx(ref.tp(a, g)), key
        assert row["n_agent"] == len(a) and row["n_gold"] == len(g)
    # the tsa of every sample is unchanged (gold lists only write calls); tp is not
    assert focused["tsa"].to_list() == before["tsa"].to_list()
    assert focused["tp"].to_list() != before["tp"].to_list()
    # the default scoring is left as it was, and the focused one verifies
    after = pl.read_parquet(tau_store / "tau" / "scores" / "spec" / "scores.parquet")
    assert after.equals(before)
    verify = cli("audit", "verify", "tau", "--store", tau_store, "--scoring", "spec_only-write")
    assert verify.exit_code == 0, verify.output
    # it is a scoring like the others in the views
    result = cli("sql", "select scoring, focus, count(*) as n from scores_all join scorings "
                 "using (run_id, scoring) group by all order by all", "--store", tau_store,
                 "--format", "json")  # fmt: skip
    rows = {r["scoring"]: r for r in json.loads(result.stdout)}
    assert rows["spec_only-write"]["focus"] == "only write" and rows["spec_only-write"]["n"] == 20
    assert rows["spec"]["focus"] is None


def test_without_leaves_tools_out_and_diff_names_the_scoring(tau_store, tmp_path):
    summary = score_json(tau_store, "--without", "think,calculate")
    assert summary["scoring"] == "spec_without-calculate+think"
    assert summary["focus"] == {"exclude": ["calculate", "think"]}
    scores = pl.read_parquet(tau_store / "tau" / "scores" / summary["scoring"] / "scores.parquet")
    agent = calls_by_trial(tau_store, "tool_calls")
    for row in scores.iter_rows(named=True):
        names = agent.get((row["sample_id"], row["trial"]), [])
        assert row["n_agent"] == len([n for n in names if n not in ("think", "calculate")])
    result = cli("diff", "tau", "tau", "--scoring", summary["scoring"], "--store", tau_store,
                 "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    diff = json.loads(result.stdout)
    assert diff["scoring"] == summary["scoring"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "write"], "Error: --only write: no tool has the role write"),
        (["--only", "nope"], "Error: --only nope: the run has no tool 'nope'"),
        (["--only", "think", "--without", "think"], "Error: --only and --without both name"),
        (["--only", "a/b"], "Error: --only 'a/b': a focus names tools or roles"),
        (["--only", ""], "Error: --only '': an empty name"),
        (["--only", ","], "Error: --only ',': an empty name"),
        (["--without", " "], "Error: --without ' ': an empty name"),
        (["--only", "think,,calculate"], "Error: --only 'think,,calculate': an empty name"),
    ],
)
def test_focus_errors_are_one_line_exit_2(tau_store, args, message):
    result = cli("score", "tau", "--store", tau_store, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0].startswith(message)


def test_focus_options_round_trip_through_the_folder_name():
    for options in (
        ScoreOptions(only=("write",)),
        ScoreOptions(without=("think", "calculate")),
        ScoreOptions(rel_tol=1e-6, only=("book_reservation", "read"), without=("think",)),
    ):
        assert ScoreOptions.from_scoring(options.scoring) == options
        assert ScoreOptions.from_dict(options.to_dict()) == options


def test_report_shows_a_focused_scoring(tau_store, tmp_path):
    assert cli("score", "tau", "--store", tau_store, "--role", WRITE_ROLE).exit_code == 0
    assert cli("score", "tau", "--store", tau_store, "--role", WRITE_ROLE, "--only",
               "write").exit_code == 0  # fmt: skip
    from tcbreplay._report.data import load_run
    from tcbreplay._store.runs import Store

    focused = load_run(Store(tau_store), "tau", scoring="spec_only-write")
    stored = json.loads((tau_store / "tau/scores/spec_only-write/summary.json").read_text())
    assert focused.summary["tp"] == stored["tp"] != load_run(Store(tau_store), "tau").summary["tp"]
    out = tmp_path / "r.html"
    result = cli("report", "tau", "--scoring", "spec_only-write", "-o", out, "--store", tau_store)
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0
    missing = cli("report", "tau", "--scoring", "spec_only-nope", "-o", out, "--store", tau_store)
    assert missing.exit_code == 2 and "Error: --only nope" in missing.stderr


def test_a_focus_scored_again_with_other_roles_says_it_replaces_the_one_stored(tau_store):
    """Roles do not name the folder: spec_only-write of other roles replaced it in silence."""
    first = ("--role", "write=book_reservation", "--only", "write")
    assert score_json(tau_store, *first)["focus"] == {"tools": ["book_reservation"]}
    again = cli("score", "tau", "--store", tau_store, "--role", "write=cancel_reservation",
                "--only", "write")  # fmt: skip
    assert again.exit_code == 0, again.output
    said = (
        "scores/spec_only-write held a scoring with other roles "
        "(book_reservation=write); this one's (cancel_reservation=write) replace it"
    )
    assert f"Warning: {said}" in again.stdout.splitlines()  # (above the metrics, as others)
    same = cli("score", "tau", "--store", tau_store, "--role", "write=cancel_reservation",
               "--only", "write")  # fmt: skip
    assert same.exit_code == 0 and "other roles" not in same.output
    # among the JSON summary's warnings, where scripts read them (it went to stderr only)
    back = score_json(tau_store, *first)
    assert back["warnings"] == [
        "scores/spec_only-write held a scoring with other roles (cancel_reservation=write); "
        "this one's (book_reservation=write) replace it"
    ]
