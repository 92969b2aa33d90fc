"""``serve``'s Gemini wire compares tools and tool outputs in what a Gemini request can say
(:mod:`tcbreplay._replay.gemini_terms`): a run recorded with langchain-google-genai, whose
tools have defaults, Optional and union parameters, bounds and a mapping, and whose tools
return an object, a list and a number's text, replays with no divergence to the stack that
made it and to google-genai (``parameters=`` and ``parameters_json_schema=``); a tool
changed in those terms, or another output, still gets its 409."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gemini_terms_tools
import pytest

from tcbreplay._inputs.benchmarks import BENCHMARKS
from tcbreplay._replay.serve import serve_run

PROMPT = BENCHMARKS["tool-call"].system_prompt.read_text()
KEY = "AIzaSyLEAKEDgemini0123456789abcdefghijk"
MODEL = "gemini-2.5-flash"
TOOLS = {t.name: t for t in gemini_terms_tools.TOOLS}
# id, input, the scripted model's turns (each a list of calls)
CASES = [
    ("order", "Order 2 of sku A1 express",
     [[("order", {"items": [{"sku": "A1", "qty": 2}], "express": True})]]),
    ("lookup", "Look up pens", [[("lookup", {"query": "pens", "limit": 3})]]),
    ("wc", "Count lines of a.txt", [[("wc", {"path": "a.txt"})]]),
    ("sh", "Run echo hello", [[("run_shell", {"cmd": "echo hello"})]]),
    ("count", "Count to 3", [[("count", {"n": 3})]]),
    ("issue", "File an issue", [[("file_issue", {"title": "Bug"})]]),
    ("tag", "Tag 1 and b", [[("tag", {"ids": [1, "b"]})]]),
    ("put", "Store a record", [[("put", {"data": {"k": 1}, "cfg": {"b": "x"}})]]),
    ("fetch", "Fetch a.html", [[("fetch", {"url": "a.html"})]]),
    ("pack", "Pack a parcel", [[("pack", {"parcels": [{"weight": 1.5, "fragile": True}]})]]),
]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A store holding the run ``terms``, recorded with langchain-google-genai against the
    loopback Gemini server."""
    folder = tmp_path_factory.mktemp("terms")
    return gemini_terms_tools.record_cases(
        folder, CASES, "gemini_terms_tools:TOOLS", "terms", MODEL
    )


def calls_of(sample_id: str) -> list[tuple[str, dict]]:
    return [(n, a) for sid, _, turns in CASES if sid == sample_id for t in turns for n, a in t]


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "streamed"])
def test_chat_google_generative_ai_replays_its_own_recording_of_lossy_tools(recorded, streaming):
    """Every request got a 409: the client sends no defaults nor bounds, ``nullable`` for
    Optional, and ``{"output": "hello"}`` or ``"42\\n"`` otherwise than recorded."""
    from langchain.agents import create_agent
    from langchain_google_genai import ChatGoogleGenerativeAI

    with serve_run(recorded, "terms") as server:
        model = ChatGoogleGenerativeAI(model=MODEL, google_api_key=KEY, base_url=server.url,
                                       max_retries=0, streaming=streaming)  # fmt: skip
        agent = create_agent(model, gemini_terms_tools.TOOLS, system_prompt=PROMPT)
        for sample_id, text, _ in CASES:
            state = agent.invoke({"messages": [{"role": "user", "content": text}]})
            made = [(c["name"], c["args"]) for m in state["messages"]
                    for c in getattr(m, "tool_calls", None) or []]  # fmt: skip
            assert made == calls_of(sample_id), sample_id
            assert state["messages"][-1].text == "Done."
        assert (server.service.served, server.service.diverged) == (2 * len(CASES), 0)


