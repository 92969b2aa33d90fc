"""tcbreplay validity: its errors, each one line naming the option or run at fault."""

from __future__ import annotations

import json

import pytest
from helpers import cli, import_tau_bench, snapshot


@pytest.fixture(scope="module")
def tau_root(tmp_path_factory):
    return import_tau_bench(tmp_path_factory.mktemp("tau") / "traces")


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def test_a_run_whose_samples_carry_no_metadata_has_no_outcome(sim_run):
    store, run_id = sim_run
    result = cli("validity", run_id, "--store", store.root)
    assert result.exit_code == 2
    assert error_lines(result) == [
        f"Error: run {run_id!r}: its samples carry no metadata, so there is no outcome to "
        "compare the metrics with"
    ]


def test_a_run_without_outcomes_is_refused_before_it_is_scored(sim_copy, monkeypatch):
    """Its scores are neither read nor made in memory (at 1M samples, seconds) to say so."""
    from tcbreplay._compare import validity

    def never(*args, **kwargs):
        raise AssertionError("the run's scores were read before its outcomes")

    monkeypatch.setattr(validity, "load_scores", never)
    root, run_id = sim_copy
    result = cli("validity", run_id, "--store", root)
    assert result.exit_code == 2
    assert error_lines(result)[0].startswith(f"Error: run {run_id!r}: its samples carry no ")


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        ("rewrd >= 1", "Error: --outcome 'rewrd >= 1': no metadata field \"rewrd\""),
        ("reward >=", "Error: --outcome 'reward >=': syntax error at or near \">=\""),
        # a nested field of no field, and a field no nested field has: DuckDB's words before
        ("foo.bar = 1", "Error: --outcome 'foo.bar = 1': no metadata field \"foo\" (a.b names "
                        "the field b inside the field a)"),
        ("reward_info.nosuch = 1", "Error: --outcome 'reward_info.nosuch = 1': no field "
                                   "\"nosuch\" inside the metadata field it is read from"),
        ("user_cost", "Error: --outcome 'user_cost': gives 0.0035475000000000003 (DOUBLE) for "
                      "sample '0' trial 0; an outcome must be true or false (or a number 0 or 1)"),
        ("(select 1) = 1", "Error: --outcome '(select 1) = 1': 'select' is not allowed in an "
                           "outcome expression"),
        ("read_text('/etc/passwd') = ''", "Error: --outcome \"read_text('/etc/passwd') = ''\": "
         "the function 'read_text' is not allowed in an outcome (allowed: abs, ceil, coalesce, "
         "floor, greatest, least, length, lower, nullif, round, trim, upper)"),
        ("reward = 1; select 1", "Error: --outcome 'reward = 1; select 1': one expression only "
                                 "(no comments, no ';')"),
    ],
)  # fmt: skip
def test_a_bad_outcome_is_one_error_line(tau_root, outcome, message):
    before = snapshot(tau_root)
    result = cli("validity", "tau", "--outcome", outcome, "--store", tau_root)
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [message]
    assert "Traceback" not in result.output
    assert snapshot(tau_root) == before


@pytest.mark.parametrize(
    "outcome",
    ["coalesce(reward, 0) >= 1", "nullif(reward, 2) >= 1", "reward in (1, 2)",
     "trim(cast(reward as varchar)) = '1.0'", "reward >= 1 and (user_cost >= 0)",
     "not (reward < 1)", "reward = 1 or (reward > 1)", "greatest(reward, 0) >= least(1, 2)",
     # source: a field whose name DuckDB calls a keyword (as label, value, type...): refused
     "reward >= 1 and coalesce(source, '') = coalesce(source, '')"],
)  # fmt: skip
def test_the_functions_and_keywords_the_readme_lists_are_accepted(tau_root, outcome):
    # each says reward >= 1 (rewards are 0 or 1), so each gives the default's numbers
    def validity(*extra):
        result = cli("validity", "tau", "--format", "json", "--bootstrap", "50",
                     "--store", tau_root, *extra)  # fmt: skip
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    assert validity("--outcome", outcome)["metrics"] == validity()["metrics"]


