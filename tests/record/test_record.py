"""Recording with the ``sim`` model: the runner, the store it writes, and the sim's contract."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import cli
from langchain_core.messages import message_to_dict, messages_from_dict

from tcbreplay._cli import main
from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
from tcbreplay._query.sql import run_sql
from tcbreplay._record.models import parse_model
from tcbreplay._record.models.sim import plan_turns
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.runner import record_run
from tcbreplay._score.run import score_run
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import SCHEMA_VERSION
from tcbreplay.errors import InputError, ModelError

BUILTIN = BENCHMARKS["tool-call"]
DATASET = json.loads(BUILTIN.dataset.read_text())
CALLS_SQL = (
    "select sample_id, call_index, name, args::varchar as args "
    "from tool_calls order by sample_id, call_index"
)


def _rows(run_dir: Path, name: str) -> list[dict]:
    return pq.read_table(Path(run_dir) / name).to_pylist()


def _record(store: Store, model: str, inputs=None, **options):
    return record_run(
        inputs or load_inputs("tool-call"),
        parse_model(model),
        store,
        run_id="run",
        options=RecordOptions(**{"workers": 8, **options}),
    )


def _calls(store: Store) -> list[tuple]:
    return run_sql(store, CALLS_SQL).rows


@pytest.fixture(scope="module")
def sim_messages(sim_run) -> list[dict]:
    store, run_id = sim_run
    # in sample order and position (the file holds one type after another)
    rows = _rows(store.open_run(run_id).dir, "messages.parquet")
    return sorted(rows, key=lambda r: (r["sample_index"], r["position"]))


# -- what the session's sim run stored ----------------------------------------------------


def test_every_sample_is_stored_once_and_ok(sim_run):
    store, run_id = sim_run
    run = store.open_run(run_id)
    rows = _rows(run.dir, "samples.parquet")
    ids = [r["sample_id"] for r in rows]
    assert len(ids) == len(set(ids)) == len(DATASET)
    assert ids == [str(e["id"]) for e in DATASET]  # in dataset order
    assert [r["sample_index"] for r in rows] == list(range(len(DATASET)))
    assert {r["status"] for r in rows} == {"ok"}
    assert all(r["attempts"] == 1 and r["error"] is None for r in rows)
    assert run.status == "complete"
    assert run.manifest["totals"]["ok"] == len(DATASET)
    for row, entry in zip(rows, DATASET, strict=True):
        assert row["input"] == entry["input"]
        assert json.loads(row["gold"]) == entry["target"]


def test_messages_start_with_the_human_input(sim_run, sim_messages):
    by_sample: dict[str, list[dict]] = {}
    for row in sim_messages:
        by_sample.setdefault(row["sample_id"], []).append(row)
    assert sorted(by_sample) == sorted(str(e["id"]) for e in DATASET)
    for entry in DATASET:
        rows = by_sample[str(entry["id"])]
        assert [r["position"] for r in rows] == list(range(len(rows)))
        first = json.loads(rows[0]["message"])
        assert (rows[0]["type"], first["type"], first["data"]["content"]) == (
            "human",
            "human",
            entry["input"],
        )
        assert rows[-1]["type"] == "ai"  # every ok sample ends with the final answer
        assert "system" not in [r["type"] for r in rows]


def test_ai_messages_are_labelled_simulated(sim_run, sim_messages):
    store, run_id = sim_run
    ai = [json.loads(r["message"]) for r in sim_messages if r["type"] == "ai"]
    assert len(ai) >= len(DATASET)
    for message in ai:
        meta = message["data"]["response_metadata"]
        assert meta["simulated"] is True
        assert "simulated" in meta["model_name"]
    assert store.open_run(run_id).manifest["model"]["simulated"] is True
    # token counts and latencies sit beside AI messages; tool messages carry a latency too
    assert all(r["output_tokens"] is not None for r in sim_messages if r["type"] == "ai")
    assert all(r["latency_s"] is not None for r in sim_messages if r["type"] in ("ai", "tool"))


def test_stored_messages_round_trip_through_langchain(sim_messages):
    types = set()
    for row in sim_messages:
        stored = json.loads(row["message"])
        (message,) = messages_from_dict([stored])
        assert message_to_dict(message) == stored
        assert message.type == row["type"]
        types.add(message.type)
    assert types == {"human", "ai", "tool"}


def test_manifest_describes_the_inputs(sim_run):
    store, run_id = sim_run
    manifest = store.open_run(run_id).manifest
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["run_id"] == run_id
    inputs = load_inputs("tool-call")
    stored = store.open_run(run_id).dir / manifest["dataset"]["file"]
    assert [
        json.loads(line) for line in stored.read_text().splitlines()
    ] == inputs.dataset.entries()
    assert manifest["dataset"]["n_entries"] == len(inputs.dataset)
    assert manifest["dataset"]["sha256"] == hashlib.sha256(BUILTIN.dataset.read_bytes()).hexdigest()
    specs = {s["name"]: s for s in manifest["tools"]["specs"]}
    assert sorted(specs) == ["add_numbers", "list_items", "multiply_numbers"]
    for name in ("add_numbers", "multiply_numbers"):
        params = specs[name]["parameters"]
        assert sorted(params["properties"]) == ["a", "b"]
        assert params["properties"]["a"]["type"] == "number"
        assert specs[name]["description"]
    assert manifest["tools"]["source"] == BUILTIN.tools
    prompt = manifest["system_prompt"]
    assert prompt["text"] == BUILTIN.system_prompt.read_text()
    assert prompt["sha256"] == hashlib.sha256(BUILTIN.system_prompt.read_bytes()).hexdigest()
    assert manifest["runner"] == RecordOptions(workers=8).to_dict()
    model = manifest["model"]
    assert (model["provider"], model["id"]) == ("sim", "sim:seed=7,error_rate=0.3")
    assert model["settings"]["seed"] == 7 and model["settings"]["error_rate"] == 0.3
    assert manifest["status"] == "complete"


# -- the sim's contract --------------------------------------------------------------------


def test_same_seed_gives_the_same_calls_and_another_seed_does_not(sim_run, tmp_path):
    """Mistakes are drawn per (seed, sample id): a subset recorded again with the same seed
    (another store, other workers) repeats the session run's calls for those samples."""
    subset = DATASET[::3]
    path = tmp_path / "subset.json"
    path.write_text(json.dumps(subset))
    inputs = load_inputs(None, path, BUILTIN.tools, BUILTIN.system_prompt)
    ids = {str(e["id"]) for e in subset}
    store, _ = sim_run
    reference = [row for row in _calls(store) if row[0] in ids]
    assert reference

    again = Store(tmp_path / "again")
    _record(again, "sim:seed=7,error_rate=0.3", inputs, workers=3)
    assert _calls(again) == reference

    other = Store(tmp_path / "other")
    _record(other, "sim:seed=8,error_rate=0.3", inputs)
    different = _calls(other)
    assert different != reference

    # ... and not only somewhere: several samples differ
    def by_sample(rows):
        return {sid: [r[1:] for r in rows if r[0] == sid] for sid in ids}

    a, b = by_sample(reference), by_sample(different)
    assert sum(a[sid] != b[sid] for sid in ids) >= 3