def nullable(schema: Any) -> Any:
    """A schema's lists of a type and null as that type, nullable (as Gemini's Schema, which
    holds one type, says them)."""
    if isinstance(schema, list):
        return [nullable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: nullable(v) if k in ("properties", "items", "anyOf") or isinstance(v, dict)
           else v for k, v in schema.items()}  # fmt: skip
    kinds = schema.get("type")
    if isinstance(kinds, list) and "null" in kinds and len(kinds) == 2:
        out.update(type=next(k for k in kinds if k != "null"), nullable=True)
    return out


def genai_config(mode: str, change: Any = None) -> Any:
    from google.genai import types
    from langchain_core.utils.function_calling import convert_to_openai_function

    functions = [convert_to_openai_function(t) for t in gemini_terms_tools.TOOLS]
    if mode == "model_json_schema":  # (pydantic's, with $defs and $refs, as google-genai's
        mode = "parameters_json_schema"  # guide declares a model)
        for f, t in zip(functions, gemini_terms_tools.TOOLS, strict=True):
            found = t.tool_call_schema
            f["parameters"] = found if isinstance(found, dict) else found.model_json_schema()
    if change is not None:
        change(functions)
    declared = [types.FunctionDeclaration(name=f["name"], description=f["description"], **{
        mode: f["parameters"] if mode != "parameters" else nullable(f["parameters"])})
                for f in functions]  # fmt: skip
    return types.GenerateContentConfig(
        system_instruction=PROMPT,
        tools=[types.Tool(function_declarations=declared)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        temperature=0.7,  # (ChatGoogleGenerativeAI's, recorded with the run)
    )


def output(name: str, args: dict) -> dict:
    """A tool's output as a google-genai loop sends it: an object as is, else under output."""
    found = TOOLS[name].invoke(args)
    return found if isinstance(found, dict) else {"output": found}


@pytest.mark.parametrize("mode", ["parameters", "parameters_json_schema", "model_json_schema"])
def test_google_genai_replays_the_recording_whichever_schema_it_declares(recorded, mode):
    """With ``parameters=`` google-genai sends ``any_of`` with a NULL type, bounds as
    floats and no ``additionalProperties``' case of the recording: a 409 on every request."""
    from google import genai
    from google.genai import types

    with serve_run(recorded, "terms") as server:
        client = genai.Client(api_key=KEY, http_options={"base_url": server.url})
        for sample_id, text, _ in CASES:
            contents = [types.Content(role="user", parts=[types.Part.from_text(text=text)])]
            made = []
            for _ in range(5):
                answer = client.models.generate_content(model=MODEL, contents=contents,
                                                        config=genai_config(mode))  # fmt: skip
                contents.append(answer.candidates[0].content)
                calls = answer.function_calls or []
                if not calls:
                    break
                made += [(c.name, dict(c.args or {})) for c in calls]
                contents.append(types.Content(role="user", parts=[
                    types.Part.from_function_response(name=c.name, response=output(c.name,
                                                                                    c.args))
                    for c in calls]))  # fmt: skip
            assert made == calls_of(sample_id), sample_id
        assert server.service.diverged == 0


def _drop(name: str, field: str) -> Any:
    def change(functions: list[dict]) -> None:
        spec = next(f for f in functions if f["name"] == name)
        del spec["parameters"]["properties"][field]

    return change


def _retype(functions: list[dict]) -> None:
    next(f for f in functions if f["name"] == "lookup")["parameters"]["properties"]["limit"][
        "type"
    ] = "number"


def _describe(functions: list[dict]) -> None:
    next(f for f in functions if f["name"] == "lookup")["description"] = "Look it up."


def _parameters(functions: list[dict], name: str) -> dict:
    return next(f for f in functions if f["name"] == name)["parameters"]["properties"]


def _bound(functions: list[dict]) -> None:
    _parameters(functions, "order")["items"]["items"]["properties"]["qty"]["minimum"] = 5


def _default(functions: list[dict]) -> None:
    _parameters(functions, "lookup")["limit"]["default"] = 10


def _union(functions: list[dict]) -> None:
    _parameters(functions, "order")["note"]["anyOf"].insert(0, {"type": "integer"})


def _item_union(functions: list[dict]) -> None:
    _parameters(functions, "tag")["ids"]["items"]["anyOf"][1]["type"] = "boolean"


def _parcel(functions: list[dict]) -> None:
    parcel = _parameters(functions, "pack")["parcels"]["items"]["anyOf"][0]
    parcel["properties"]["weight"]["type"] = "integer"


def _values(functions: list[dict]) -> None:
    _parameters(functions, "order")["tags"]["anyOf"][0]["additionalProperties"]["type"] = "integer"


@pytest.mark.parametrize("mode", ["parameters", "parameters_json_schema"])
@pytest.mark.parametrize(
    ("change", "path"),
    [
        (_drop("lookup", "kind"), "tools.lookup.parameters.kind"),
        (_retype, "tools.lookup.parameters.limit.type"),
        (_describe, "tools.lookup.description"),
        # what google-genai sends whole: changed, a difference too
        (_bound, "tools.order.parameters.items.items.properties.qty.minimum"),
        (_default, "tools.lookup.parameters.limit.default"),
        (_union, "tools.order.parameters.note.anyOf"),
        (_values, "tools.order.parameters.tags.additionalProperties.type"),
        (_item_union, "tools.tag.parameters.ids.items.anyOf[1].type"),
        # (an item's union with a model, which google-genai sends whole)
        (_parcel, "tools.pack.parameters.parcels.items.properties.weight.type"),
    ],
    ids=[
        "removed",
        "retyped",
        "described",
        "bound",
        "default",
        "union",
        "values",
        "item_union",
        "item_model",
    ],
)
def test_a_tool_changed_in_geminis_terms_still_gets_409_there(recorded, mode, change, path):
    from google import genai
    from google.genai import errors, types

    with serve_run(recorded, "terms") as server:
        client = genai.Client(api_key=KEY, http_options={"base_url": server.url})
        contents = [types.Content(role="user", parts=[types.Part.from_text(text="Look up pens")])]
        with pytest.raises(errors.ClientError) as caught:
            client.models.generate_content(model=MODEL, contents=contents,
                                           config=genai_config(mode, change))  # fmt: skip
    assert caught.value.code == 409
    said = caught.value.details["error"]["divergence"]
    assert (said["component"], said["path"]) == ("tools", path)


def test_another_tool_output_still_gets_409_as_tool_output(recorded):
    from google import genai
    from google.genai import errors, types

    with serve_run(recorded, "terms") as server:
        client = genai.Client(api_key=KEY, http_options={"base_url": server.url})
        config = genai_config("parameters_json_schema")
        contents = [types.Content(role="user", parts=[types.Part.from_text(text="Run echo hello")])]
        answer = client.models.generate_content(model=MODEL, contents=contents, config=config)
        contents.append(answer.candidates[0].content)
        contents.append(types.Content(role="user", parts=[types.Part.from_function_response(
            name="run_shell", response={"output": "goodbye"})]))  # fmt: skip
        with pytest.raises(errors.ClientError) as caught:
            client.models.generate_content(model=MODEL, contents=contents, config=config)
    assert caught.value.code == 409
    assert caught.value.details["error"]["divergence"]["component"] == "tool_output"


def _search(limit: int) -> dict:
    """A tool of a JSON schema whose default langchain-google-genai leaves out."""
    return {"name": "search", "description": "Search the catalog.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"},
                                         "limit": {"type": "integer", "default": limit}},
        "required": ["query"]}}  # fmt: skip


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    """An imported run whose samples each carry their own ``search`` (its default 5 in one,
    10 in the other), the run's tools another list (the shop's)."""
    import json

    from helpers import TEST_DATA, cli

    folder = tmp_path_factory.mktemp("own-tools")
    entries = [{"id": "a", "input": "Find pens", "target": [], "tools": [_search(5)]},
               {"id": "b", "input": "Find ink", "target": [], "tools": [_search(10)]}]  # fmt: skip
    lines = [{"sample_id": e["id"], "messages": [
        {"role": "system", "content": "You are a shop."},
        {"role": "user", "content": e["input"]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "search", "arguments": json.dumps({"query": e["id"]})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "Done."}]} for e in entries]  # fmt: skip
    (folder / "ds.json").write_text(json.dumps(entries))
    (folder / "t.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = cli("import", "--dataset", folder / "ds.json", "--traces", folder / "t.jsonl",
                 "--tools", TEST_DATA / "tools_shop.json", "--run-id", "own",
                 "--store", folder / "traces")  # fmt: skip
    assert result.exit_code == 0, result.output
    return folder / "traces"


