"""Langfuse's observations, as its exports write them.

A file is one of:

- the blob storage export of observations (to S3, GCS or Azure): JSON Lines (an observation a
  line), JSON or Parquet (the default since 2026), its columns in snake case (``id``,
  ``trace_id``, ``type``, ``parent_observation_id``, ``start_time``, ``input``, ``output``,
  ``level``, ``status_message``, ...), ``input`` and ``output`` as JSON text;
- the UI's batch export of the observations table (JSON or JSON Lines), in camel case
  (``traceId``, ``parentObservationId``, ``startTime``, ...), ``input`` and ``output`` parsed;
- the public API's answer (``{"data": [...]}``, ``GET /api/public/observations``).

A sample is a trace (every observation of one ``trace_id``), told by
:class:`~tcbreplay._importers.trees.Conversation`: the messages its first ``GENERATION`` was
given, then, in the order they began, each generation's answer (a model turn) and each
``TOOL`` observation's result (the call it answers named by its output or its metadata's
``tool_call_id``); generations and tools inside a generation or a tool are left out. A ``TOOL``
observation whose output is null and whose level is no ``ERROR`` (still running when exported,
or killed) gave no result: its call is stored without one (unless a later generation was given
it), and the import says how many. A trace whose first top-level observation has level
``ERROR`` is a trial in error, its ``status_message`` the error.

The traces hold no gold calls: ``--dataset`` gives them, each trace matched to a sample by its
trace id, else by its input text; without one, each trace is a sample of its own, with the tools
its generations were offered (``tool_definitions``, or the ``tools`` of their input) or called
(see :mod:`tcbreplay._importers.matching`).
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers import parquet
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import token_problem
from tcbreplay._importers.matching import Unmatched, source_of
from tcbreplay._importers.trees import (
    Conversation,
    calls_of,
    input_text,
    message,
    offered_tools,
    usage_of,
)
from tcbreplay._secrets import redact
from tcbreplay.errors import TcbReplayWarning, TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs

# the fields read, by their export names (snake case) and the UI's (camel case)
_FIELDS = {
    "id": ("id",),
    "trace_id": ("trace_id", "traceId"),
    "type": ("type",),
    "name": ("name",),
    "parent_observation_id": ("parent_observation_id", "parentObservationId"),
    "start_time": ("start_time", "startTime"),
    "end_time": ("end_time", "endTime"),
    "input": ("input",),
    "output": ("output",),
    "metadata": ("metadata",),
    "level": ("level",),
    "status_message": ("status_message", "statusMessage"),
    "model": ("provided_model_name", "providedModelName", "model"),
    "tool_definitions": ("tool_definitions", "toolDefinitions"),
    # a generation's token counts: v3's usage_details, the older usage
    "usage": ("usage_details", "usageDetails", "usage"),
}
_JSON_COLUMNS = ("input", "output", "metadata", "tool_definitions", "usage")


def sniff(file: TraceFile) -> Sniff:
    """A Parquet file, JSON or JSON Lines of observations (a ``trace_id`` or ``traceId``, a
    ``type`` and a parent observation field, in either case)."""
    if file.head.startswith(parquet.MAGIC):
        if {"trace_id", "type", "parent_observation_id"} <= parquet.columns(file):
            return Sniff(
                0.95, "a Parquet file of Langfuse observations (trace_id, type, "
                "parent_observation_id): a blob storage export",
            )  # fmt: skip
        return Sniff.no("a Parquet file without Langfuse's observation columns")
    top = file.top
    if _is_observation(file.first_line.value if top is None else top):
        return Sniff(0.9, "JSON Lines of Langfuse observations (trace_id, type)")
    if isinstance(top, list) and top and _is_observation(top[0]):
        return Sniff(0.9, "a JSON list of Langfuse observations (trace_id, type)")
    elif isinstance(top, dict) and _listed(top):
        return Sniff(0.9, "Langfuse's API answer of observations (data)")
    return Sniff.no(
        "not Langfuse observations (objects with trace_id or traceId, type and a parent "
        "observation field)"
    )


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    """The file's traces, a sample each (matched to ``inputs``' dataset when given)."""
    observations = read_observations(file)
    if not observations:
        raise TraceError(f"{file.name}: no observations in the file")
    traces: dict[str, list[dict[str, Any]]] = {}
    for obs in observations:
        traces.setdefault(str(obs["trace_id"]), []).append(obs)
    unfinished: list[str] = []
    found = [_trace(trace_id, group, unfinished) for trace_id, group in traces.items()]
    if unfinished:
        warnings.warn(
            TcbReplayWarning(
                f"{file.name}: {len(unfinished)} tool observations have no output and no error "
                "(still running when exported, or killed): no result of theirs is stored (a "
                "later generation gives one it was given), the first at "
                f"{unfinished[0].removeprefix(file.name + ': ')}"
            ),
            stacklevel=2,
        )
    found.sort(key=lambda t: (str(t.began), t.line.sample_id))
    models = {o["model"] for o in observations if o.get("model") and o["type"] == "GENERATION"}
    dataset = None if inputs is None else inputs.dataset
    model = models.pop() if len(models) == 1 else None
    offered = [tool for obs in observations for tool in _offered(obs)]
    return source_of(found, dataset, file.name, offered=offered, model=model)


def read_observations(file: TraceFile) -> list[dict[str, Any]]:
    """Every observation of the file, its fields under their export names (snake case),
    ``input``, ``output`` and ``metadata`` parsed."""
    if file.data.startswith(parquet.MAGIC):
        raw = [(f"{file.name}: row {n}", row) for n, row in enumerate(parquet.rows(file, ()))]
    else:
        raw = _json_rows(file)
    out = []
    seen: dict[str, dict[str, Any]] = {}
    for place, row in raw:
        if not isinstance(row, dict):
            raise TraceError(f"{place}: an observation must be an object")
        obs = {field: _get(row, names) for field, names in _FIELDS.items()}
        for key in ("id", "trace_id", "type"):
            if obs[key] is None:
                raise TraceError(f"{place}: an observation needs {key}")
        for key in _JSON_COLUMNS:
            obs[key] = _parsed(obs[key], f"{place}: {key}")
        if isinstance(obs["metadata"], dict):  # a map of JSON texts, in the blob export
            obs["metadata"] = {k: _parsed(v, place) for k, v in obs["metadata"].items()}
        obs["type"] = str(obs["type"]).upper()
        first = seen.setdefault(str(obs["id"]), obs)
        if first is not obs:  # exported twice: read once, and only if it is the same
            if first != {**obs, "_place": first["_place"]}:
                raise TraceError(
                    f"{place}: observation {str(obs['id'])!r} is in the file again with other "
                    f"values than at {first['_place']}",
                    hint="give each observation its own id",
                )
            continue
        obs["_place"] = place
        out.append(obs)
    return out


def _is_observation(value: Any) -> bool:
    if not isinstance(value, dict) or "id" not in value or "type" not in value:
        return False
    return any(k in value for k in _FIELDS["trace_id"]) and any(
        k in value for k in _FIELDS["parent_observation_id"]
    )


def _listed(value: dict[str, Any]) -> bool:
    listed = value.get("data")
    return isinstance(listed, list) and bool(listed) and _is_observation(listed[0])


def _get(row: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if row.get(name) is not None:
            return row[name]
    return None


def _parsed(value: Any, where: str) -> Any:
    """A value the export keeps as JSON text, parsed (text that is no JSON stays text)."""
    if not isinstance(value, str):
        return value
    try:
        return _json.loads(value)
    except json.JSONDecodeError:
        return value
    except _json.LimitError as exc:
        raise TraceError(f"{where}: {exc}", hint=_json.HINT) from None


def _json_rows(file: TraceFile) -> list[tuple[str, Any]]:
    try:
        text = file.data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{file.name}: not UTF-8 text") from exc
    if file.top is None:  # JSON Lines
        lines = _json.object_lines(
            text, file.name, TraceError, expected="expected a Langfuse observation"
        )
        return [(f"{file.name}: line {n}", row) for n, row in lines]
    try:
        doc = _json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{file.name}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    except _json.LimitError as exc:
        raise TraceError(f"{file.name}: {exc}", hint=_json.HINT) from None
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        doc = doc["data"]
    elif isinstance(doc, dict):  # JSON Lines of one observation
        return [(f"{file.name}: line 1", doc)]
    if not isinstance(doc, list):
        raise TraceError(f"{file.name}: expected a list of Langfuse observations")
    return [(f"{file.name}: observation {n}", row) for n, row in enumerate(doc)]


def _trace(trace_id: str, observations: list[dict[str, Any]], unfinished: list[str]) -> Unmatched:
    """A trace as a sample's trial: its messages, status and metadata (the places of its tool
    observations that gave no result added to ``unfinished``)."""
    from tcbreplay._record.messages import serialize_messages

    by_id = {str(o["id"]): o for o in observations}
    ordered = _in_order(observations, by_id)
    roots = [o for o in ordered if str(o.get("parent_observation_id")) not in by_id]
    reached = {id(o) for o in ordered}
    unreached = [o for o in observations if id(o) not in reached]
    if not roots or unreached:  # parents that go round: no root above them
        first = (unreached or observations)[0]
        raise TraceError(
            f"{first['_place']} (trace {trace_id}): the observations' parents go round in a "
            f"cycle (observation {first['id']}'s parent is {first.get('parent_observation_id')}"
            "): the trace has no root"
        )
    lost = next((o for o in roots if o.get("parent_observation_id")), None)
    if lost is not None:  # its place in the trace, and so its messages' order, unknown
        raise TraceError(
            f"{lost['_place']} (trace {trace_id}): observation {lost['id']}'s parent "
            f"{lost['parent_observation_id']} is not in the file",
            hint="export whole traces (every observation of each trace)",
        )
    root = roots[0]
    place = f"{root['_place']} (trace {trace_id})"
    told = Conversation()
    for obs in ordered:
        kind = obs["type"]
        if kind not in ("GENERATION", "TOOL") or _inside_generation_or_tool(obs, by_id):
            continue
        where = f"{obs['_place']} ({kind.lower()} {obs.get('name')!r})"
        if kind == "GENERATION":
            told.model_call(_given(obs, where), _answer(obs, where))
        elif obs.get("output") is None and obs.get("level") != "ERROR":
            unfinished.append(where)  # no result: not an empty one (its call stays open)
        else:
            told.tool_call(str(obs.get("name") or ""), *_tool_result(obs, where),
                           args=obs.get("input"))  # fmt: skip
    messages = told.messages or _root_messages(root, place)
    stored = serialize_messages(messages, {})
    problem = token_problem(stored) or _json.lone_surrogate(stored)
    if problem:
        raise TraceError(f"{place}: {problem}")
    failed = root.get("level") == "ERROR"
    error = str(root.get("status_message") or "the trace's root observation has level ERROR")
    metadata = {"trace_id": trace_id, "name": root.get("name")}
    for key in ("start_time", "end_time"):
        if root.get(key):
            metadata[key] = str(root[key])
    line = TraceLine(
        sample_id=trace_id,
        messages=stored,
        status="error" if failed else "ok",
        error=redact(error) if failed else None,
        error_type="langfuse" if failed else None,
        metadata=metadata,
        place=place,
    )
    began = str(root.get("start_time") or "")
    return Unmatched(line, (trace_id,), input_text(messages), began, calls_of(messages))


def _in_order(
    observations: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The observations as they ran: a parent before its children, siblings in the order they
    began (times are to the millisecond: of two that began together, the first to end)."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for obs in observations:
        parent = obs.get("parent_observation_id")
        children.setdefault(str(parent) if str(parent) in by_id else None, []).append(obs)
    for group in children.values():
        group.sort(key=lambda o: (str(o.get("start_time")), str(o.get("end_time") or "~")))
    out: list[dict[str, Any]] = []
    stack = list(reversed(children.get(None, [])))
    seen: set[str] = set()
    while stack:
        obs = stack.pop()
        if str(obs["id"]) in seen:
            continue
        seen.add(str(obs["id"]))
        out.append(obs)
        stack += reversed(children.get(str(obs["id"]), []))
    return out


def _inside_generation_or_tool(obs: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> bool:
    parent = by_id.get(str(obs.get("parent_observation_id")))
    for _ in range(len(by_id)):
        if parent is None:
            return False
        if parent["type"] in ("GENERATION", "TOOL"):
            return True
        parent = by_id.get(str(parent.get("parent_observation_id")))
    return False


def _given(obs: dict[str, Any], where: str) -> list[Any]:
    """The messages a generation was given (a prompt's text: one user message), without the
    tools it was offered."""
    value = obs.get("input")
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list):
        return [
            message(m, f"{where}: input[{k}]")
            for k, m in enumerate(value)
            if _tool_definition(m) is None
        ]
    if isinstance(value, str):
        return [message(value, f"{where}: input")]
    if value is None:
        return []
    raise TraceError(f"{where}: its input holds no messages")


def _answer(obs: dict[str, Any], where: str) -> Any:
    """A generation's answer as a model turn (None for one that failed without one)."""
    from langchain_core.messages import AIMessage

    value = obs.get("output")
    if isinstance(value, dict) and isinstance(value.get("choices"), list) and value["choices"]:
        choice = value["choices"][0]
        value = choice.get("message") if isinstance(choice, dict) else None
    if value is None or value == "":
        if obs.get("level") == "ERROR":
            return None
        raise TraceError(f"{where}: it has no output and no error")
    found = AIMessage(value) if isinstance(value, str) else message(value, f"{where}: output")
    if not isinstance(found, AIMessage):
        raise TraceError(f"{where}: its output is no model turn (an assistant's message)")
    if found.usage_metadata is None:
        found.usage_metadata = _usage(obs, where)
    return found


def _usage(obs: dict[str, Any], where: str) -> Any:
    """A generation's token counts as a message's usage (None where it has none)."""
    return usage_of(obs.get("usage"), where)


def _tool_result(obs: dict[str, Any], where: str) -> tuple[Any, str | None, str]:
    """A tool observation's result: its content, the call id it names and its status."""
    value = obs.get("output")
    content: Any = ""
    call_id = None
    status = "error" if obs.get("level") == "ERROR" else "success"
    if isinstance(value, dict) and value.get("type") == "tool":
        found = message(value, f"{where}: output")
        content, call_id = found.content, found.tool_call_id
    elif isinstance(value, str):
        content = value
    elif value is not None:
        content = json.dumps(value, ensure_ascii=False)
    if status == "error" and not content:  # an error's text, redacted as every error is
        content = redact(str(obs.get("status_message") or ""))
    metadata = obs.get("metadata")
    if not call_id and isinstance(metadata, dict) and isinstance(metadata.get("tool_call_id"), str):
        call_id = metadata["tool_call_id"]
    return content, call_id, status


def _offered(obs: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools a generation was offered: its ``tool_definitions``, the tools the LangChain
    handler lists among its input messages, or its input's ``tools``."""
    if obs["type"] != "GENERATION":
        return []
    value = obs.get("input")
    messages = value.get("messages") if isinstance(value, dict) else value
    listed = (
        [d for m in messages if (d := _tool_definition(m))] if isinstance(messages, list) else []
    )
    return (
        offered_tools(obs.get("tool_definitions"))
        or offered_tools(listed)
        or (offered_tools(value.get("tools")) if isinstance(value, dict) else [])
    )


def _tool_definition(value: Any) -> dict[str, Any] | None:
    """A tool the LangChain handler lists among a generation's input messages (``{"role":
    "tool", "content": <the tool, in OpenAI's form>}``, no call id), else None."""
    if not isinstance(value, dict) or value.get("role") != "tool" or "tool_call_id" in value:
        return None
    content = value.get("content")
    return content if isinstance(content, dict) and offered_tools([content]) else None


def _root_messages(root: dict[str, Any], place: str) -> list[Any]:
    """What a trace without a generation asked: its root observation's input."""
    value = root.get("input")
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return [
            message(m, f"{place}: input.messages[{k}]") for k, m in enumerate(value["messages"])
        ]
    return [message(value, f"{place}: input")] if isinstance(value, str) else []
