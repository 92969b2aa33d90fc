"""LangSmith's run trees, as the ``langsmith`` SDK and LangSmith write them.

A file is one of:

- ``Client.list_runs()`` written out: a JSON list of runs, JSON Lines of them (a run a line),
  or a runs query's answer (``{"runs": [...]}``); a single run (``POST /runs``'s body);
- what the SDK posts: ``/runs/batch`` bodies (``{"post": [...], "patch": [...]}``, one, or
  JSON Lines of several) or ``/runs/multipart`` bodies (parts ``post.<id>``,
  ``post.<id>.inputs``, ...; one or several, one after another as sent, or compressed with
  zstd as the SDK sends them when the server asks for it); a run's posts and patches are
  merged;
- a bulk export's Parquet file (the columns LangSmith documents: ``id``, ``trace_id``,
  ``parent_run_id``, ``run_type``, ``dotted_order``, ``inputs``, ``outputs``, ``error``, ...;
  JSON fields as JSON text or as nested values; one file: a bulk export's several files can be
  joined with DuckDB first).

A sample is a trace (a root run and the runs under it), told by
:class:`~tcbreplay._importers.trees.Conversation`: the messages its first LLM run was given,
then each LLM run's answer (a model turn) and each tool run's result, in the order they ran (a
LangChain tool run's output names the call it answers); LLM and tool runs inside a tool run
or an LLM run (a tool that runs an agent of its own) are left out. A tool run without outputs
and without an error (still running when exported, or killed) gave no result: its call is
stored without one (unless a later LLM run was given it), and the import says how many. A root
run's error makes the trial's status error.

The traces hold no gold calls: ``--dataset`` gives them, each trace matched to a sample by its
``reference_example_id`` or its id, else by its input text; without one, each trace is a sample
of its own, with the tools its LLM runs were offered (``invocation_params.tools``, or the
``tools`` of an OpenAI call's inputs) or called (see :mod:`tcbreplay._importers.matching`).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers import multipart, parquet
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import token_problem
from tcbreplay._importers.matching import Unmatched, source_of
from tcbreplay._importers.trees import (
    Conversation,
    calls_of,
    input_text,
    lc_kind,
    message,
    offered_tools,
    usage_of,
)
from tcbreplay._secrets import redact
from tcbreplay.errors import TcbReplayWarning, TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs

# the bulk export's columns that hold JSON
_JSON_COLUMNS = ("inputs", "outputs", "extra", "events", "serialized", "feedback_stats")
_ERROR_TYPE = re.compile(r"^([A-Za-z_][\w.]*)\(")


def sniff(file: TraceFile) -> Sniff:
    """Multipart or zstd-compressed run payloads; a Parquet file with the run columns; JSON of
    runs (``run_type``), of ``/runs/batch`` bodies (``post``, ``patch``) or a query's answer."""
    head = file.head
    if multipart.FIRST_PART.match(head):
        return Sniff(1.0, "the langsmith SDK's multipart run payloads (/runs/multipart)")
    if head.startswith(multipart.ZSTD_MAGIC):
        if multipart.FIRST_PART.match(multipart.unzstd_head(head)):
            return Sniff(1.0, "the langsmith SDK's zstd-compressed multipart run payloads")
        return Sniff.no("a zstd-compressed file, but not of LangSmith's multipart run payloads")
    if head.startswith(parquet.MAGIC):
        columns = parquet.columns(file)
        if {"run_type", "trace_id"} <= columns:
            what = "a Parquet file of LangSmith runs (run_type, trace_id): a bulk export"
            return Sniff(0.95, what)
        return Sniff.no("a Parquet file without LangSmith's run columns (run_type, trace_id)")
    top = file.top
    value = top if top is not None else file.first_line.value
    kind = _json_kind(value)
    if kind == "batch":
        what = "JSON Lines of /runs/batch bodies" if top is None else "a /runs/batch body"
        return Sniff(0.95, f"{what} of LangSmith runs (post, patch)")
    if kind == "query":
        return Sniff(0.9, "a LangSmith runs query's answer (runs of run_type, trace_id)")
    if kind == "run":
        what = "JSON Lines of LangSmith runs" if top is None else "a LangSmith run"
        return Sniff(0.9, f"{what} (run_type, trace_id)")
    if kind == "list":
        return Sniff(0.9, "a JSON list of LangSmith runs (run_type, trace_id)")
    return Sniff.no(
        "neither LangSmith runs (objects with run_type and trace_id) nor the SDK's posted payloads"
    )


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    """The file's traces, a sample each (matched to ``inputs``' dataset when given)."""
    runs = read_runs(file)
    unfinished: list[str] = []
    traces, model = _traces(runs, file.name, unfinished)
    if not traces:
        raise TraceError(f"{file.name}: no runs in the file")
    if unfinished:
        warnings.warn(
            TcbReplayWarning(
                f"{file.name}: {len(unfinished)} tool runs have no outputs and no error (still "
                "running when exported, or killed): no result of theirs is stored (a later LLM "
                "run gives one it was given), the first at "
                f"{unfinished[0].removeprefix(file.name + ': ')}"
            ),
            stacklevel=2,
        )
    dataset = None if inputs is None else inputs.dataset
    offered = [tool for run in runs for tool in _offered(run)]
    return source_of(traces, dataset, file.name, offered=offered, model=model)


