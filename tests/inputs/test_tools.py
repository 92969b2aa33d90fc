"""Tool specs from a Python module:attr or a JSON file of function schemas."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from helpers import TEST_DATA, cli

from tcbreplay._inputs.tools import ToolSchema, load_toolset, toolset_from_dicts
from tcbreplay._report import collect
from tcbreplay._store.runs import Store
from tcbreplay.errors import InputError, ToolSchemaError

DATA = TEST_DATA

GOOD_MODULE = '''
from langchain_core.tools import StructuredTool, tool


def add(a: float, b: float = 2.0) -> float:
    """Add two numbers."""
    return a + b


def lookup(item_id: int, verbose: bool = False) -> dict:
    """Look an item up by id."""
    return {"item_id": item_id}


@tool
def shout(text: str) -> str:
    """Shout the text."""
    return text.upper()


def _hidden(x: int) -> int:
    """Times two."""
    return 2 * x


doubler = StructuredTool.from_function(_hidden, name="double", description="Double x.")

TOOLS = [add, lookup]
MIXED = (add, shout, doubler)
BY_NAME = {"one": add, "two": shout}


class Holder:
    tools = [lookup]
'''


@pytest.fixture
def tool_module(tmp_path, monkeypatch):
    """Write a uniquely named tools module into tmp_path and make it importable."""
    names = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(source: str) -> str:
        name = f"tools_{uuid.uuid4().hex[:12]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    yield make
    for name in names:
        sys.modules.pop(name, None)


def one_line_error(spec: str) -> ToolSchemaError:
    with pytest.raises(ToolSchemaError) as info:
        load_toolset(spec)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, InputError)
    assert info.value.exit_code == 2
    return info.value


# ---------------------------------------------------------------- Python tools


def test_module_list_of_functions(tool_module):
    name = tool_module(GOOD_MODULE)
    toolset = load_toolset(f"{name}:TOOLS")
    assert [s.name for s in toolset.schemas] == ["add", "lookup"]
    add, lookup = toolset.schemas
    assert add.description == "Add two numbers."
    assert add.param_names == {"a", "b"}
    assert add.parameters["properties"]["a"]["type"] == "number"
    assert add.defaults() == {"b": 2.0}
    assert lookup.defaults() == {"verbose": False}
    assert lookup.parameters["properties"]["item_id"]["type"] == "integer"
    assert toolset.params() == {"add": {"a", "b"}, "lookup": {"item_id", "verbose"}}
    assert toolset.source == f"{name}:TOOLS"
    assert len(toolset.sha256) == 64
    assert [t.name for t in toolset.tools] == ["add", "lookup"]
    assert toolset.tools[0].invoke({"a": 1, "b": 2}) == 3


def test_module_tuple_of_langchain_tools_and_functions(tool_module):
    name = tool_module(GOOD_MODULE)
    toolset = load_toolset(f"{name}:MIXED")
    assert [s.name for s in toolset.schemas] == ["add", "shout", "double"]
    assert toolset.schemas[1].description == "Shout the text."
    assert toolset.schemas[2].param_names == {"x"}


def test_module_mapping_and_dotted_attribute(tool_module):
    name = tool_module(GOOD_MODULE)
    assert [s.name for s in load_toolset(f"{name}:BY_NAME").schemas] == ["add", "shout"]
    assert [s.name for s in load_toolset(f"{name}:Holder.tools").schemas] == ["lookup"]


def test_built_in_tools():
    toolset = load_toolset("tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS")
    assert toolset.params() == {
        "list_items": set(),
        "add_numbers": {"a", "b"},
        "multiply_numbers": {"a", "b"},
    }


def test_json_schemas_equal_the_module_specs_they_were_written_from():
    from_module = load_toolset("tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS")
    from_json = load_toolset(str(DATA / "tools_shop.json"))
    assert from_json.params() == from_module.params()
    assert [s.description for s in from_json.schemas] == [
        s.description for s in from_module.schemas
    ]


def test_current_directory_is_importable(tmp_path, monkeypatch):
    name = f"tools_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(GOOD_MODULE))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.chdir(tmp_path)
    try:
        assert [s.name for s in load_toolset(f"{name}:TOOLS").schemas] == ["add", "lookup"]
    finally:
        sys.modules.pop(name, None)


# ---------------------------------------------------------------- bad Python specs


def test_missing_module():
    error = one_line_error("no_such_tools_module_xyz:TOOLS")
    assert str(error).startswith("no_such_tools_module_xyz:TOOLS: cannot import module")
    assert "no_such_tools_module_xyz" in str(error)


def test_missing_attribute(tool_module):
    name = tool_module(GOOD_MODULE)
    error = one_line_error(f"{name}:NOPE")
    assert str(error) == f"{name}:NOPE: module {name!r} has no attribute 'NOPE'"


@pytest.mark.parametrize(
    ("attr", "kind"),
    [
        ("NUMBER", "int"),
        ("FUNC", "function"),
        ("TEXT", "str"),
        ("EMPTY", "list"),
        ("NONE", "NoneType"),
    ],
)
def test_attribute_that_is_not_a_list_of_tools(tool_module, attr, kind):
    name = tool_module(
        """
        def f(x: int) -> int:
            "F."
            return x
        NUMBER = 3
        FUNC = f
        TEXT = "f"
        EMPTY = []
        NONE = None
        """
    )
    error = one_line_error(f"{name}:{attr}")
    assert str(error).startswith(f"{name}:{attr}: expected a non-empty list")
    assert f"got {kind}" in str(error)


def test_list_item_that_is_not_a_tool(tool_module):
    name = tool_module(
        """
        def f(x: int) -> int:
            "F."
            return x
        TOOLS = [f, 42]
        """
    )
    error = one_line_error(f"{name}:TOOLS")
    assert str(error).startswith(f"{name}:TOOLS[1]: not a function or LangChain tool")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("raise RuntimeError('no config file')", "RuntimeError: no config file"),
        ("x = 1 / 0", "ZeroDivisionError"),
        ("def broken(:\n    pass", "SyntaxError"),
        ("import no_such_dependency_xyz", "no_such_dependency_xyz"),
    ],
)
def test_module_raising_at_import(tool_module, source, expected):
    name = tool_module(source)
    error = one_line_error(f"{name}:TOOLS")
    assert str(error).startswith(f"{name}:TOOLS: ")
    assert expected in str(error)
    assert name not in sys.modules


def test_module_exiting_at_import(tool_module):
    name = tool_module("import sys\nsys.exit(3)\n")
    one_line_error(f"{name}:TOOLS")


def test_duplicate_tool_names_in_a_module(tool_module):
    name = tool_module(
        """
        from langchain_core.tools import tool

        def add(a: int, b: int) -> int:
            "Add."
            return a + b

        @tool("add")
        def other(x: int) -> int:
            "Also called add."
            return x

        TOOLS = [add, other]
        """
    )
    error = one_line_error(f"{name}:TOOLS")
    assert str(error) == f"{name}:TOOLS: two tools are named 'add'"


@pytest.mark.parametrize("spec", ["just_a_name", "mod:", ":attr"])
def test_spec_that_is_neither_a_file_nor_module_attr(spec):
    error = one_line_error(spec)
    assert str(error).startswith(f"{spec}: ")


# ---------------------------------------------------------------- JSON schemas


def write_json(tmp_path: Path, obj, name: str = "tools.json") -> str:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def test_json_schemas_with_defaults(tmp_path):
    spec = write_json(
        tmp_path,
        [
            {
                "name": "convert",
                "description": "Convert an amount.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "amount": {"type": "number"},
                        "currency": {"type": "string", "default": "USD"},
                        "round_to": {"type": "integer", "default": 2},
                    },
                    "required": ["amount"],
                },
            },
            {"name": "now"},
        ],
    )
    toolset = load_toolset(spec)
    convert, now = toolset.schemas
    assert convert.defaults() == {"currency": "USD", "round_to": 2}
    assert convert.param_names == {"amount", "currency", "round_to"}
    assert now == ToolSchema(
        name="now", description="", parameters={"type": "object", "properties": {}}
    )
    assert toolset.tools is None
    assert toolset.source == spec
    assert len(toolset.sha256) == 64
    assert toolset_from_dicts(toolset.to_list(), "manifest").to_list() == toolset.to_list()


def test_json_object_with_a_tools_key(tmp_path):
    spec = write_json(tmp_path, {"tools": [{"name": "a"}, {"name": "b"}]})
    assert [s.name for s in load_toolset(spec).schemas] == ["a", "b"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"name": "a"}, "tools.json: expected a JSON array of function schemas"),
        ('"a"', "tools.json: expected a JSON array of function schemas"),
        ("[{", "tools.json: not valid JSON"),
        ("", "tools.json: not valid JSON"),
        ([3], "tools.json: tool 0: expected an object with name and parameters"),
        ([{"description": "x"}], "tools.json: tool 0: name must be a non-empty string"),
        ([{"name": ""}], "tools.json: tool 0: name must be a non-empty string"),
        ([{"name": "a", "description": 5}], "tools.json: tool 0 (a): description must be a string"),
        (
            [{"name": "a"}, {"name": "b", "parameters": []}],
            "tools.json: tool 1 (b): parameters must be a JSON-schema object",
        ),
        (
            [{"name": "a", "parameters": "object"}],
            "tools.json: tool 0 (a): parameters must be a JSON-schema object",
        ),
        (
            [{"name": "a", "parameters": {"properties": []}}],
            "tools.json: tool 0 (a): parameters.properties must map names to JSON schemas",
        ),
        (
            [{"name": "a", "parameters": {"properties": {"x": "number"}}}],
            "tools.json: tool 0 (a): parameters.properties must map names to JSON schemas",
        ),
        (
            [{"name": "a"}, {"name": "a", "parameters": {"properties": {"x": {}}}}],
            "tools.json: two tools are named 'a', with different parameters",
        ),
        (
            [{"name": "a", "description": "x"}, {"name": "a", "description": "y"}],
            "tools.json: two tools are named 'a', with different descriptions",
        ),
        (
            '[{"name": "a", "description": "x \\ud800"}]',
            "tools.json: holds a lone surrogate \\ud800, which is not valid Unicode",
        ),
        # beyond the limits (#18): these gave tracebacks (RecursionError, Python's digit limit)
        (
            '[\n{"name": "a", "parameters": {"properties": {"x": {"default": %s}}}}\n]'
            % ("[" * 1000 + "]" * 1000),
            "tools.json: line 2: a value nested deeper than 100 levels of arrays and objects",
        ),
        (
            '[\n\n{"name": "a", "parameters": {"properties": {"x": {"default": %s}}}}]'
            % ("9" * 4301),
            "tools.json: line 3: an integer of 4,301 digits (at most 640)",
        ),
        (
            '[{"name": "a", "parameters": {"properties": {"x": {"default": %s}}}}]'
            % ("[" * 97 + "]" * 97),
            "tools.json: line 1: a value nested deeper than 100 levels of arrays and objects",
        ),
    ],
)
def test_bad_json_schemas(tmp_path, content, expected):
    spec = write_json(tmp_path, content)
    error = one_line_error(spec)
    assert str(error).startswith(expected)


def test_json_schemas_within_the_limits_load(tmp_path):
    # the array is level 1, the tool 2, parameters 3, properties 4, x 5: a default of 95 levels
    default = "[" * 95 + "9" * 640 + "]" * 95
    text = json.dumps([{"name": "a", "parameters": {"properties": {"x": {"default": "D"}}}}])
    spec = write_json(tmp_path, text.replace('"D"', default))
    (tool,) = load_toolset(spec).schemas
    assert tool.defaults()["x"] == json.loads(default)


@pytest.mark.parametrize(
    ("default", "problem"),
    [
        ("10**700", "an integer of more than 640 digits"),
        ("[" * 120 + "]" * 120, "a value nested deeper than 100 levels of arrays and objects"),
    ],
)
def test_a_python_tool_whose_defaults_are_beyond_the_limits_is_refused(
    tool_module, default, problem
):
    name = tool_module(
        f"""
        def add(a: float, b: list = {default}) -> float:
            \"\"\"Add.\"\"\"
            return a


        TOOLS = [add]
        """
    )
    error = one_line_error(f"{name}:TOOLS")
    assert str(error) == f"{name}:TOOLS[0] (add): its parameters hold {problem}"


def test_missing_json_file(tmp_path):
    error = one_line_error(str(tmp_path / "absent.json"))
    assert "absent.json: cannot read tools file" in str(error)


def test_loading_json_tools_does_not_import_langchain():
    code = (
        "import sys\n"
        "from tcbreplay._inputs.tools import load_toolset\n"
        f"ts = load_toolset({str(DATA / 'tools_shop.json')!r})\n"
        "assert [s.name for s in ts.schemas] == ['list_items', 'add_numbers', 'multiply_numbers']\n"
        "bad = [m for m in sys.modules if m.startswith(('langchain', 'langgraph'))]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_tool_declared_twice_alike_is_one_tool(tmp_path):
    spec = write_json(tmp_path, [{"name": "a", "description": "x"}, {"name": "b"},
                                 {"name": "a", "description": "x"}])  # fmt: skip
    assert [s.name for s in load_toolset(spec).schemas] == ["a", "b"]


def test_a_tool_declared_twice_differently_says_how_to_give_per_sample_tools(tmp_path):
    """The README promised one tool with the parameters of both; a file that means two
    versions of a tool wants them per sample, which the hint says how to give."""
    one = {"name": "a", "parameters": {"properties": {"x": {"type": "integer"}}}}
    other = {"name": "a", "parameters": {"properties": {"x": {"type": "number"}}}}
    error = one_line_error(write_json(tmp_path, [one, other]))
    assert str(error) == "tools.json: two tools are named 'a', with different parameters"
    assert '"tools": [...]' in error.hint and "dataset entry" in error.hint
    result = cli("import", "--dataset", write_json(tmp_path, [{"input": "x", "target": []}],
                                                   "d.json"),
                 "--tools", write_json(tmp_path, [one, other]), "--traces", tmp_path / "t.jsonl",
                 "--run-id", "r", "--store", tmp_path / "s")  # fmt: skip
    assert result.exit_code == 2
    assert "two tools are named 'a', with different parameters" in result.output
    assert "Hint: a tool whose parameters differ between samples goes into each dataset entry" in (
        result.output
    )


# ---------------------------------------------------------------- every common shape (#20)

TAU = TEST_DATA / "tau-bench"


def test_openais_wrapped_form_as_tau_bench_declares_it():
    """τ-bench's airline tools, as its get_info() writes them: the wrapped form was refused
    with 'name must be a non-empty string' and no hint."""
    raw = json.loads((TAU / "airline-tools.json").read_text())
    toolset = load_toolset(str(TAU / "airline-tools.json"))
    assert [s.to_dict() for s in toolset.schemas] == [item["function"] for item in raw]
    assert len(toolset.schemas) == 14


@pytest.mark.slow  # imports three SDKs' types (about 5 s under the suite's load)
def test_sdk_types_of_every_shape_read_as_the_same_schema(tmp_path):
    """Each SDK's own tool type, dumped as that SDK writes it, reads as one bare schema."""
    from anthropic.types import ToolParam
    from mcp.types import ListToolsResult, Tool
    from openai.types.chat import ChatCompletionFunctionTool
    from openai.types.shared import FunctionDefinition

    params = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "unit": {"type": "string", "default": "eur"}},
        "required": ["a"],
    }
    bare = {"name": "convert", "description": "Convert.", "parameters": params}
    mcp_tool = Tool(name="convert", description="Convert.", inputSchema=params)
    shapes = {
        "bare": [bare],
        "openai": [
            ChatCompletionFunctionTool(
                type="function",
                function=FunctionDefinition(
                    name="convert", description="Convert.", parameters=params
                ),
            ).model_dump()
        ],
        "anthropic": [ToolParam(name="convert", description="Convert.", input_schema=params)],
        "mcp": ListToolsResult(tools=[mcp_tool]).model_dump(mode="json", by_alias=True),
        "mcp-python": [mcp_tool.model_dump()],  # snake case, nulls written out
    }
    for name, shape in shapes.items():
        spec = write_json(tmp_path, shape, f"{name}.json")
        assert [s.to_dict() for s in load_toolset(spec).schemas] == [bare], name


