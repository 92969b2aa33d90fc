"""Tools whose schemas a Gemini client cannot send whole (defaults, Optional and unions,
bounds, a mapping), and tools whose outputs it sends otherwise than LangChain keeps them
(an object ``{"output": ...}``, a number's text with its newline, a list): recorded with
langchain-google-genai and served back by tests/replay/test_serve_gemini_terms.py."""

from __future__ import annotations

from typing import Literal

from langchain_core.tools import StructuredTool, tool
from pydantic import BaseModel, Field


class Item(BaseModel):
    sku: str = Field(description="the item's code")
    qty: int = Field(default=1, ge=1, le=99)


@tool
def order(
    items: list[Item],
    express: bool = False,
    note: str | None = None,
    unit: Literal["kg", "lb"] = "kg",
    tags: dict[str, str] | None = None,
) -> str:
    """Place an order for the items."""
    return "ok"


@tool
def lookup(query: str, limit: int = 5, kind: Literal["a", "b"] | None = None,
           price: float | int = 0) -> str:  # fmt: skip
    """Look something up."""
    return "found"


@tool
def run_shell(cmd: str) -> dict:
    """Run a shell command and return its output."""
    return {"output": "hello"}


@tool
def count(n: int) -> list:
    """Count to n."""
    return list(range(n))


@tool
def wc(path: str) -> str:
    """Count the lines of a file (as `wc -l` prints it)."""
    return "42\n"


@tool
def file_issue(title: str, body: str = "") -> str:
    """Open an issue (a parameter named title, which LangChain describes itself)."""
    return "ok"


@tool
def tag(ids: list[int | str]) -> str:
    """Tag the items (ids of either kind: LangChain sends the item's last type)."""
    return "ok"


class Parcel(BaseModel):
    """A parcel to send."""

    weight: float
    fragile: bool = False


@tool
def pack(parcels: list[Parcel | None]) -> str:
    """Pack the parcels (an item's union with a model: LangChain sends its type alone)."""
    return "ok"


def _put(**fields: object) -> str:
    return "ok"


# a tool of a JSON schema (as MCP's are): an object property with no properties, which
# LangChain sends as a string, an object whose required ones are not all those without a
# default, which LangChain sends as all those, and lists of types, sent as a string
put = StructuredTool.from_function(
    func=_put, name="put", description="Store a record.",
    args_schema={"type": "object", "properties": {
        "data": {"type": "object", "description": "any object"},
        "cfg": {"type": "object", "properties": {"a": {"type": "integer"},
                                                 "b": {"type": "string"}}, "required": ["b"]},
        "deep": {"type": "object", "properties": {"inner": {"type": "object", "properties": {
            "z": {"type": "string", "default": "q"}, "k": {"type": "string"}},
            "required": ["k"]}}},
        "since": {"type": ["integer", "null"]},
        "ids": {"type": "array", "items": {"type": ["string", "null"]}},
    }, "required": ["data"]},
)  # fmt: skip


@tool
def fetch(url: str) -> list:
    """Fetch a page (its text in content blocks, as an MCP tool answers)."""
    return [{"type": "text", "text": "<html>"}, {"type": "text", "text": "</html>"}]


TOOLS = [order, lookup, run_shell, count, wc, file_issue, tag, put, fetch, pack]


@tool
def echo(text: str, wrap: bool = False) -> str | dict:
    """Say the text back (in an object under "output" where asked)."""
    return {"output": text} if wrap else text


# a tool whose outputs a Gemini client sends alike ({"output": "hi"} and "hi": both as
# {"output": "hi"}), by sample or by call
ECHO = [echo]


def echo_declaration():
    """The echo tool as google-genai declares it (its JSON schema)."""
    from google.genai import types
    from langchain_core.utils.function_calling import convert_to_openai_function

    spec = convert_to_openai_function(echo)
    return types.Tool(function_declarations=[types.FunctionDeclaration(
        name=spec["name"], description=spec["description"],
        parameters_json_schema=spec["parameters"])])  # fmt: skip


def record_cases(folder, cases, tools: str, run_id: str, model: str):
    """Record ``cases`` (id, input, the loopback server's scripted calls) as the run
    ``run_id`` with langchain-google-genai against the loopback Gemini server, the tools
    ``tools`` (``module:ATTR``); the store's folder."""
    import json

    import pytest
    from gemini_server import GeminiServer

    from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    dataset = folder / "dataset.json"
    dataset.write_text(json.dumps([{"id": sid, "input": text, "target": []}
                                   for sid, text, _ in cases]))  # fmt: skip
    with pytest.MonkeyPatch.context() as patch, GeminiServer({t: s for _, t, s in cases}) as fake:
        patch.setenv("GOOGLE_API_KEY", "fake-recording-key-7f3a9c")
        inputs = load_inputs(None, dataset, tools, BENCHMARKS["tool-call"].system_prompt)
        choice = parse_model(f"google_genai:{model}", {"base_url": fake.url})
        summary = record_run(inputs, choice, Store(folder / "traces"), run_id=run_id,
                             options=RecordOptions(workers=1))  # fmt: skip
    assert summary.ok == len(cases)
    return folder / "traces"