def read_runs(file: TraceFile) -> list[dict[str, Any]]:
    """Every run of the file, its posts and patches merged, in the order first seen."""
    merged: dict[str, dict[str, Any]] = {}
    posted: dict[str, tuple[str, dict[str, Any]]] = {}
    for place, op, run in _operations(file):
        if not isinstance(run, dict) or run.get("id") is None:
            raise TraceError(f"{place}: a run must be an object with an id")
        if op == "post":  # posted again (a client's retry) only as it was: else one is lost
            first_place, first = posted.setdefault(str(run["id"]), (place, run))
            if first is not run and first != run:
                raise TraceError(
                    f"{place}: run {str(run['id'])!r} is posted again with other values than "
                    f"at {first_place}",
                    hint="a run's later values come in a patch; give each run its own id",
                )
        known = merged.setdefault(str(run["id"]), {"_place": place})
        # a patch names only what it changes: a field it leaves null keeps its posted value
        known.update((k, v) for k, v in run.items() if op == "post" or v is not None)
    return list(merged.values())


# ---------------------------------------------------------------- the file's run operations


def _json_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        if any(isinstance(value.get(op), list) for op in ("post", "patch")):
            return "batch"
        runs = value.get("runs")
        if isinstance(runs, list) and runs and _is_run(runs[0]):
            return "query"
        return "run" if _is_run(value) else None
    if isinstance(value, list) and value and _is_run(value[0]):
        return "list"
    return None


def _is_run(value: Any) -> bool:
    return isinstance(value, dict) and "run_type" in value and "trace_id" in value


def _operations(file: TraceFile) -> Iterator[tuple[str, str, Any]]:
    """Each run the file holds, as ``(place, "post" | "patch", run)``."""
    data = file.data
    if data.startswith(multipart.ZSTD_MAGIC) or multipart.FIRST_PART.match(data):
        for n, body in enumerate(multipart.bodies(data, file.name)):
            yield from multipart.runs(body, f"{file.name}: body {n}")
    elif data.startswith(parquet.MAGIC):
        yield from _parquet(file)
    else:
        yield from _json_runs(data, file.name)