@pytest.mark.parametrize(
    ("tool", "message", "hint"),
    [
        (
            {"type": "function", "function": {"description": "no name"}},
            "tools.json: tool 0: function: name must be a non-empty string",
            "OpenAI's",
        ),
        (
            {"type": "function", "function": "convert"},
            "tools.json: tool 0: function is str, not an object",
            "OpenAI's wrapped form",
        ),
        (
            {"type": "custom", "function": {"name": "a"}},
            "tools.json: tool 0: type 'custom' beside function",
            "OpenAI's wrapped form",
        ),
        (
            {"name": "a", "input_schema": {}, "parameters": {}},
            "tools.json: tool 0: gives both parameters and input_schema",
            "a bare function schema",
        ),
        (
            {"name": "a", "params": {"type": "object"}},
            "tools.json: tool 0: has 'params' but no parameters: did you mean parameters (a "
            "function schema), input_schema (Anthropic) or inputSchema (MCP)?",
            "invented",
        ),
        (
            {"name": "a", "inputschema": {"type": "object"}},
            "tools.json: tool 0: has 'inputschema' but no parameters",
            "invented",
        ),
        (
            {"type": "web_search_20250305"},
            "tools.json: tool 0: a 'web_search_20250305' tool without a name",
            "function tools",
        ),
    ],
)
def test_a_near_miss_names_the_shape_it_resembles(tmp_path, tool, message, hint):
    with pytest.raises(ToolSchemaError) as info:
        load_toolset(write_json(tmp_path, [tool]))
    assert str(info.value).startswith(message)
    assert hint in info.value.hint


