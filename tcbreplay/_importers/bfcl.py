"""The Berkeley Function Calling Leaderboard's own files, imported as a run.

BFCL (package ``bfcl-eval``) keeps each category's questions in one JSON Lines file
(``{"id", "question": [[messages]], "function": [schemas]}``), its possible answers in
another (``{"id", "ground_truth": [{function: {param: [acceptable values]}}]}``, where
``""`` among the values marks a parameter that may be left out), and a model's answers
in a results file, one ``{"id", "result"}`` per line (see
:mod:`tcbreplay._inputs.bfcl_calls` for the result's two forms).

Each question becomes a sample: its id, its category (the id without its number), its
own functions (``tools``) and its gold calls, each with

- ``args``: every parameter's first acceptable value; ``accept``: all of them, where
  there are several; ``optional``: the parameters that may be left out; ``group``: 0 in
  the parallel categories, whose calls may come in any order;
- ``bfcl``: BFCL's own answer for the call and the function schema its checker reads,
  so that ``score --scorer bfcl`` judges exactly as BFCL does.

A dict parameter's answer in BFCL lists acceptable values per key: its acceptable
values here are every combination (a list of dicts: every combination of those).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.bfcl_calls import DecodeError, decode_result, json_safe
from tcbreplay._inputs.dataset import Dataset, GoldCall, Sample, lone_surrogate
from tcbreplay._inputs.tools import ToolSchema, Toolset, schemas_from_items
from tcbreplay._secrets import redact
from tcbreplay.errors import DatasetError, InputError, ToolSchemaError, TraceError

# BFCL's categories whose answers its AST checker judges in Python (the non-live ones)
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
# acceptable values of one argument, at most (a dict's are the combinations of its keys')
MAX_ACCEPTABLE = 10_000
_ID = re.compile(r"(.+)_\d+")


@dataclass(frozen=True)
class BfclSample(Sample):
    """A question with its own functions (``tools``, read as tool schemas)."""

    # the question's functions as BFCL gives them, and its messages (its input is the
    # users' words)
    functions: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    messages: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)


@dataclass
class BfclInputs(BenchmarkInputs):
    """BFCL's questions and answers as a benchmark's inputs; the manifest names both files."""

    answers_source: str = ""
    answers_sha256: str = ""

    def manifest_fields(self) -> dict[str, Any]:
        fields = super().manifest_fields()
        fields["dataset"]["answers"] = {
            "source": self.answers_source,
            "sha256": self.answers_sha256,
        }
        return fields


def load_bfcl_inputs(questions: str | Path, answers: str | Path) -> BfclInputs:
    """BFCL's questions and possible answers (its own files, unchanged) as a dataset of
    samples with their own functions, and the run's tools: every distinct function."""
    q_path, a_path = Path(questions), Path(answers)
    q_data, a_data = _read(q_path, "--dataset"), _read(a_path, "--answers")
    by_id: dict[str, tuple[int, dict[str, Any]]] = {}
    for lineno, entry in _lines(a_data, a_path.name, DatasetError):
        answer_id = entry.get("id")
        if not isinstance(answer_id, str) or not isinstance(entry.get("ground_truth"), list):
            raise DatasetError(
                f"{a_path.name}: line {lineno}: expected an id and a ground_truth list"
            )
        if answer_id in by_id:
            raise DatasetError(
                f"{a_path.name}: line {lineno}: id {answer_id!r} given twice "
                f"(also line {by_id[answer_id][0]})"
            )
        by_id[answer_id] = (lineno, entry)
    samples: list[Sample] = []
    functions: dict[str, dict[str, Any]] = {}
    for index, (lineno, entry) in enumerate(_lines(q_data, q_path.name, DatasetError)):
        place = f"{q_path.name}: line {lineno}"
        sample = _sample(entry, index, place, by_id, a_path.name)
        samples.append(sample)
        for function in sample.functions:
            functions.setdefault(json.dumps(function, sort_keys=True), function)
    if not samples:
        raise DatasetError(f"{q_path.name}: no questions")
    unused = sorted(set(by_id) - {s.sample_id for s in samples})
    if unused:
        lineno = by_id[unused[0]][0]
        raise DatasetError(
            f"{a_path.name}: line {lineno}: id {unused[0]!r} answers no question in "
            f"{q_path.name} ({len(unused)} such)",
            hint="give the questions file and the possible answers file of the same categories",
        )
    try:
        schemas = [ToolSchema.from_dict(f, f"{q_path.name}: function") for f in functions.values()]
    except ToolSchemaError as exc:
        raise DatasetError(str(exc)) from None
    return BfclInputs(
        name="bfcl",
        title="BFCL",
        dataset=Dataset(samples=samples, source=str(q_path), sha256=_sha256(q_data)),
        toolset=Toolset(schemas=schemas, source=str(q_path), sha256=_sha256(q_data)),
        system_prompt="",
        system_prompt_source=None,
        system_prompt_sha256=None,
        answers_source=str(a_path),
        answers_sha256=_sha256(a_data),
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read(path: Path, option: str) -> bytes:
    if lone_surrogate(str(path)):
        raise DatasetError(
            f"{option} {str(path)!r}: the name is not valid UTF-8", hint="rename the file"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read {option} file: {exc.strerror or exc}") from exc


def _lines(data: bytes, label: str, error: type[InputError]) -> list[tuple[int, dict[str, Any]]]:
    """The objects of a JSON Lines file, with their line numbers."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return list(
        _json.object_lines(text, label, error, hint="BFCL's files hold one JSON object per line")
    )


def _sample(
    entry: dict[str, Any], index: int, place: str,
    answers: dict[str, tuple[int, dict[str, Any]]], answers_label: str,
) -> BfclSample:  # fmt: skip
    qid = entry.get("id")
    if not isinstance(qid, str):
        raise DatasetError(f"{place}: expected an id (a string)")
    match = _ID.fullmatch(qid)
    category = match[1] if match else None
    if category not in CATEGORIES:
        raise DatasetError(
            f"{place}: id {qid!r}: category {category!r} is not one tcbreplay judges as BFCL "
            f"does (it judges {', '.join(CATEGORIES)})"
        )
    turns = entry.get("question")
    if not (
        isinstance(turns, list)
        and len(turns) == 1
        and isinstance(turns[0], list)
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in turns[0]
        )
    ):
        raise DatasetError(
            f"{place}: question must be one turn: a list of messages with role and content"
        )
    functions = entry.get("function")
    if not (
        isinstance(functions, list)
        and functions
        and all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in functions)
    ):
        raise DatasetError(
            f"{place}: function must be a list of function schemas, each with a name"
        )
    if qid not in answers:
        raise DatasetError(f"{place}: id {qid!r} has no possible answer in {answers_label}")
    a_line, answer = answers[qid]
    where = f"{answers_label}: line {a_line}"
    gold = tuple(
        _gold_call(call, k, category, functions, where)
        for k, call in enumerate(answer["ground_truth"])
    )
    text = "\n\n".join(m["content"] for m in turns[0] if m["role"] == "user")
    try:
        tools = tuple(schemas_from_items(functions, f"{place}: function"))
    except ToolSchemaError as exc:
        raise DatasetError(str(exc)) from None
    return BfclSample(
        id=qid, index=index, input=text, target=gold, category=category, where=place,
        tools=tools, functions=tuple(functions), messages=tuple(turns[0]),
    )  # fmt: skip


def _gold_call(
    call: Any, k: int, category: str, functions: list[dict[str, Any]], where: str
) -> GoldCall:
    if not (
        isinstance(call, dict) and len(call) == 1 and isinstance(next(iter(call.values())), dict)
    ):
        raise DatasetError(
            f"{where}: ground_truth[{k}] must be one function name with its parameters"
        )
    name, answer = next(iter(call.items()))
    if "parallel" in category or "multiple" in category:
        function = next((f for f in functions if f["name"] == name), None)
        if function is None:
            raise DatasetError(
                f"{where}: ground_truth[{k}] calls {name!r}, which the question does not define"
            )
    else:  # BFCL judges a simple question's one call against the question's first function
        function = functions[0]
    properties = (function.get("parameters") or {}).get("properties") or {}
    args: dict[str, Any] = {}
    accept: dict[str, list[Any]] = {}
    optional = []
    for param, values in answer.items():
        if not isinstance(values, list):
            raise DatasetError(
                f"{where}: ground_truth[{k}].{name}.{param} must be a list of acceptable values"
            )
        schema = properties[param] if isinstance(properties.get(param), dict) else {}
        given = [v for v in values if v != ""]
        options = _acceptable(given, schema, f"{where}: ground_truth[{k}].{name}.{param}")
        if options:
            args[param] = options[0]
        if len(given) < len(values):  # "" among them: the parameter may be left out
            optional.append(param)
            options = [*options, *(v for v in _empty_values(given, schema) if v not in options)]
        if len(options) > 1 or (options and param not in args):
            accept[param] = options
    return GoldCall(  # with BFCL's acceptable values, optional parameters and order group
        name=name,
        args=args,
        accept=accept or None,
        optional=tuple(optional) or None,
        group=0 if "parallel" in category else None,
        bfcl={"answer": answer, "function": function},
    )


def _empty_values(given: list[Any], schema: dict[str, Any]) -> list[Any]:
    """The values BFCL's checker takes for its optional mark ``""`` (``given``: the answer's
    other values): ``""`` for a string parameter (its string check folds both sides, so
    ``" "`` is taken too) or where the first value is a string (compared as it is), and
    ``[]`` for an array or tuple whose first value is a list or that has none (its list
    checks read ``""`` as a list of no items)."""
    first = given[0] if given else None
    out: list[Any] = []
    if schema.get("type") in ("string", "any") or type(first) is str:
        out.append("")
    if schema.get("type") in ("array", "tuple") and (not given or type(first) is list):
        out.append([])
    return out


def _acceptable(values: list[Any], schema: dict[str, Any], where: str) -> list[Any]:
    """Every acceptable value: a dict parameter's answer lists values per key, so its values
    are the combinations (a list of dicts: the combinations of its dicts')."""
    items = schema["items"] if isinstance(schema.get("items"), dict) else {}
    if schema.get("type") == "dict":
        expand = _dict_values
    elif schema.get("type") in ("array", "tuple") and items.get("type") == "dict":
        expand = _dicts_values
    else:
        return values
    out: list[Any] = []
    for value in values:
        for combination in expand(value):
            if combination not in out:
                out.append(combination)
            if len(out) > MAX_ACCEPTABLE:
                raise DatasetError(f"{where}: more than {MAX_ACCEPTABLE:,} acceptable values")
    return out


def _dict_values(answer: Any) -> Any:
    if not isinstance(answer, dict) or not all(isinstance(v, list) for v in answer.values()):
        yield answer  # not BFCL's per-key lists: the value itself
        return
    left_out = object()
    keys = list(answer)
    choices = [
        [v for v in answer[key] if v != ""] + ([left_out] if "" in answer[key] else [])
        for key in keys
    ]
    for combination in itertools.product(*choices):
        yield {key: v for key, v in zip(keys, combination, strict=True) if v is not left_out}


def _dicts_values(answer: Any) -> Any:
    if not isinstance(answer, list):
        yield answer
        return
    yield from (list(c) for c in itertools.product(*(list(_dict_values(d)) for d in answer)))


def sniff(file: TraceFile) -> Sniff:
    """A first line with an ``id`` and a ``result`` (and no messages); the dialect is never
    picked by sniffing, as reading it takes BFCL's answers."""
    line = file.first_line.value
    if isinstance(line, dict) and {"id", "result"} <= line.keys() and "messages" not in line:
        return Sniff(0.9, "it looks like a BFCL results file (id, result)")
    return Sniff.no("its first line is not a BFCL result (id, result)")


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    """A trace per answered question (``inputs``: from :func:`load_bfcl_inputs`)."""
    if inputs is None:
        raise InputError("--format bfcl needs --dataset")
    found = read_results(file.data, file.name, inputs)
    return SourceTraces(
        [TraceLine(sample_id, line["messages"], status=line["status"], error=line["error"],
                   error_type=INFERENCE_ERROR_TYPE if line["error"] else None)
         for sample_id, line in found.items()]
    )  # fmt: skip


# how bfcl-eval writes a result whose inference failed (its traceback beside it), and the
# error type tcbreplay stores for it
INFERENCE_ERROR = "Error during inference"
INFERENCE_ERROR_TYPE = "bfcl_inference"


def read_results(data: bytes, label: str, inputs: BenchmarkInputs) -> dict[str, dict[str, Any]]:
    """One trace per answered question from a BFCL results file: the question's messages and
    an AI message with the result, its calls decoded as BFCL decodes them."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from tcbreplay._record.messages import serialize_messages

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    samples = inputs.dataset.by_id
    seen: dict[str, int] = {}
    out = {}
    for lineno, line in _lines(data, label, TraceError):
        sample_id, result = line.get("id"), line.get("result")
        place = f"{label}: line {lineno}"
        if not isinstance(sample_id, str) or sample_id not in samples:
            raise TraceError(f"{place}: id {sample_id!r} is not a question of the dataset")
        if sample_id in seen:
            raise TraceError(f"{place}: id {sample_id!r} given twice (also line {seen[sample_id]})")
        seen[sample_id] = lineno
        if not isinstance(result, (list, str)):
            raise TraceError(f"{place}: result must be a list of calls or a string of calls")
        failed = isinstance(result, str) and result.startswith(INFERENCE_ERROR)
        if isinstance(result, str) and failed:  # the provider's error: it may quote the key
            result = redact(result, environ={})
        sample = samples[sample_id]
        question = [
            kinds.get(m["role"], HumanMessage)(content=m["content"])
            for m in sample.messages  # type: ignore[attr-defined]
        ]
        renamed = _renamed(result, sample)
        metadata: dict[str, Any] = {"synthesized_from": "bfcl", "bfcl_result": result}
        if renamed:
            metadata["bfcl_renamed"] = renamed
        try:
            calls = decode_result(result, renamed)
        except DecodeError:
            calls = []  # no calls; the bfcl scorer reports BFCL's decoder error
        tool_calls = [
            {"name": name, "args": json_safe(args), "id": f"{sample_id}-{k}", "type": "tool_call"}
            for k, call in enumerate(calls)
            for name, args in call.items()
        ]
        answer = AIMessage(
            content=result if isinstance(result, str) else "",
            tool_calls=tool_calls,
            response_metadata=metadata,
            usage_metadata=_usage(line, place),
        )
        messages = serialize_messages([*question, answer], {})
        messages[-1]["latency_s"] = _count(line, "latency", place, float)  # the answer's
        out[sample_id] = {"status": "error" if failed else "ok",
                          "error": result if failed else None, "messages": messages}  # fmt: skip
    return out


def _usage(line: dict[str, Any], place: str) -> Any:
    """The token counts bfcl-eval writes beside a result (``input_token_count``,
    ``output_token_count``), as a message's usage; None without them."""
    given = _count(line, "input_token_count", place, int)
    made = _count(line, "output_token_count", place, int)
    if given is None and made is None:
        return None
    return {"input_tokens": given or 0, "output_tokens": made or 0,
            "total_tokens": (given or 0) + (made or 0)}  # fmt: skip


def _count(line: dict[str, Any], key: str, place: str, kind: type) -> Any:
    """``line[key]``, a number of 0 or more (of ``kind``: int, or float), or None. bfcl-eval
    writes a list of them for a multi-turn question: their sum."""
    value = line.get(key)
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    flat = [v for item in values for v in (item if isinstance(item, list) else [item])]
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in flat)
    if not ok or (kind is int and any(isinstance(v, float) and not v.is_integer() for v in flat)):
        raise TraceError(f"{place}: {key} {value!r} is not a count of 0 or more")
    total = sum(flat)
    return int(total) if kind is int else float(total)


def _renamed(result: Any, sample: Sample) -> dict[str, str]:
    """Names a provider rewrote, mapped back: a function-calling model's call of
    ``spotify_play`` where the question defines ``spotify.play`` (and no ``spotify_play``),
    since providers allow no dots in names and BFCL compares the rewritten names."""
    if not isinstance(result, list):
        return {}
    names = {tool.name for tool in sample.tools or ()}
    rewritten = {n.replace(".", "_"): n for n in names if "." in n}
    out = {}
    for item in result:
        if isinstance(item, dict) and item:
            name = next(iter(item))
            if name not in names and name in rewritten:
                out[name] = rewritten[name]
    return out
