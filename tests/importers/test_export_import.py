"""export writes what import reads (#20): an export imported into another store gives the same
messages (equal hashes) and the same scores, for a recorded run and for an imported one."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA, cli
from run_contents import message_hashes, record_mixed_run, samples, scores

DATA = TEST_DATA
TAU = DATA / "tau-bench"
# calls whose arguments hold NaN, Infinity and [NaN], in LangChain's form
NONFINITE = DATA / "import" / "nonfinite"


def export_and_import(root: Path, run_id: str, fmt: str, tmp_path: Path) -> Path:
    """Export the run in ``fmt`` and import it, by the command export prints, into a new
    store; that store's root."""
    out = tmp_path / f"export-{fmt}"
    result = cli("export", run_id, "-o", out, "--format", fmt, "--store", root)
    assert result.exit_code == 0, result.output
    names = [Path(line).name for line in result.stdout.splitlines()[:-1]]
    assert names == ["traces.jsonl", "dataset.jsonl", "tools.json", "manifest.json"]
    said, command_line = result.stdout.splitlines()[-1].split(": tcbreplay ")
    assert said == "next, into another store (--store), or with another --run-id into this one"
    command = command_line.split()
    assert command[:3] == ["import", "--format", fmt]
    other = tmp_path / f"other-{fmt}"
    imported = cli(*command, "--store", other)
    assert imported.exit_code == 0, imported.output
    return other


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A recorded run with two trials, errors among its samples, and metadata."""
    return record_mixed_run(tmp_path_factory.mktemp("recorded") / "traces")


def test_a_recorded_run_round_trips_through_langchain(recorded, tmp_path):
    other = export_and_import(recorded, "rec", "langchain", tmp_path)
    assert message_hashes(other, "rec") == message_hashes(recorded, "rec")
    assert samples(other, "rec") == samples(recorded, "rec")
    assert scores(other, "rec").equals(scores(recorded, "rec"))
    statuses = {r["status"] for r in samples(recorded, "rec")}
    assert statuses == {"ok", "error"}  # errors go and come back as errors
    assert {r["trial"] for r in samples(recorded, "rec")} == {0, 1}
    # the export's folder names its run's benchmark and model (they were custom, unknown)
    before, after = (
        json.loads((s / "rec" / "manifest.json").read_text()) for s in (recorded, other)
    )
    assert after["benchmark"] == before["benchmark"]
    assert (after["model"]["id"], after["model"]["simulated"]) == (before["model"]["id"], True)


def test_a_recorded_run_round_trips_through_openai_with_its_scores(recorded, tmp_path):
    """OpenAI's form has no room for message ids, usage or response metadata: the messages
    come back as OpenAI's form holds them, the calls and scores as they were."""
    other = export_and_import(recorded, "rec", "openai", tmp_path)
    assert scores(other, "rec").equals(scores(recorded, "rec"))
    assert samples(other, "rec") == samples(recorded, "rec")
    again = export_and_import(other, "rec", "openai", tmp_path / "again")
    assert message_hashes(again, "rec") == message_hashes(other, "rec")


def test_a_partial_run_round_trips_with_its_samples_only(tmp_path):
    """A run recorded with --limit: its export's dataset held every entry, and the import
    stored the others as missing, which scored as making no calls (tsa 1.0 became 0.16)."""
    root = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=11,latency=0,error_rate=0.3", "--limit", 12,
               "--trials", 2, "--run-id", "part", "--quiet", "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output
    other = export_and_import(root, "part", "langchain", tmp_path)
    exported = (tmp_path / "export-langchain" / "dataset.jsonl").read_text().splitlines()
    held = [r["sample_id"] for r in samples(root, "part") if r["trial"] == 0]
    assert [json.loads(line)["id"] for line in exported] == held
    # each row as it was but its number (a trial's rows follow its dataset's, now 12 long)
    assert [{**r, "sample_index": None} for r in samples(other, "part")] == [
        {**r, "sample_index": None} for r in samples(root, "part")]  # fmt: skip

    def by_sample(frame):
        return frame.drop("sample_index").sort("sample_id", "trial")

    assert by_sample(scores(other, "part")).equals(by_sample(scores(root, "part")))