def test_a_word_before_a_parenthesis_is_called_a_function_only_when_it_is_one(tau_root):
    # `and` is no function: what is refused is the subquery after it
    result = cli("validity", "tau", "--outcome", "reward = 1 and (select true)",
                 "--store", tau_root)  # fmt: skip
    assert result.exit_code == 2
    assert error_lines(result) == [
        "Error: --outcome 'reward = 1 and (select true)': 'select' is not allowed in an "
        "outcome expression"
    ]


def test_a_field_the_metadata_lacks_hints_at_the_fields_it_has(tau_root):
    result = cli("validity", "tau", "--outcome", "solved", "--store", tau_root)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Hint: metadata fields: outputs, reward, reward_info, source, user_cost, user_id"
    )


def test_an_unknown_scoring_is_named(tau_root):
    result = cli("validity", "tau", "--scoring", "nope", "--store", tau_root)
    assert result.exit_code == 2
    assert error_lines(result) == ["Error: run 'tau' has no scoring 'nope'"]


def test_a_run_never_scored_is_scored_in_memory_and_nothing_is_written(tau_root):
    before = snapshot(tau_root)
    result = cli("validity", "tau", "--store", tau_root, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scoring"] == "spec"
    assert snapshot(tau_root) == before


def test_the_latest_scoring_is_the_default(tau_root, tmp_path):
    import shutil

    root = tmp_path / "traces"
    shutil.copytree(tau_root, root)
    assert cli("score", "tau", "--store", root).exit_code == 0
    assert cli("score", "tau", "--store", root, "--scorer", "abet").exit_code == 0
    out = json.loads(cli("validity", "tau", "--store", root, "--format", "json").stdout)
    assert out["scoring"] == "abet"
    out = json.loads(
        cli("validity", "tau", "--store", root, "--format", "json", "--scoring", "spec").stdout
    )
    assert out["scoring"] == "spec"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        *(
            (
                ["--bootstrap", n],
                f"Error: --bootstrap {n}: a 95% interval needs at least 40 "
                "resamples, so that each 2.5% tail outside it holds one (with fewer its ends are "
                "the most extreme resamples, which need not enclose the estimate)",
            )
            for n in ("0", "1", "39")
        ),
        (["--bootstrap", "1000001"], "Error: --bootstrap 1000001: give 40 to 1000000"),
        (["--seed", "-1"], "Error: --seed -1: must be 0 or more"),
    ],
)
def test_bad_bootstrap_options(tau_root, args, message):
    result = cli("validity", "tau", *args, "--store", tau_root)
    assert result.exit_code == 2
    assert error_lines(result) == [message]


def test_an_unknown_run(tau_root):
    result = cli("validity", "nope", "--store", tau_root)
    assert result.exit_code == 2
    assert error_lines(result)[0].startswith("Error: ")


def test_the_report_has_the_validity_panel_where_samples_carry_an_outcome(
    tau_root, sim_run, tmp_path
):
    page = tmp_path / "tau.html"
    assert cli("report", "tau", "-o", page, "--store", tau_root).exit_code == 0
    text = page.read_text()
    assert '<section id="validity"' in text and 'id="chart-roc-0"' in text
    store, run_id = sim_run
    other = tmp_path / "sim.html"
    assert cli("report", run_id, "-o", other, "--store", store.root).exit_code == 0
    assert '<section id="validity"' not in other.read_text()
    # an outcome given that cannot be read is an error, not a missing panel
    result = cli("report", "tau", "-o", page, "--outcome", "rewrd", "--store", tau_root)
    assert result.exit_code == 2
    assert error_lines(result) == ["Error: --outcome 'rewrd': no metadata field \"rewrd\""]
