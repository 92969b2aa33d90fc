"""Tool names a provider refuses are refused once, before the run, for the provider used:
sent as they were, each sample got the provider's 400 (after the run was made)."""

from __future__ import annotations

import json

import pytest
from helpers import cli

from tcbreplay._record.models import parse_model
from tcbreplay._record.tool_names import check_tool_names
from tcbreplay.errors import InputError

TOOLS_MODULE = '''
from langchain_core.tools import StructuredTool


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


TOOLS = [StructuredTool.from_function(add, name=NAME)]
'''


@pytest.fixture
def tools(tmp_path, monkeypatch, request):
    name = request.param
    (tmp_path / "named_tools.py").write_text(f"NAME = {name!r}\n" + TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "named_tools", raising=False)
    return "named_tools:TOOLS"


@pytest.fixture(autouse=True)
def to_openai(monkeypatch):
    """No variable sends openai: models elsewhere than to OpenAI."""
    for variable in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps([{"input": "What is 2 plus 3?", "target": []}]))
    (tmp_path / "prompt.txt").write_text("Use the tools.")
    return path


OPENAI_RULE = "1 to 64 letters, digits, _ and - (^[a-zA-Z0-9_-]{1,64}$)"
ANTHROPIC_RULE = "1 to 128 letters, digits, _ and - (^[a-zA-Z0-9_-]{1,128}$)"
GEMINI_RULE = (
    "a letter or _, then letters, digits, _, ., : and -, 128 at most "
    "(^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$)"
)


@pytest.mark.parametrize(
    ("model", "tools", "said"),
    [
        ("openai:gpt-4o-mini", "shop.add", f"OpenAI takes: {OPENAI_RULE}"),
        ("anthropic:claude-opus-4-7", "add numbers", f"Anthropic takes: {ANTHROPIC_RULE}"),
        ("anthropic:claude-opus-4-7", "a" * 129, f"Anthropic takes: {ANTHROPIC_RULE}"),
        ("google_genai:gemini-2.5-flash", "1add", f"Gemini takes: {GEMINI_RULE}"),
    ],
    indirect=["tools"],
)
def test_a_tool_name_the_provider_refuses_is_refused_before_the_run(
    tmp_path, dataset, model, tools, said
):
    name = __import__("named_tools").NAME
    store = tmp_path / "traces"
    result = cli("record", "--model", model, "--dataset", dataset, "--tools", tools,
                 "--system-prompt", tmp_path / "prompt.txt",
                 "--run-id", "r", "--store", store)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (
        f"Error: --tools {tools}: the tool name {name!r} is not one {said}"
    )
    assert not store.exists()


@pytest.mark.parametrize(
    ("model", "settings", "name"),
    [
        ("google_genai:gemini-2.5-flash", {}, "shop.add:v2"),  # (Gemini's own rule)
        ("anthropic:claude-opus-4-7", {}, "a" * 128),  # (longer than OpenAI's 64)
        ("openai:my-model", {"base_url": "http://localhost:8000/v1"}, "shop.add"),  # not OpenAI
        ("sim", {}, "add numbers"),
    ],
)
def test_names_the_provider_takes_are_taken(model, settings, name):
    check_tool_names([name, "add_numbers"], parse_model(model, settings), "--tools t:T")


@pytest.mark.parametrize(
    ("settings", "environ"),
    [
        ({"openai_api_base": "http://localhost:8000/v1"}, {}),
        ({}, {"OPENAI_BASE_URL": "http://localhost:8000/v1"}),
        ({}, {"OPENAI_API_BASE": "http://localhost:8000/v1"}),
    ],
    ids=["openai_api_base", "OPENAI_BASE_URL", "OPENAI_API_BASE"],
)
def test_an_openai_model_sent_elsewhere_otherwise_than_by_base_url_is_not_checked(
    settings, environ
):
    """A compatible server named by the variable the SDK reads (or LangChain's alias) was
    held to OpenAI's rule: a run that had recorded was refused before it began."""
    choice = parse_model("openai:my-model", settings)
    check_tool_names(["shop.add"], choice, "--tools t:T", environ=environ)
    with pytest.raises(InputError, match="not one OpenAI takes"):
        check_tool_names(["shop.add"], parse_model("openai:my-model"), "--tools t:T", environ={})


def test_a_compatible_server_named_by_the_sdks_variable_records(tmp_path, dataset, monkeypatch):
    from openai_server import OpenAIServer

    (tmp_path / "dotted_tools.py").write_text("NAME = 'shop.add'\n" + TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-a-loopback-server")
    with OpenAIServer({"What is 2 plus 3?": []}, {"What is 2 plus 3?": "5"}) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        result = cli("record", "--model", "openai:my-model", "--dataset", dataset,
                     "--tools", "dotted_tools:TOOLS", "--system-prompt", tmp_path / "prompt.txt",
                     "--workers", "1", "--run-id", "r", "--store", tmp_path / "traces",
                     "--quiet")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert server.requests[0]["tools"][0]["function"]["name"] == "shop.add"


def test_the_first_name_refused_is_named():
    choice = parse_model("openai:gpt-4o-mini")
    with pytest.raises(InputError, match=r"the tool name 'b\.c' is not one OpenAI takes"):
        check_tool_names(["ok", "b.c", "d e"], choice, "--tools t:T")