def test_one_tool_outside_a_list_is_refused_with_a_hint(tmp_path):
    with pytest.raises(ToolSchemaError) as info:
        load_toolset(write_json(tmp_path, {"name": "a", "parameters": {}}))
    assert "in a list" in info.value.hint


# ---------------------------------------------------------------- free-form arguments

FREE_FORM_MODULE = """
from langchain_core.tools import StructuredTool


def _log(**fields) -> str:
    return "logged"


# LangChain's tools of a JSON-schema dict: free-form arguments, besides declared ones or not
log = StructuredTool(name="log", description="Log fields.", func=_log, args_schema={
    "type": "object", "properties": {"level": {"type": "string"}},
    "additionalProperties": True})
note = StructuredTool(name="note", description="Note anything.", func=_log,
                      args_schema={"type": "object"})
# a tool of no arguments, as LangChain writes one
ping = StructuredTool(name="ping", description="Ping.", func=_log,
                      args_schema={"type": "object", "properties": {}})
TOOLS = [log, note, ping]
"""


def test_a_tool_taking_free_form_arguments_takes_any_key_and_none_is_invented(
    tool_module, tmp_path
):
    """A tool of additionalProperties true (or of no properties at all) refused every gold
    call passing an argument it does not declare ("passes 'user', which log does not take");
    scored, such an argument was invented."""
    name = tool_module(FREE_FORM_MODULE)
    toolset = load_toolset(f"{name}:TOOLS")
    assert toolset.params() == {"log": None, "note": None, "ping": set()}
    dataset = tmp_path / "free.jsonl"
    dataset.write_text(
        '{"id": "a", "input": "log it", "target": [{"name": "log", '
        '"args": {"level": "info", "user": "ann"}}]}\n'
        '{"id": "b", "input": "note it", "target": [{"name": "note", "args": {"x": 1}}]}\n'
    )
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You log.")
    store = tmp_path / "traces"
    args = ["--dataset", dataset, "--tools", f"{name}:TOOLS", "--system-prompt", prompt]
    recorded = cli("record", "--model", "sim:seed=1,mistakes=invented_arg,error_rate=1",
                   *args, "--run-id", "r", "--store", store, "--quiet")  # fmt: skip
    assert recorded.exit_code == 0, recorded.output
    scored = cli("score", "r", "--store", store, "--format", "json")
    assert scored.exit_code == 0, scored.output
    # the sim's invented argument is one more key the free-form tools take: invalid (gold
    # lacks it, and it has no default), never invented; gold's own keys are valid
    by_tool = {t["tool"]: t for t in json.loads(scored.stdout)["by_tool"]}
    assert {t: (by_tool[t]["args_invalid"], by_tool[t]["args_total"]) for t in by_tool} == {
        "log": (1, 3),
        "note": (1, 2),
    }
    for samples in (None, 0):  # every sample shown, or none (counted another way)
        report = collect(Store(store), ["r"], samples=samples)
        rows = {r.tool: (r.invalid_args, r.invented_args) for r in report.tool_rows}
        assert (rows["log"], rows["note"]) == ((1, 0), (1, 0))
    refused = cli("record", "--model", "sim:seed=1", "--dataset", _dataset(tmp_path, "ping"),
                  *args[2:], "--run-id", "p", "--store", store)  # fmt: skip
    assert refused.exit_code == 2
    assert "gold call 0 (ping) passes 'x', which ping does not take" in refused.stderr


def _dataset(tmp_path: Path, tool: str) -> Path:
    path = tmp_path / f"{tool}.jsonl"
    path.write_text(f'{{"id": "a", "input": "go", "target": [{{"name": "{tool}", '
                    '"args": {"x": 1}}]}\n')  # fmt: skip
    return path