def test_an_imported_samples_own_tools_stand_for_what_a_gemini_client_sends(imported):
    """Each request got a 409 (its tools were compared with the run's, which hold no
    ``search``); and of two samples whose ``search`` a client sends alike, each request
    stands for its own sample's."""
    from langchain.agents import create_agent
    from langchain_core.tools import StructuredTool
    from langchain_google_genai import ChatGoogleGenerativeAI

    with serve_run(imported, "own") as server:
        for sample_id, text, limit in (("b", "Find ink", 10), ("a", "Find pens", 5)):
            spec = _search(limit)
            search = StructuredTool.from_function(
                func=lambda **_: "found", name=spec["name"], description=spec["description"],
                args_schema=spec["parameters"])  # fmt: skip
            model = ChatGoogleGenerativeAI(model=MODEL, google_api_key=KEY, base_url=server.url,
                                           max_retries=0)  # fmt: skip
            agent = create_agent(model, [search], system_prompt="You are a shop.")
            state = agent.invoke({"messages": [{"role": "user", "content": text}]})
            assert [c["args"] for c in state["messages"][1].tool_calls] == [{"query": sample_id}]
            assert state["messages"][-1].text == "Done."
        assert (server.service.served, server.service.diverged) == (4, 0)


def test_an_imported_samples_own_tool_changed_still_gets_409_at_its_path(imported):
    from google import genai
    from google.genai import errors, types

    spec = _search(5)
    spec["parameters"]["properties"]["limit"]["type"] = "number"
    config = types.GenerateContentConfig(
        system_instruction="You are a shop.",
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name=spec["name"], description=spec["description"],
            parameters_json_schema=spec["parameters"])])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )  # fmt: skip
    with serve_run(imported, "own") as server:
        client = genai.Client(api_key=KEY, http_options={"base_url": server.url})
        with pytest.raises(errors.ClientError) as caught:
            client.models.generate_content(model=MODEL, contents="Find pens", config=config)
    said = caught.value.details["error"]["divergence"]
    assert (said["component"], said["path"]) == ("tools", "tools.search.parameters.limit.type")


def test_a_tools_divergence_alike_in_geminis_terms_is_said_as_it_is(imported):
    """Where the request's tools are alike in the terms to those of the sample compared with
    (another sample's stood for them), the divergence is the canonical one, not "messages
    at contents: null -> null"."""
    from tcbreplay._replay.alike import Alike
    from tcbreplay._replay.divergence import Divergence
    from tcbreplay._replay.fingerprint import canonical_tools
    from tcbreplay._replay.recording import RecordedRun
    from tcbreplay._replay.routes import WIRES
    from tcbreplay._store.runs import Store

    recording = RecordedRun.load(Store(imported).open_run("own"))
    sent = _search(5)
    del sent["parameters"]["properties"]["limit"]["default"]
    found = Divergence(0, "tools", "tools.search.parameters.limit.default", "5", None)
    said = Alike(recording).tools_divergence(WIRES["gemini"], found, ("a", 0),
                                             canonical_tools([sent]))  # fmt: skip
    assert said == found