@pytest.mark.parametrize("fmt", ["langchain", "openai"])
def test_an_imported_run_round_trips_with_equal_hashes(tmp_path, fmt):
    """τ-bench's trajectories, imported from OpenAI's form: either export gives them back."""
    root = tmp_path / "traces"
    result = cli("import", "--traces", TAU / "gpt-4o-airline-sample.json", "--tools",
                 TAU / "airline-tools.json", "--run-id", "tau", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    other = export_and_import(root, "tau", fmt, tmp_path)
    assert message_hashes(other, "tau") == message_hashes(root, "tau")
    assert samples(other, "tau") == samples(root, "tau")
    assert scores(other, "tau").equals(scores(root, "tau"))


def test_openai_export_writes_invalid_arguments_back_as_they_were(tmp_path):
    line = {"sample_id": "add", "messages": [
        {"role": "user", "content": "What is 2 plus 3?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "add_numbers", "arguments": '{"a": 3,'}}]},
    ]}  # fmt: skip
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps(line) + "\n")
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([{"id": "add", "input": "What is 2 plus 3?", "target": []}]))
    root = tmp_path / "traces"
    assert cli("import", "--dataset", dataset, "--tools", DATA / "tools_shop.json", "--traces",
               traces, "--run-id", "x", "--store", root).exit_code == 0  # fmt: skip
    out = tmp_path / "out"
    assert cli("export", "x", "-o", out, "--format", "openai", "--store", root).exit_code == 0
    (back,) = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()]
    assert back["messages"] == line["messages"]


def test_tables_keep_the_old_export(recorded, tmp_path):
    out = tmp_path / "tables"
    result = cli("export", "rec", "-o", out, "--format", "tables", "--store", recorded)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json", "messages.jsonl", "samples.jsonl"
    ]  # fmt: skip
    first = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    assert first["trial"] == 0 and json.loads(first["metadata"]) == {"k": 0, "tags": ["a"]}


