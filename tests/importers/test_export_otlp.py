"""``export --format otlp`` writes a run as OTLP/JSON spans with the current GenAI conventions,
which the otlp dialect reads back as the same run: its samples, trials, statuses, metadata,
gold calls and scores, and its messages as the spans hold them (OpenAI's form, with the
messages' ids, token counts and latencies)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, cli
from run_contents import message_hashes, record_mixed_run, samples, scores

from tcbreplay._importers.dialect import TraceFile
from tcbreplay._importers.openai import to_openai
from tcbreplay._importers.sniff import sniff


def export_and_import(root: Path, run_id: str, tmp_path: Path) -> tuple[Path, Path]:
    """Export the run as OTLP and import it, by the command export prints, into a new store;
    the export's folder and that store's root."""
    out = tmp_path / "export"
    result = cli("export", run_id, "-o", out, "--format", "otlp", "--store", root)
    assert result.exit_code == 0, result.output
    names = [Path(line).name for line in result.stdout.splitlines()[:-1]]
    assert names == ["traces.otlp.jsonl", "dataset.jsonl", "tools.json", "manifest.json"]
    command = result.stdout.splitlines()[-1].split(": tcbreplay ")[1].split()
    assert command[:2] == ["import", "--traces"]  # the spans hold the dataset and tools
    other = tmp_path / "other"
    imported = cli(*command, "--store", other)
    assert imported.exit_code == 0, imported.output
    return out, other


def as_spans_hold_them(root: Path, run_id: str) -> dict[tuple, list]:
    """Each trial's messages in OpenAI's form, with their ids and token counts (latencies:
    :func:`latencies`)."""
    rows = pq.read_table(root / run_id / "messages.parquet").to_pylist()
    out: dict[tuple, list] = {}
    for r in sorted(rows, key=lambda r: (r["sample_index"], r["position"])):
        data = json.loads(r["message"])
        (shown,) = to_openai([data])
        shown.pop("name", None)
        ident = data["data"].get("id") if r["type"] == "ai" else None
        out.setdefault((r["sample_id"], r["trial"]), []).append(
            (shown, ident, r["input_tokens"], r["output_tokens"])
        )
    return out


def latencies(root: Path, run_id: str) -> dict[tuple, float | None]:
    rows = pq.read_table(root / run_id / "messages.parquet").to_pylist()
    return {(r["sample_id"], r["trial"], r["position"]): r["latency_s"] for r in rows}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A recorded run with two trials, errors among its samples, and metadata."""
    return record_mixed_run(tmp_path_factory.mktemp("recorded") / "traces")


def test_a_recorded_run_reads_back_equal(recorded, tmp_path):
    _, other = export_and_import(recorded, "rec", tmp_path)
    assert samples(other, "rec") == samples(recorded, "rec")
    assert scores(other, "rec").equals(scores(recorded, "rec"))
    assert as_spans_hold_them(other, "rec") == as_spans_hold_them(recorded, "rec")
    back, before = latencies(other, "rec"), latencies(recorded, "rec")
    assert back.keys() == before.keys()
    assert all(  # spans keep nanoseconds
        (b is None and a is None) or abs(b - a) < 1e-9
        for a, b in zip(before.values(), back.values(), strict=True)
    )
    statuses = {r["status"] for r in samples(recorded, "rec")}
    assert statuses == {"ok", "error"}  # errors go and come back as errors
    assert {r["trial"] for r in samples(recorded, "rec")} == {0, 1}
    # the run's model as recorded (sim:seed=...), not as its answers name it (tcbreplay-sim)
    before, after = (
        json.loads((s / "rec" / "manifest.json").read_text()) for s in (recorded, other)
    )
    assert (after["model"]["id"], after["model"]["simulated"]) == (before["model"]["id"], True)
    assert before["model"]["id"].startswith("sim:")
    # read back, written and read again: the same messages (an import's times are its own)
    _, again = export_and_import(other, "rec", tmp_path / "again")
    assert message_hashes(again, "rec") == message_hashes(other, "rec")


def test_the_export_is_otlp_json_with_the_current_genai_conventions(recorded, tmp_path):
    out, _ = export_and_import(recorded, "rec", tmp_path)
    path = out / "traces.otlp.jsonl"
    assert sniff(TraceFile.at(path)).dialect == "otlp"
    lines = path.read_text().splitlines()
    assert len(lines) == 1  # 60 trials, up to 100 traces a request
    spans = json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"]
    names = {s["name"].split()[0] for s in spans}
    assert names == {"invoke_agent", "chat", "execute_tool"}
    chat = next(s for s in spans if s["name"].startswith("chat"))
    attributes = {a["key"]: a["value"] for a in chat["attributes"]}
    output = json.loads(attributes["gen_ai.output.messages"]["stringValue"])
    assert output[0]["role"] == "assistant"
    assert {p["type"] for p in output[0]["parts"]} <= {"text", "tool_call"}
    assert len({s["traceId"] for s in spans}) == 60
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)