def _json_runs(data: bytes, label: str) -> Iterator[tuple[str, str, Any]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{label}: not UTF-8 text") from exc
    try:
        docs = [(label, _json.loads(text))]
    except json.JSONDecodeError:  # JSON Lines
        docs = [
            (f"{label}: line {n}", doc)
            for n, doc in _json.object_lines(
                text, label, TraceError, expected="expected a LangSmith run or /runs/batch body"
            )
        ]
    except _json.LimitError as exc:
        raise TraceError(f"{label}: {exc}", hint=_json.HINT) from None
    for place, doc in docs:
        kind = _json_kind(doc)
        if kind == "batch":
            for op in ("post", "patch"):
                for k, run in enumerate(doc.get(op) or []):
                    yield f"{place}: {op}[{k}]", op, run
        elif kind == "query":
            for k, run in enumerate(doc["runs"]):
                yield f"{place}: runs[{k}]", "post", run
        elif isinstance(doc, list):
            for k, run in enumerate(doc):
                yield f"{place}: run {k}", "post", run
        elif isinstance(doc, dict):
            yield place, "post", doc
        else:
            raise TraceError(f"{place}: expected LangSmith runs or a /runs/batch body")


def _parquet(file: TraceFile) -> Iterator[tuple[str, str, Any]]:
    for n, row in enumerate(parquet.rows(file, _JSON_COLUMNS)):
        yield f"{file.name}: row {n}", "post", row


# ---------------------------------------------------------------- traces and their messages


def _traces(
    runs: list[dict[str, Any]], label: str, unfinished: list[str]
) -> tuple[list[Unmatched], str | None]:
    """Each trace of the runs (its root and the runs under it), and the model its LLM runs
    name, when they name one; ``unfinished`` is given the places of the tool runs that gave
    no result."""
    by_id = {str(run["id"]): run for run in runs}
    members: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        members.setdefault(_root_of(run, by_id), []).append(run)
    traces, models = [], set()
    for root_id, group in members.items():
        root = by_id.get(root_id)
        if root is None:  # its root run is not in the file: the trace is told by its id
            raise TraceError(
                f"{group[0]['_place']}: its trace's root run ({root_id}) is not in the file",
                hint="export whole traces (every run of each trace)",
            )
        parent = root.get("parent_run_id")
        if parent and str(parent) in by_id:  # its own parent, or one of its runs': a cycle
            raise TraceError(
                f"{root['_place']}: the root run {root_id} of its trace has a parent in the "
                f"file ({parent}): the runs' parents go round in a cycle"
            )
        _check_descent(group, root_id, by_id)
        group.sort(key=lambda r: (str(r.get("dotted_order") or ""), str(r.get("start_time"))))
        traces.append(_trace(root, group, by_id, unfinished))
        models |= {m for r in group if (m := _model_name(r))}
    traces.sort(key=lambda t: (str(t.began), t.line.sample_id))
    return traces, models.pop() if len(models) == 1 else None


def _check_descent(
    group: list[dict[str, Any]], root_id: str, by_id: dict[str, dict[str, Any]]
) -> None:
    """Refuse a trace holding a run that does not descend from its root run (its parents go
    round, or one is not in the file): where it sits, and so its messages, is unknown (its
    model call was left out, or taken for one inside another)."""
    reached = {root_id}
    for run in group:
        path: list[str] = []
        at = run
        while str(at["id"]) not in reached:
            path.append(str(at["id"]))
            parent = at.get("parent_run_id")
            if parent is None or str(parent) not in by_id or str(parent) in path:
                why = (
                    "its parents go round in a cycle" if parent is not None and str(parent) in path
                    else f"its parent {parent} is not in the file" if parent is not None
                    else "it has no parent"
                )  # fmt: skip
                raise TraceError(
                    f"{run['_place']}: run {run['id']} does not descend from its trace's root "
                    f"run {root_id}: {why}",
                    hint="export whole traces (every run of each trace)",
                )
            at = by_id[str(parent)]
        reached.update(path)


def _root_of(run: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> str:
    """The id of a run's trace: its ``trace_id``, else its topmost ancestor in the file."""
    if run.get("trace_id"):
        return str(run["trace_id"])
    seen = set()
    while run.get("parent_run_id") and str(run["parent_run_id"]) in by_id:
        if str(run["id"]) in seen:
            break
        seen.add(str(run["id"]))
        run = by_id[str(run["parent_run_id"])]
    return str(run["id"])


def _trace(
    root: dict[str, Any],
    runs: list[dict[str, Any]],
    by_id: dict[str, dict[str, Any]],
    unfinished: list[str],
) -> Unmatched:
    """A trace as a sample's trial: its messages, status and metadata (the places of its tool
    runs that gave no result added to ``unfinished``)."""
    from tcbreplay._record.messages import serialize_messages

    place = f"{root['_place']} (trace {root['id']})"
    told = Conversation()
    for run in runs:
        kind = run.get("run_type")
        if kind not in ("llm", "tool") or _inside_llm_or_tool(run, by_id):
            continue
        where = f"{run['_place']} ({kind} run {run.get('name')!r})"
        if kind == "llm":
            told.model_call(_llm_inputs(run, where), _llm_output(run, where))
        elif run.get("outputs") is None and not run.get("error"):
            unfinished.append(where)  # no result: not an empty one (its call stays open)
        else:
            told.tool_call(str(run.get("name") or ""), *_tool_result(run, where),
                           args=run.get("inputs"))  # fmt: skip
    messages = told.messages
    if not messages:
        messages = _root_messages(root, place)
    stored = serialize_messages(messages, {})
    problem = token_problem(stored) or _json.lone_surrogate(stored)
    if problem:
        raise TraceError(f"{place}: {problem}")
    error = root.get("error")
    line = TraceLine(
        sample_id=str(root["id"]),
        messages=stored,
        status="ok" if not error else "error",
        error=None if not error else redact(_error_text(error)),
        error_type=None if not error else _error_type(error),
        metadata=_metadata(root),
        place=place,
    )
    ids = tuple(str(i) for i in (root.get("reference_example_id"), root["id"]) if i)
    began = str(root.get("start_time") or "")
    return Unmatched(line, ids, input_text(messages), began, calls_of(messages))


def _inside_llm_or_tool(run: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> bool:
    parent = by_id.get(str(run.get("parent_run_id")))
    for _ in range(len(by_id)):
        if parent is None:
            return False
        if parent.get("run_type") in ("llm", "tool"):
            return True
        parent = by_id.get(str(parent.get("parent_run_id")))
    return False


def _llm_inputs(run: dict[str, Any], where: str) -> list[Any]:
    """The messages an LLM run was given (the first prompt of a batch)."""
    from langchain_core.messages import HumanMessage

    inputs = run.get("inputs") or {}
    messages = inputs.get("messages") if isinstance(inputs, dict) else None
    if isinstance(messages, list) and messages and isinstance(messages[0], list):
        messages = messages[0]
    if isinstance(messages, list):
        return [message(m, f"{where}: inputs.messages[{k}]") for k, m in enumerate(messages)]
    prompts = inputs.get("prompts") if isinstance(inputs, dict) else None
    if isinstance(prompts, list) and prompts and isinstance(prompts[0], str):
        return [HumanMessage(prompts[0])]
    raise TraceError(f"{where}: its inputs hold no messages (LangChain's or OpenAI's) nor prompts")


def _llm_output(run: dict[str, Any], where: str) -> Any:
    """The model turn an LLM run answered with (None for a run that failed without one)."""
    from langchain_core.messages import AIMessage

    out = run.get("outputs")
    if not out:
        if run.get("error"):
            return None
        raise TraceError(f"{where}: it has no outputs and no error")
    found: Any = None
    generations = out.get("generations") if isinstance(out, dict) else None
    if isinstance(generations, list) and generations:
        first = generations[0]
        if isinstance(first, list):
            first = first[0] if first else None
        if isinstance(first, dict) and first.get("message") is not None:
            found = message(first["message"], f"{where}: generations[0]")
        elif isinstance(first, dict) and isinstance(first.get("text"), str):
            found = AIMessage(first["text"])
    elif isinstance(out, dict) and isinstance(out.get("choices"), list) and out["choices"]:
        choice = out["choices"][0]
        turn = choice.get("message") if isinstance(choice, dict) else None
        found = message(turn, f"{where}: choices[0].message")
        # (OpenAI's counts beside its choices, and the ones LangSmith's wrapper adds)
        if isinstance(found, AIMessage) and not found.usage_metadata:
            usage = out.get("usage_metadata") or out.get("usage")
            found.usage_metadata = usage_of(usage, f"{where}: usage")  # type: ignore[assignment]
    elif isinstance(out, dict):
        value = out.get("output", out)
        found = message(value, f"{where}: outputs") if isinstance(value, dict) else None
    if not isinstance(found, AIMessage):
        if run.get("error"):
            return None  # the model call failed: no turn
        raise TraceError(
            f"{where}: its outputs hold no model turn (LangChain's generations, OpenAI's "
            "choices, or an AI message)"
        )
    return found


def _tool_result(run: dict[str, Any], where: str) -> tuple[Any, str | None, str]:
    """A tool run's result: its content, the call id it names (if any) and its status."""
    content: Any = ""
    call_id, status = None, "success"
    out = run.get("outputs")
    value = out.get("output", out) if isinstance(out, dict) else out
    if isinstance(value, dict) and (value.get("type") == "tool" or lc_kind(value) == "tool"):
        found = message(value, f"{where}: outputs")
        content, call_id, status = found.content, found.tool_call_id, found.status
    elif isinstance(value, str):
        content = value
    elif value is not None:
        content = json.dumps(value, ensure_ascii=False)
    if run.get("error"):  # an error's text, redacted as every stored error is
        content, status = redact(_error_text(run["error"])), "error"
    return content, call_id, status


def _root_messages(root: dict[str, Any], place: str) -> list[Any]:
    """What a trace without an LLM run asked: its root run's input messages or text."""
    from langchain_core.messages import HumanMessage

    inputs = root.get("inputs")
    messages = inputs.get("messages") if isinstance(inputs, dict) else None
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        return [message(m, f"{place}: inputs.messages[{k}]") for k, m in enumerate(messages)]
    texts = [v for v in inputs.values() if isinstance(v, str)] if isinstance(inputs, dict) else []
    if len(texts) == 1:
        return [HumanMessage(texts[0])]
    return [HumanMessage(inputs)] if isinstance(inputs, str) else []


def _error_text(error: Any) -> str:
    """A run's error without the traceback LangChain's tracer writes after it."""
    text = error if isinstance(error, str) else json.dumps(error)
    return text.split("Traceback (most recent call last)", 1)[0].strip() or text


def _error_type(error: Any) -> str:
    found = _ERROR_TYPE.match(error) if isinstance(error, str) else None
    return found.group(1) if found else "langsmith"


def _metadata(root: dict[str, Any]) -> dict[str, Any]:
    """The trial's metadata: where the trace came from, and any feedback on it."""
    out = {"trace_id": str(root.get("trace_id") or root["id"]), "run_name": root.get("name")}
    for key in ("start_time", "end_time", "reference_example_id", "tags", "feedback_stats"):
        if root.get(key):
            out[key] = root[key] if key != "reference_example_id" else str(root[key])
    return out


def _offered(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools an LLM run was offered: LangChain's ``invocation_params``, or the inputs of
    a traced OpenAI call."""
    if run.get("run_type") != "llm":
        return []
    extra, inputs = run.get("extra"), run.get("inputs")
    params = extra.get("invocation_params") if isinstance(extra, dict) else None
    found = offered_tools(params.get("tools")) if isinstance(params, dict) else []
    return found or (offered_tools(inputs.get("tools")) if isinstance(inputs, dict) else [])


def _model_name(run: dict[str, Any]) -> str | None:
    """The model an LLM run names (LangChain's ``ls_model_name``, or its invocation's)."""
    if run.get("run_type") != "llm" or not isinstance(run.get("extra"), dict):
        return None
    extra = run["extra"]
    metadata, params = (extra.get(k) for k in ("metadata", "invocation_params"))
    metadata = metadata if isinstance(metadata, dict) else {}
    params = params if isinstance(params, dict) else {}
    for value in (metadata.get("ls_model_name"), params.get("model"), params.get("model_name")):
        if isinstance(value, str) and value:
            return value
    return None