@pytest.mark.parametrize("mistakes", ["skip+swap", "swap", "wrong_value"])
def test_the_sim_makes_only_the_mistakes_it_is_given(mistakes):
    """A swap of a sample's last call, or a wrong value for a call without arguments, cannot
    happen: the call is then made right, not given an invented argument instead."""
    settings = parse_model(f"sim:seed=1,error_rate=1,mistakes={mistakes}").settings
    for sample in load_inputs("tool-call").dataset.samples:
        gold = [(c.name, c.args) for c in sample.target]
        turns = plan_turns(str(sample.id), gold, [], settings)
        made = [(c["name"], c["args"]) for turn in turns for c in turn]
        if mistakes == "wrong_value":  # the same calls in order, only values changed
            assert [n for n, _ in made] == [n for n, _ in gold], sample.id
            assert [a.keys() for _, a in made] == [g.keys() for _, g in gold], sample.id
        else:  # gold calls, some left out or in another order, none changed
            assert all(call in gold for call in made), (sample.id, made)


@pytest.mark.parametrize(
    "model",
    ["sim:seed=x", "sim:bogus=1", "sim:seed", "sim:error_rate=2", "sim:parallel=-0.1",
     "sim:mistakes=skip+typo", "sim:latency=-1"],
)  # fmt: skip
def test_bad_sim_options_are_refused(model):
    with pytest.raises(ModelError):
        parse_model(model)


