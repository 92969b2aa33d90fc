"""Telling a file's dialect: every registered dialect's sniff is asked and the surest wins; a
pick others could read says so, a fallback names what it tried, and a file no dialect fits
is refused with every dialect's reason, never read as LangChain's by default (#28)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import TEST_DATA, cli

from tcbreplay._importers import registry
from tcbreplay._importers.dialect import GUESS, HEAD_BYTES, Dialect, TraceFile
from tcbreplay._importers.sniff import sniff
from tcbreplay.errors import TraceError

DATA = TEST_DATA
PLAIN = {"sample_id": "add", "messages": [
    {"role": "user", "content": "What is 2 plus 3?"}, {"role": "assistant", "content": "5"},
]}  # fmt: skip


def jsonl(*lines: dict) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def refusal(tmp_path: Path, name: str, data: bytes) -> list[str]:
    """The stderr lines of importing a file of ``data`` without --format (refused)."""
    path = tmp_path / name
    path.write_bytes(data)
    result = cli("import", "--traces", path, "--run-id", "x", "--store", tmp_path / "s")
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "s").exists()
    return result.stderr.splitlines()


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("notes.txt", b"hello\n"),
        ("pretty.json", json.dumps({"model": "x", "runs": []}, indent=2).encode()),
        ("lines.jsonl", jsonl({"sample_id": 1, "conversation": []})),
        ("latin1.jsonl", '{"é": 1}\n'.encode("latin-1")),
        ("empty.jsonl", b""),
    ],
)
def test_a_file_no_dialect_fits_is_refused_with_every_dialects_reason(tmp_path, name, data):
    """Such a file was read as LangChain's, and without a dataset the error was `--dataset
    is required with --format langchain`. One line (it was one per dialect), each dialect
    named with its reason; an empty file is said to be empty."""
    lines = refusal(tmp_path, name, data)
    if not data:
        assert lines == [f"Error: {name}: it is empty: no traces to import"]
        return
    assert len(lines) == 2
    assert lines[0].startswith(f"Error: {name}: cannot tell its format: no dialect fits it (")
    reasons = lines[0].split(" (", 1)[1]
    for dialect in registry.names():
        assert re.search(rf"(^|; |, ){re.escape(dialect)}(, [a-z0-9-]+)*: \S", reasons), dialect
    assert lines[-1] == f"Hint: give --format ({', '.join(registry.names())})"


def test_each_reason_says_what_the_dialect_missed(tmp_path):
    lines = refusal(tmp_path, "lines.jsonl", jsonl({"sample_id": 1, "conversation": []}))
    assert lines[0] == (
        "Error: lines.jsonl: cannot tell its format: no dialect fits it ("
        "langchain, openai, anthropic: its first line is not an object with a messages list; "
        "tau-bench: it is not a JSON list (of τ-bench results); "
        "tau2: it is a JSON object without τ²-bench's tasks and simulations; "
        "inspect: neither a zip file (.eval) nor a JSON object with eval and version; "
        "langsmith: neither LangSmith runs (objects with run_type and trace_id) nor the "
        "SDK's posted payloads; "
        "langfuse: not Langfuse observations (objects with trace_id or traceId, type and "
        "a parent observation field); "
        "abet-evaluation: a JSON object without samples and results (a dashboard file's); "
        "otlp: neither OTLP/JSON (resourceSpans) nor OTLP protobuf; "
        "jaeger: not a JSON object with data (Jaeger's traces); "
        "bfcl: its first line is not a BFCL result (id, result))"
    )


def test_a_file_two_dialects_read_goes_to_the_surer_and_says_so():
    chosen = sniff(TraceFile("plain.jsonl", data=jsonl(PLAIN)))
    assert chosen.dialect == "openai"
    assert chosen.verdicts["anthropic"].fits
    assert chosen.verdicts["openai"].confidence > chosen.verdicts["anthropic"].confidence
    assert chosen.reason == (
        "its messages are user and assistant turns (read as OpenAI's); anthropic fits too, "
        "less surely (its messages are plain user and assistant turns)"
    )


def test_the_import_says_which_other_dialect_fit(tmp_path):
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([{"id": "add", "input": "What is 2 plus 3?", "target": []}]))
    traces = tmp_path / "plain.jsonl"
    traces.write_bytes(jsonl(PLAIN))
    result = cli("import", "--dataset", dataset, "--tools", DATA / "tools_shop.json",
                 "--traces", traces, "--run-id", "p", "--store", tmp_path / "s")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: openai (its messages are user and assistant turns")
    assert "anthropic fits too, less surely" in result.stderr


def test_equally_sure_dialects_go_to_the_first_registered(monkeypatch, tmp_path):
    (tmp_path / "tie_dialect.py").write_text(
        "from tcbreplay._importers.dialect import Sniff\n"
        "def sniff(file):\n    return Sniff(0.9, 'any file is its')\n"
        "def read(file, inputs):\n    raise NotImplementedError\n"
    )
    monkeypatch.syspath_prepend(tmp_path)
    rows = [Dialect(name, "tie_dialect", f"dialect {name}") for name in ("b", "a")]
    monkeypatch.setattr(registry, "DIALECTS", {d.name: d for d in rows})
    chosen = sniff(TraceFile("x", data=b"x"))
    assert chosen.dialect == "b"
    assert chosen.reason == "any file is its; a fits too, less surely (any file is its)"


def test_a_fallback_says_so_and_names_every_dialect_it_tried():
    """A first line whose messages tell no dialect is read as LangChain's, as before, but
    the choice now says it was a guess and why every other dialect did not fit."""
    chosen = sniff(TraceFile("t.jsonl", data=jsonl({"sample_id": "0", "messages": []})))
    assert chosen.dialect == "langchain"
    assert chosen.verdicts["langchain"].confidence < GUESS
    assert chosen.reason.startswith(
        "its first line's messages tell no dialect: read as LangChain's; no dialect fits "
        "better (openai: its messages have none of OpenAI's roles"
    )
    for name in registry.names():
        if name != "langchain":
            assert f"{name}: {chosen.verdicts[name].reason}" in chosen.reason


def test_a_file_only_one_dialect_nearly_fits_gets_that_dialects_reason(tmp_path):
    lines = refusal(tmp_path, "t.json", json.dumps([{"a": 1}]).encode())
    assert lines[0] == (
        "Error: t.json: cannot tell its format: it is a JSON list, but not of τ-bench results"
    )
    assert len(lines) == 2


def test_a_dialect_sniffing_never_picks_is_named_with_how_to_give_it():
    data = jsonl({"id": "simple_python_0", "result": []})
    with pytest.raises(TraceError, match="it looks like a BFCL results file") as caught:
        sniff(TraceFile("results.jsonl", data=data))
    assert caught.value.hint == registry.get("bfcl").given_only


# ---------------------------------------------------------------- what a sniff reads


def test_a_file_sniffs_the_same_from_its_path_or_its_bytes():
    for path in [DATA / "import" / "traces_shapes.jsonl", DATA / "abet" / "evaluation.json",
                 DATA / "tau-bench" / "gpt-4o-airline-sample.json"]:  # fmt: skip
        by_path = sniff(TraceFile.at(path))
        by_bytes = sniff(TraceFile(path.name, data=path.read_bytes()))
        assert by_path == by_bytes


def test_sniffing_json_lines_reads_only_their_first_lines(tmp_path):
    """A sniff looks at a bounded prefix: what follows the first two lines is not read (here
    it is not even UTF-8 text; reading the file says so)."""
    path = tmp_path / "big.jsonl"
    first = {"sample_id": "0", "messages": [{"role": "tool", "content": "5"}]}
    path.write_bytes(jsonl(first, first) + b"\xff" * (4 * HEAD_BYTES))
    file = TraceFile.at(path)
    assert sniff(file).dialect == "openai"
    assert len(file.head) == HEAD_BYTES
    assert file._data is None  # the whole file was never read
    with pytest.raises(TraceError, match=r"^big\.jsonl: not UTF-8 text"):
        registry.get("openai").read(file, None)


def test_a_byte_order_mark_and_blank_lines_before_the_first_line_are_skipped():
    data = b"\xef\xbb\xbf\n  \n" + jsonl(PLAIN)
    assert sniff(TraceFile("t.jsonl", data=data)).dialect == "openai"
    assert TraceFile("t.jsonl", data=data).first_line.value == PLAIN