def test_an_imported_run_reads_back_equal(tmp_path):
    """Spans imported from openai-v2's instrumentation: exported, they come back the same."""
    root = tmp_path / "traces"
    traces = TEST_DATA / "otel" / "openai_v2_latest.otlp.jsonl"
    assert cli("import", "--traces", traces, "--run-id", "ot", "--store", root).exit_code == 0
    _, other = export_and_import(root, "ot", tmp_path)
    assert message_hashes(other, "ot") == message_hashes(root, "ot")
    assert samples(other, "ot") == samples(root, "ot")
    assert scores(other, "ot").equals(scores(root, "ot"))


@pytest.mark.slow  # (2-4 s: make test keeps under its 4 minutes)
def test_an_imported_run_of_two_turns_a_missing_sample_and_roles_reads_back_equal(tmp_path):
    """An import keeps no latencies: every span started at once, and the reader ordered a
    sample's turns by their random ids (calls swapped and repeated: tp 0.154 -> 0.078 on
    tau-bench); a sample without a trace was left out (3 samples -> 2); the tools' roles were
    dropped (write_exact null)."""
    tools = [{"name": "search", "role": "read", "description": "s", "parameters": {
                 "type": "object", "properties": {"query": {"type": "string"}}}},
             {"name": "convert", "role": "write", "description": "c", "parameters": {
                 "type": "object", "properties": {"amount": {"type": "number"}}}}]  # fmt: skip
    entries = [{"id": f"s{k}", "input": f"q{k}", "target": [
        {"name": "search", "args": {"query": f"a{k}"}}, {"name": "convert", "args": {"amount": k}}]}
        for k in range(1, 4)]  # fmt: skip

    def turn(name: str, args: dict, k: int) -> dict:
        call = {"id": f"c{k}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    lines = [{"sample_id": e["id"], "messages": [
        {"role": "user", "content": e["input"]},
        *(turn(g["name"], g["args"], j) for j, g in enumerate(e["target"])),
    ]} for e in entries[:2]]  # fmt: skip
    for name, value in (("tools.json", tools), ("ds.json", entries)):
        (tmp_path / name).write_text(json.dumps(value))
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    root = tmp_path / "traces"
    made = cli("import", "--traces", tmp_path / "t.jsonl", "--dataset", tmp_path / "ds.json",
               "--tools", tmp_path / "tools.json", "--run-id", "imp", "--store", root)  # fmt: skip
    assert made.exit_code == 0, made.output
    _, other = export_and_import(root, "imp", tmp_path)
    query = ("select sample_id, name, args from tool_calls where run_id = 'imp' order by "
             "sample_id, call_index")  # fmt: skip

    def calls(store: Path) -> list:
        return json.loads(cli("sql", query, "--format", "json", "--store", store).stdout)

    assert calls(other) == calls(root)  # in their order, each once
    assert samples(other, "imp") == samples(root, "imp")  # s3 too, missing
    assert scores(other, "imp").equals(scores(root, "imp"))
    summary = json.loads(cli("score", "imp", "--format", "json", "--store", other).stdout)
    before = json.loads(cli("score", "imp", "--format", "json", "--store", root).stdout)
    assert summary["write_exact"] == before["write_exact"] == 2 / 3  # (s3 missing)
    assert summary["n_samples"] == 3


# the messages after their trial's last model answer that are no tool result
_AFTER_LAST_ANSWER = """
with last as (select sample_index, max(position) as answered from messages where type = 'ai'
              group by all)
select count(*) as n from messages join last using (sample_index)
where position > answered and type <> 'tool'
"""


def test_messages_after_the_last_answer_are_said_left_out(tmp_path):
    """τ²-bench's user says a last word after the agent's last answer (``###STOP###``,
    ``###TRANSFER###``): no span held it, and the export dropped it without a word (its
    import had fewer messages than the run)."""
    root = tmp_path / "traces"
    airline = TEST_DATA / "tau2" / "gpt-4.1_airline_sample.json"
    assert cli("import", "--traces", airline, "--run-id", "air", "--store", root).exit_code == 0
    found = cli("sql", "--store", root, "--format", "json", _AFTER_LAST_ANSWER)
    (after,) = json.loads(found.stdout)
    assert after["n"] > 0
    result = cli("export", "air", "-o", tmp_path / "x", "--format", "otlp", "--store", root)
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warned) == 1, result.stderr
    assert warned[0].startswith(
        f"Warning: {after['n']} messages of run air come after their trial's last model answer "
        "(the first in sample "
    )
    assert warned[0].endswith(
        "which --format otlp cannot hold: they are left out (--format langchain keeps them)"
    )
    _, other = export_and_import(root, "air", tmp_path)
    counted = [json.loads(cli("sql", "--store", where, "--format", "json",
                              "select count(*) as n from messages").stdout)[0]["n"]
               for where in (root, other)]  # fmt: skip
    assert counted[1] == counted[0] - after["n"]  # the messages said, and no others