def test_sim_options_parse():
    spec = parse_model("sim:seed=3,error_rate=0.5,mistakes=skip+swap,parallel=0")
    assert spec.simulated and spec.provider == "sim"
    assert spec.settings["seed"] == 3
    assert spec.settings["error_rate"] == 0.5
    assert spec.settings["mistakes"] == "skip+swap"
    assert spec.settings["parallel"] == 0
    assert parse_model("sim").settings == parse_model("sim:").settings
    assert parse_model("sim").settings["seed"] == 0
    with pytest.raises(ModelError):
        parse_model("sim", {"api_key": "x"})  # secrets are never options


def test_error_rate_zero_scores_perfectly(tmp_path):
    store = Store(tmp_path / "traces")
    summary = _record(store, "sim:seed=1,error_rate=0")
    assert summary.ok == len(DATASET)

    result = score_run(store, summary.run_id)
    assert result.summary["tsa"] == 1.0
    assert result.summary["tp"] == 1.0
    assert result.summary["ahr"] == 0.0
    assert result.summary["args_invalid"] == 0
    assert result.summary["args_total"] > 0
    assert result.summary["n_errors"] == 0
    scores = result.scores
    assert scores["tp"].to_list() == [1.0] * len(DATASET)
    assert set(scores["tsa"].drop_nulls().to_list()) == {1.0}
    assert scores["tsa"].null_count() == sum(1 for e in DATASET if not e["target"])
    assert scores["args_missing"].sum() == 0
    assert (scores["n_agent"] == scores["n_gold"]).all()


def test_transient_faults_are_retried(tmp_path):
    """``fault_rate`` fails each model turn with probability p; the runner retries.

    Short samples (at most one gold call, so at most two model turns) keep the chance that
    retries=5 is not enough negligible. Faults depend on (seed, sample, turn, call number)
    only, so two runs with several workers retry exactly the same calls.
    """
    short = [e for e in DATASET if len(e["target"]) <= 1]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(short))
    inputs = load_inputs(None, path, BUILTIN.tools, BUILTIN.system_prompt)
    store = Store(tmp_path / "traces")
    summary = _record(store, "sim:fault_rate=0.3", inputs, workers=4, retries=5, backoff=0.001)
    again = _record(
        Store(tmp_path / "again"), "sim:fault_rate=0.3", inputs, workers=3, retries=5,
        backoff=0.001,
    )  # fmt: skip
    first = {r["sample_id"]: r["attempts"] for r in _rows(Path(summary.run_dir), "samples.parquet")}
    second = {r["sample_id"]: r["attempts"] for r in _rows(Path(again.run_dir), "samples.parquet")}
    assert first == second

    rows = _rows(Path(summary.run_dir), "samples.parquet")
    assert len(rows) == len(short)
    assert {r["status"] for r in rows} == {"ok"}
    attempts = [r["attempts"] for r in rows]
    assert max(attempts) > 1
    assert summary.retries == sum(a - 1 for a in attempts) > 0
    # a retried sample keeps only its last attempt's messages: one human message each
    messages = _rows(Path(summary.run_dir), "messages.parquet")
    humans = [m["sample_id"] for m in messages if m["type"] == "human"]
    assert sorted(humans) == sorted(str(e["id"]) for e in short)


# -- inputs record refuses -----------------------------------------------------------------


