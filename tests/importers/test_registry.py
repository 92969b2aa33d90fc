"""The registry of trace dialects is the one source: ``import``, sniffing, the ``--format``
choices and ``import --help`` all read it, and a dialect registered there (this module is one,
in its tests) is picked up by each (#28)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from pathlib import Path

import click
import pytest
from helpers import TESTS, cli

from tcbreplay._cli import main
from tcbreplay._importers import registry
from tcbreplay._importers.dialect import Dialect, Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.sniff import sniff as sniff_file

PACKAGE = TESTS.parent / "tcbreplay" / "_importers"
TOOLS_JSON = TESTS / "data" / "tools_shop.json"


def format_option():
    command = main.get_command(click.Context(main), "import")
    (option,) = [p for p in command.params if p.name == "fmt"]
    return option


def test_the_format_choices_are_the_registrys_and_every_earlier_one_still():
    assert format_option().type.choices == registry.choices()
    # the names and alias of earlier versions, all kept
    assert registry.choices() == (
        "langchain", "openai", "anthropic", "tau-bench", "tau2", "inspect", "langsmith",
        "langfuse", "abet-evaluation", "otlp", "jaeger", "bfcl", "jsonl",
    )  # fmt: skip
    assert registry.get("jsonl").name == "langchain"


def test_every_registered_dialect_has_the_protocols_face_and_a_test_file():
    tests = {p.name for p in TESTS.rglob("test_dialect_*.py")}
    for dialect in registry.dialects():
        module = importlib.import_module(dialect.module)
        assert list(inspect.signature(module.sniff).parameters) == ["file"], dialect.name
        params = inspect.signature(module.read).parameters.values()
        positional = [p.name for p in params if p.kind != p.KEYWORD_ONLY]
        assert positional == ["file", "inputs"], dialect.name
        # a dialect's own options are keyword-only, and named in its row
        own = tuple(p.name for p in params if p.kind == p.KEYWORD_ONLY)
        assert own == dialect.options, dialect.name
        stem = dialect.module.rsplit(".", 1)[-1]
        assert f"test_dialect_{stem}.py" in tests, f"{dialect.name} has no test file"


def test_every_module_with_a_sniff_and_a_read_is_registered():
    registered = {d.module for d in registry.dialects()}
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        if {"sniff", "read"} <= functions:
            assert f"tcbreplay._importers.{path.stem}" in registered, path.name


def test_import_help_lists_every_dialect_from_the_registry():
    result = cli("import", "--help")
    assert result.exit_code == 0, result.output
    help_text = " ".join(result.stdout.split())  # the help wraps long summaries
    assert "Dialects (--format):" in help_text
    for dialect in registry.dialects():
        assert f"{dialect.name} {dialect.summary}" in help_text
    assert "(also: jsonl)" in help_text


# ---------------------------------------------------------------- a dialect added in a test

FAKE = Dialect("fake", __name__, "a dialect made up by a test", holds_samples=True)


def sniff(file: TraceFile) -> Sniff:
    """This module is the fake dialect's: its files start with a line ``FAKE``."""
    if file.head.startswith(b"FAKE\n"):
        return Sniff(1.0, "it starts with FAKE")
    return Sniff.no("it does not start with FAKE")


def read(file: TraceFile, inputs) -> SourceTraces:
    """A line ``<sample id> <tool> <arguments as JSON>`` per sample, holding its gold call."""
    from langchain_core.messages import AIMessage, HumanMessage

    from tcbreplay._inputs.dataset import dataset_from_entries
    from tcbreplay._record.messages import serialize_messages

    entries, lines = [], []
    for row in file.data.decode().splitlines()[1:]:
        sample_id, tool, args = row.split(" ", 2)
        call = {"name": tool, "args": json.loads(args)}
        entries.append({"id": sample_id, "input": f"call {tool}", "target": [call]})
        messages = [HumanMessage(f"call {tool}"), AIMessage("", tool_calls=[{**call, "id": "c"}])]
        lines.append(TraceLine(sample_id, serialize_messages(messages, {})))
    return SourceTraces(lines, dataset_from_entries(entries, file.name))


@pytest.fixture
def fake(monkeypatch, tmp_path) -> Path:
    """The fake dialect registered, and a file of it."""
    monkeypatch.setitem(registry.DIALECTS, FAKE.name, FAKE)
    path = tmp_path / "calls.fake"
    path.write_text('FAKE\nadd add_numbers {"a": 3, "b": 2}\nsum add_numbers {"a": 1, "b": 1}\n')
    return path


def test_a_registered_dialect_is_sniffed_and_imported(fake, tmp_path):
    chosen = sniff_file(TraceFile.at(fake))
    assert (chosen.dialect, chosen.reason) == ("fake", "it starts with FAKE")
    assert set(chosen.verdicts) == {*registry.names()} and "fake" in chosen.verdicts
    root = tmp_path / "traces"
    result = cli("import", "--traces", fake, "--tools", TOOLS_JSON, "--run-id", "f",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr == "format: fake (it starts with FAKE); --format chooses another\n"
    assert "run f: 2/2 samples imported" in result.stdout
    # named, too
    result = cli("import", "--format", "fake", "--traces", fake, "--tools", TOOLS_JSON,
                 "--run-id", "g", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    scored = cli("score", "g", "--store", root, "--format", "json")
    assert json.loads(scored.stdout)["tsa"] == 1.0


def test_a_registered_dialect_is_in_the_help_and_in_every_refusal(fake, tmp_path):
    help_text = " ".join(cli("import", "--help").stdout.split())
    assert "fake a dialect made up by a test" in help_text
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    result = cli("import", "--traces", notes, "--run-id", "x", "--store", tmp_path / "s")
    assert result.exit_code == 2
    assert "; fake: it does not start with FAKE)" in result.stderr.splitlines()[0]
    assert result.stderr.splitlines()[-1].endswith(", bfcl, fake)")
