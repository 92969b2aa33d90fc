"""Gold rules and comparison options through the command line: a dataset with acceptable
values, optional arguments, order-free calls and tools of its own (``tests/data/rules``),
imported, scored with each option, verified, queried and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_DATA, cli
from report_helpers import payload

DATA = TEST_DATA
RULES = DATA / "rules"
# per sample: args_invalid, args_total, args_missing, tp under the default options
DEFAULT = {
    "accepted-unit": (1, 2, 0, 1.0),  # "san francisco" is not "San Francisco"; "F" accepted
    "optional-left-out": (0, 1, 0, 1.0),
    "parallel-any-order": (0, 4, 0, 1.0),
    "strict-integer": (0, 2, 0, 1.0),  # 2.0 equals 2
    "group-then-ordered": (0, 6, 0, 1.0),
}


@pytest.fixture(scope="module")
def rules_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rules") / "traces"
    result = cli("import", "--dataset", RULES / "dataset.json", "--tools",
                 DATA / "tools_shop.json", "--traces", RULES / "traces.jsonl", "--run-id", "rules",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    return root


def scored(root: Path, *options: str) -> tuple[dict, dict]:
    result = cli("score", "rules", "--store", root, "--format", "json", *options)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    rows = json.loads(cli("sql", f"select * from scores_all where scoring = '{summary['scoring']}'",
                          "--format", "json", "--store", root).stdout)  # fmt: skip
    return summary, {r["sample_id"]: r for r in rows}


def counts(rows: dict) -> dict:
    return {sid: (r["args_invalid"], r["args_total"], r["args_missing"], r["tp"])
            for sid, r in rows.items()}  # fmt: skip


def test_each_rule_scores_as_the_readme_says(rules_run):
    summary, rows = scored(rules_run)
    assert summary["scoring"] == "spec"
    assert counts(rows) == DEFAULT
    assert summary["options"] == {
        "scorer": "spec", "rel_tol": 1e-9, "abs_tol": 0.0, "strings": "exact", "types": "lenient"
    }  # fmt: skip


@pytest.mark.slow  # (3 s)
def test_comparison_options_have_their_own_folder_and_verify(rules_run, tmp_path):
    scored(rules_run)  # the default scoring, made here: no test relies on another's order
    summary, rows = scored(rules_run, "--strings", "bfcl", "--types", "strict")
    assert summary["scoring"] == "spec_strings-bfcl_types-strict"
    assert summary["audit"]["options"]["strings"] == "bfcl"
    expected = dict(DEFAULT, **{"accepted-unit": (0, 2, 0, 1.0), "strict-integer": (1, 2, 0, 1.0)})
    assert counts(rows) == expected
    assert (rules_run / "rules" / "scores" / "spec" / "summary.json").exists()
    verified = cli("audit", "verify", "rules", "--store", rules_run)
    assert verified.exit_code == 0, verified.output
    diffed = cli("diff", "rules", "rules", "--scoring", summary["scoring"], "--store", rules_run)
    assert diffed.exit_code == 0, diffed.output


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--strings", "lower"], "Error: Invalid value for '--strings'"),
        (["--types", "loose"], "Error: Invalid value for '--types'"),
        (["--scorer", "abet", "--strings", "bfcl"],
         "Error: --scorer abet compares values its own way: --rel-tol, --abs-tol, --strings and "
         "--types apply to --scorer spec"),
    ],
)  # fmt: skip
def test_bad_comparison_options_exit_2(rules_run, options, message):
    result = cli("score", "rules", "--store", rules_run, *options)
    assert result.exit_code == 2
    assert result.stderr.startswith(message)


def test_the_gold_calls_view_shows_the_rules(rules_run):
    query = (
        'select sample_id, call_index, accept, optional, "group" from gold_calls '
        'where accept is not null or optional is not null or "group" is not null '
        "order by sample_id, call_index"
    )
    result = cli("sql", query, "--format", "json", "--store", rules_run)

    def value(text):  # JSON columns print as their text
        return None if text is None else json.loads(text)

    rows = [(r["sample_id"], r["call_index"], *(value(r[k]) for k in ("accept", "optional",
                                                                      "group")))
            for r in json.loads(result.stdout)]  # fmt: skip
    assert rows == [
        ("accepted-unit", 0, {"unit": ["fahrenheit", "F"]}, ["days"], None),
        ("group-then-ordered", 1, None, None, "products"),
        ("group-then-ordered", 2, None, None, "products"),
        ("optional-left-out", 0, None, ["days"], None),
        ("parallel-any-order", 0, None, None, "any"),
        ("parallel-any-order", 1, None, None, "any"),
    ]


def test_the_report_marks_accepted_values_optional_keys_and_groups(rules_run, tmp_path):
    out = tmp_path / "r.html"
    assert cli("report", "rules", "-o", out, "--store", rules_run).exit_code == 0
    page = out.read_text()
    data, details = payload(page, "report-data"), payload(page, "report-details")
    ids = data["samples"]["id"]
    gold = details["gold"]
    accepted = details["runs"][0]["samples"][ids.index("accepted-unit")]
    assert gold[ids.index("accepted-unit")][0][2] == {
        "accept": {"unit": ["fahrenheit", "F"]},
        "optional": ["days"],
    }
    assert accepted["p"] == [[0, 0, {"city": "wrong", "unit": "accepted"}]]
    assert accepted["o"][0]["name"] == "get_weather"  # the sample's own tools
    left_out = details["runs"][0]["samples"][ids.index("optional-left-out")]
    assert left_out["p"] == [[0, 0, {}, [], ["days"]]]
    # in any order: the agent's first call pairs with gold's second
    parallel = details["runs"][0]["samples"][ids.index("parallel-any-order")]
    assert [p[:2] for p in parallel["p"]] == [[0, 1], [1, 0]]
    assert gold[ids.index("parallel-any-order")][0][2] == {"group": "any"}


def test_invented_keys_judges_a_sample_by_its_own_tools(rules_run):
    """get_weather is only in the samples' own tools: its keys are not invented."""
    result = cli("query", "invented_keys", "--format", "json", "--store", rules_run)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