def test_json_tool_specs_cannot_be_recorded(tmp_path):
    tools_json = tmp_path / "tools.json"
    tools_json.write_text(json.dumps(load_inputs("tool-call").toolset.to_list()))
    inputs = load_inputs(None, BUILTIN.dataset, str(tools_json), BUILTIN.system_prompt)
    assert inputs.toolset.tools is None
    store = Store(tmp_path / "traces")
    with pytest.raises(InputError, match="JSON"):
        record_run(inputs, parse_model("sim"), store, run_id="json-tools")
    assert store.runs() == []

    result = CliRunner().invoke(
        main,
        ["record", "--dataset", str(BUILTIN.dataset), "--tools", str(tools_json),
         "--system-prompt", str(BUILTIN.system_prompt), "--model", "sim",
         "--store", str(store.root), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: ")
    assert store.runs() == []


@pytest.mark.parametrize(
    "options",
    [{"error_rate": "5"}, {"seed": "abc"}, {"mistakes": "foo"}, {"latency": "-1"},
     {"fault_rate": "nan"}, {"latency": "inf"}, {"temperature": "0"}],
)  # fmt: skip
def test_sim_model_options_are_checked_like_the_model_string(options):
    ((key, value),) = options.items()
    with pytest.raises(ModelError) as inline:
        parse_model(f"sim:{key}={value}")
    with pytest.raises(ModelError) as given:
        parse_model("sim", options)
    assert given.value.message == inline.value.message.replace("sim option", "--model-option")


@pytest.mark.parametrize(
    "option",
    [{"timeout": float("nan")}, {"timeout": float("inf")}, {"call_timeout": float("nan")},
     {"call_timeout": -1.0}, {"backoff": -1.0}, {"backoff": float("inf")},
     {"max_rpm": float("nan")}, {"max_tpm": float("inf")}],
)  # fmt: skip
def test_runner_options_must_be_finite(option):
    with pytest.raises(InputError, match="must be a finite number"):
        RecordOptions(**option)


def test_record_prints_the_totals_the_manifest_keeps(tmp_path):
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=7", "--run-id", "r", "--store", root)
    assert result.exit_code == 0, result.output
    totals = json.loads((root / "r" / "manifest.json").read_text())["totals"]
    assert result.stdout.splitlines()[0].startswith(
        f"run r (simulated model): 94/94 ok, {totals['errors']} errors, {totals['retries']} "
        f"retries, {totals['input_tokens']:,} input and {totals['output_tokens']:,} output "
        "tokens; recorded 94 in "
    )


def test_a_sim_option_given_twice_is_refused():
    """The model id (``sim:seed=7``) names the run: an option may not say another seed."""
    with pytest.raises(ModelError, match=r"^--model-option seed=8: seed is given in sim:seed=7"):
        parse_model("sim:seed=7", {"seed": "8"})
    assert parse_model("sim:seed=7", {"error_rate": "0.5"}).settings["error_rate"] == 0.5


@pytest.mark.parametrize(
    ("model", "hint"),
    [
        ("google:gemini-2.5-flash", "did you mean --model google_genai:gemini-2.5-flash?"),
        ("gemini:gemini-2.5-pro", "did you mean --model google_genai:gemini-2.5-pro?"),
        ("opneai:gpt-4o", "did you mean --model openai:gpt-4o?"),
    ],
)
def test_a_provider_langchain_does_not_know_gets_the_one_meant(model, hint):
    from tcbreplay._record.models import build_chat_model

    with pytest.raises(ModelError, match="Unsupported provider") as info:
        build_chat_model(parse_model(model))
    assert info.value.hint == hint


def test_an_empty_model_is_refused_not_taken_for_the_default(tmp_path):
    """`--model ''` (an unset variable in a script) recorded with the default provider."""
    result = cli("record", "--model", "", "--store", tmp_path / "s")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "Error: --model '': expected PROVIDER:NAME (for example google_genai:gemini-2.5-flash) "
        "or sim"
    )
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("text", ["", " \n\t\n"])
def test_an_empty_system_prompt_file_is_warned_of_naming_it(tmp_path, text):
    """An empty (or whitespace-only) --system-prompt file was recorded with in silence: the
    agent sent no instructions, and nothing said why its calls went astray."""
    prompt = tmp_path / "empty.txt"
    prompt.write_text(text)
    result = cli("record", "--model", "sim", "--limit", 2, "--system-prompt", prompt,
                 "--run-id", "k", "--quiet", "--store", tmp_path / "traces")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"Warning: {prompt}: the system prompt is empty (or whitespace only): the agent is "
        "sent no instructions"
    ]