@pytest.mark.parametrize("fmt", ["langchain", "otlp"])
def test_a_dataset_file_the_run_did_not_write_is_refused(recorded, tmp_path, fmt):
    """Reported: a gold call changed in the run's dataset.jsonl was exported as the run's,
    and the export's import scored otherwise (ahr 0.33 became 0.67) while `audit verify`
    passed."""
    root = tmp_path / "traces"
    shutil.copytree(recorded / "rec", root / "rec")
    path = root / "rec" / "dataset.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    next(e for e in entries if e["target"])["target"] = []
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    out = tmp_path / "out"
    result = cli("export", "rec", "-o", out, "--format", fmt, "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        f"Error: {path}: not the file the run wrote (its sha256 is not the one manifest.json "
        "recorded): it was changed or replaced since; restore it, or record the run again "
        "with --overwrite"
    )
    assert not out.exists()


def _run_of(origin: str, root: Path) -> str:
    """A run made by ``origin`` (import, collect, replay) in the store ``root``; its id."""
    spans = TEST_DATA / "otel" / "openai_v2_latest.otlp.pb"
    if origin == "collect":
        from tcbreplay._importers.otel.collect import Collector
        from tcbreplay._store.runs import Store

        collector = Collector(Store(root), origin)
        collector.receive(spans.read_bytes(), "application/x-protobuf")
        collector.finish()
        return origin
    if origin == "replay":
        made = cli("record", "--model", "sim:seed=3,latency=0", "--run-id", "p", "--limit", 3,
                   "--quiet", "--store", root)  # fmt: skip
        assert made.exit_code == 0, made.output
        made = cli("replay", "p", "--run-id", origin, "--store", root)
    else:
        made = cli("import", "--traces", spans, "--run-id", origin, "--store", root)
    assert made.exit_code == 0, made.output
    return origin


@pytest.mark.parametrize(
    ("origin", "again"),
    [
        ("import", "import its traces again under another --run-id"),
        ("collect", "import its received files (received.otlp.*) under another --run-id"),
        ("replay", "replay its parent again with --overwrite"),
    ],
)
def test_a_changed_dataset_file_of_a_run_not_recorded_says_how_to_make_it_again(
    tmp_path, origin, again
):
    """The refusal said to record the run again with --overwrite, which an import, a
    collection or a replay is not made by."""
    root = tmp_path / "traces"
    run_id = _run_of(origin, root)
    path = root / run_id / "dataset.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    entries[0]["target"] = [{"name": "list_items", "args": {}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = cli("export", run_id, "-o", tmp_path / "out", "--store", root)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        f"Error: {path}: not the file the run wrote (its sha256 is not the one manifest.json "
        f"recorded): it was changed or replaced since; restore it, or {again}"
    )


@pytest.mark.slow  # (a few seconds under the suite's load: make test's budget)
def test_an_export_into_a_folder_of_another_export_is_refused(recorded, tmp_path):
    """An export in another format beside an earlier one left the earlier traces beside the
    new manifest: an uploaded artefact mixed two runs."""
    out = tmp_path / "out"
    assert cli("export", "rec", "-o", out, "--store", recorded).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = cli("export", "rec", "-o", out, "--store", recorded)  # the same export: replaced
    assert again.exit_code == 0, again.output
    other = cli("export", "rec", "-o", out, "--format", "otlp", "--store", recorded)
    assert other.exit_code == 2
    assert other.stderr.startswith(f"Error: -o {out}: it holds traces.jsonl of another export")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize(
    "fmt",
    ["langchain",
     *(pytest.param(f, marks=pytest.mark.slow) for f in ("openai", "otlp", "tables"))],  # 2-3 s
)  # fmt: skip
def test_an_export_in_slices_writes_the_bytes_of_one_slice(recorded, tmp_path, monkeypatch, fmt):
    """Export reads a run a slice of samples at a time: a run of many slices, its messages
    shuffled into row groups of a few rows each (so a slice reads some of them, in no order),
    exports byte for byte what one slice of the whole run exports."""
    import numpy as np
    import pyarrow.parquet as pq

    from tcbreplay._store import export as store_export

    run_dir = recorded / "rec"
    whole = tmp_path / "whole"
    assert cli("export", "rec", "-o", whole, "--format", fmt, "--store", recorded).exit_code == 0
    copy = tmp_path / "copy"
    (copy / "rec").mkdir(parents=True)
    for name in ("manifest.json", "dataset.jsonl"):
        (copy / "rec" / name).write_bytes((run_dir / name).read_bytes())
    samples = pq.read_table(run_dir / "samples.parquet")
    pq.write_table(samples, copy / "rec" / "samples.parquet", row_group_size=4)
    messages = pq.read_table(run_dir / "messages.parquet")
    shuffled = messages.take(np.random.default_rng(1).permutation(messages.num_rows))
    pq.write_table(shuffled, copy / "rec" / "messages.parquet", row_group_size=16)
    monkeypatch.setattr(store_export, "SLICE_SAMPLES", 3)
    assert samples.num_rows == 60  # twenty slices
    names = sorted(p.name for p in whole.iterdir())
    for keep in (store_export.KEEP_BYTES, 0):  # row groups kept for the next slices, or not
        monkeypatch.setattr(store_export, "KEEP_BYTES", keep)
        sliced = tmp_path / f"sliced-{keep}"
        result = cli("export", "rec", "-o", sliced, "--format", fmt, "--store", copy)
        assert result.exit_code == 0, result.output
        assert names == sorted(p.name for p in sliced.iterdir())
        for name in names:
            assert (sliced / name).read_bytes() == (whole / name).read_bytes(), (keep, name)


def test_values_orjson_would_write_otherwise_come_back_as_they_were(tmp_path):
    """Export writes by orjson what orjson read, and by Python's writer the rest: a call
    whose arguments hold NaN, an infinity and an integer beyond 64 bits (which orjson
    would write as null, or refuse) comes back as it was, beside one orjson reads. The
    dataset's inputs hold U+2028, which JSON leaves unescaped: its lines end at "\n" only."""
    from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

    odd = {"a": float("nan"), "b": float("-inf"), "c": 2**70, "d": "é\u2028"}

    def messages(args: dict) -> list[dict]:
        call = {"id": "c1", "name": "add_numbers", "args": args}
        return messages_to_dict(
            [HumanMessage("What is 2 plus 3?"), AIMessage("", tool_calls=[call])]
        )

    lines = [{"sample_id": "odd", "messages": messages(odd)},
             {"sample_id": "plain", "messages": messages({"a": 2, "b": 3})}]  # fmt: skip
    traces = tmp_path / "t.jsonl"
    traces.write_text("".join(json.dumps(line) + "\n" for line in lines))
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([{"id": s, "input": "What is 2 plus 3?\u2028", "target": []}
                                   for s in ("odd", "plain")]))  # fmt: skip
    root = tmp_path / "traces"
    tools = DATA / "tools_shop.json"
    imported = cli("import", "--format", "langchain", "--dataset", dataset, "--tools", tools,
                   "--traces", traces, "--run-id", "x", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    out = tmp_path / "out"
    assert cli("export", "x", "-o", out, "--store", root).exit_code == 0
    back = {
        row["sample_id"]: row["messages"][1]["data"]["tool_calls"][0]["args"]
        for row in map(json.loads, (out / "traces.jsonl").read_text().split("\n")[:-1])
    }
    assert back["plain"] == {"a": 2, "b": 3}
    assert back["odd"]["a"] != back["odd"]["a"]  # NaN
    assert (back["odd"]["b"], back["odd"]["c"], back["odd"]["d"]) == (
        float("-inf"),
        2**70,
        "é\u2028",
    )
    again = export_and_import(root, "x", "langchain", tmp_path)
    assert message_hashes(again, "x") == message_hashes(root, "x")


@pytest.mark.parametrize("fmt", ["langchain", "openai", "otlp"])
def test_non_finite_argument_values_score_the_same_after_any_round_trip(tmp_path, fmt):
    """Reported: calls whose arguments hold NaN, Infinity and [NaN], imported in LangChain's
    form, scored ahr 3/7; exported in OpenAI's form and imported, 3/3 with 6 arguments
    missing: the openai dialect kept each arguments text whole as invalid arguments. NaN
    and infinities are values in every dialect, and the export writes them back so."""
    root = tmp_path / "traces"
    imported = cli("import", "--format", "langchain", "--dataset", NONFINITE / "dataset.jsonl",
                   "--tools", NONFINITE / "tools.json", "--traces", NONFINITE / "traces.jsonl",
                   "--run-id", "nf", "--store", root)  # fmt: skip
    assert imported.exit_code == 0, imported.output
    result = cli("export", "nf", "-o", tmp_path / "out", "--format", fmt, "--store", root)
    assert result.exit_code == 0, result.output
    command = shlex.split(result.stdout.splitlines()[-1].split(": tcbreplay ")[1])
    other = tmp_path / "other"
    again = cli(*command, "--store", other)
    assert again.exit_code == 0, again.output
    counts = ("ahr", "args_invalid", "args_total", "args_missing")
    before, after = (
        json.loads(cli("score", "nf", "--format", "json", "--store", where).stdout)
        for where in (root, other)
    )
    assert [after[k] for k in counts] == [before[k] for k in counts] == [3 / 7, 3, 7, 0]
    assert scores(other, "nf").equals(scores(root, "nf"))


def test_the_library_exports_take_a_run_and_a_folder_as_text(sim_run, tmp_path):
    """A run id given for the run was an AttributeError, a folder as text a TypeError."""
    from tcbreplay import export_jsonl, export_traces
    from tcbreplay.errors import InputError

    store, run_id = sim_run
    for export in (export_traces, export_jsonl):
        with pytest.raises(InputError, match=r"takes a run \(store.open_run\(run_id\)\), not str"):
            export(run_id, str(tmp_path / "x"))
    written = export_traces(store.open_run(run_id), str(tmp_path / "out"))
    assert [p.name for p in written] == ["traces.jsonl", "dataset.jsonl", "tools.json",
                                         "manifest.json"]  # fmt: skip
    assert [p.name for p in export_jsonl(store.open_run(run_id), str(tmp_path / "j"))] == [
        "samples.jsonl",
        "messages.jsonl",
        "manifest.json",
    ]


@pytest.mark.parametrize("fmt", ["langchain", "openai", "otlp"])
def test_the_users_own_tool_calls_are_kept_or_said_left_out(tmp_path, fmt):
    """τ²-bench's user calls tools too (dual control): the OpenAI and OTLP forms cannot hold
    a user's calls, and an export in them dropped 433 of them without a word (an import of it
    scored --side user 0.0 where the run scored 0.82). langchain keeps them; the others say
    how many they leave out."""
    root = tmp_path / "traces"
    telecom = TEST_DATA / "tau2" / "gpt-4.1_telecom_sample.json"
    assert cli("import", "--traces", telecom, "--run-id", "tel", "--store", root).exit_code == 0
    found = cli("sql", "--store", root, "--format", "json", "select count(*) n from messages "
                "where type = 'human' and calls <> '[]'")  # fmt: skip
    calling = json.loads(found.stdout)[0]["n"]
    assert calling > 0
    result = cli("export", "tel", "-o", tmp_path / fmt, "--format", fmt, "--store", root)
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    if fmt == "langchain":
        assert warned == []
        other = export_and_import(root, "tel", fmt, tmp_path)
        user = [json.loads(cli("score", "tel", "--side", "user", "--format", "json",
                               "--store", where).stdout) for where in (root, other)]  # fmt: skip
        assert [(u["tsa"], u["tp"], u["n_samples"]) for u in user] == [
            (user[0]["tsa"], user[0]["tp"], user[0]["n_samples"])
        ] * 2
        assert user[0]["tsa"] > 0
    elif fmt == "openai":
        assert warned == [
            f"Warning: {calling} user messages of run tel make tool calls, which --format {fmt} "
            "cannot hold: they are left out (--format langchain keeps them)"
        ]
    else:  # (and the user's last words, after the agent's last answer: no span holds them)
        assert len(warned) == 1
        assert warned[0].startswith(
            f"Warning: {calling} user messages of run tel make tool calls and 5 messages come "
            "after their trial's last model answer (the first in sample "
        )
        assert warned[0].endswith(
            "which --format otlp cannot hold: they are left out (--format langchain keeps them)"
        )


def timings(root: Path, run_id: str) -> tuple[list[tuple], list[tuple]]:
    """Each trial's attempts and duration, and each message's latency, of a stored run."""
    import pyarrow.parquet as pq

    rows = pq.read_table(root / run_id / "samples.parquet").to_pylist()
    trials = sorted((r["sample_id"], r["trial"], r["attempts"], r["duration_s"]) for r in rows)
    messages = pq.read_table(root / run_id / "messages.parquet").to_pylist()
    latencies = sorted((m["sample_id"], m["trial"], m["position"], m["latency_s"])
                       for m in messages)  # fmt: skip
    return trials, latencies


@pytest.mark.parametrize("fmt", ["langchain", "openai"])
def test_attempts_durations_and_latencies_come_back_through_the_json_lines_forms(tmp_path, fmt):
    """The langchain and openai exports left each trial's attempts and duration and each
    message's latency out (their import stored 1 attempt, no duration, no latency); the line's
    metadata and LangChain's response_metadata carry them now, and their import takes them
    out again: the same messages and metadata, the timings of the run exported."""
    root = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=4,latency=0.01,fault_rate=0.5", "--retries", 3,
               "--limit", 8, "--run-id", "slow", "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output
    trials, latencies = timings(root, "slow")
    assert any(attempts > 1 for _, _, attempts, _ in trials)  # (retried: the sim's faults)
    assert all(duration is not None for *_, duration in trials)
    assert any(latency is not None for *_, latency in latencies)
    other = export_and_import(root, "slow", fmt, tmp_path)
    assert timings(other, "slow") == (trials, latencies)
    assert samples(other, "slow") == samples(root, "slow")
    if fmt == "langchain":
        assert message_hashes(other, "slow") == message_hashes(root, "slow")


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ({"tcbreplay.attempts": "2"}, "metadata.tcbreplay.attempts must be a whole number"),
        ({"tcbreplay.duration_s": -1}, "metadata.tcbreplay.duration_s must be a number of "
                                       "seconds, not negative"),
        ({"tcbreplay.latency_s": [0.5]}, "metadata.tcbreplay.latency_s must be a list of a "
                                         "latency (or null) per message, 2"),
    ],
)  # fmt: skip
def test_timings_that_are_none_are_refused_naming_the_line(metadata, said):
    from tcbreplay._importers import openai
    from tcbreplay.errors import TraceError

    line = {"sample_id": "s1", "metadata": metadata, "messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
    ]}  # fmt: skip
    with pytest.raises(TraceError) as refused:
        openai.read_lines((json.dumps(line) + "\n").encode(), "traces.jsonl")
    assert str(refused.value).startswith(f"traces.jsonl: line 1: {said}")
