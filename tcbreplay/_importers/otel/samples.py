"""Spans as samples: each group of spans (:mod:`tcbreplay._importers.otel.grouping`) read
by its convention and laid out as one conversation, and a file's samples numbered and named.

The model calls are put in the order they began (calls of one start time in the order their
messages tell); a model call inside another (one instrumentor's span around another's) is the
same call, read once. :mod:`tcbreplay._importers.otel.conversation` lays them and the tool
runs out as one conversation.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tcbreplay._importers.dialect import SourceTraces, TraceLine
from tcbreplay._importers.lines import MAX_TRIALS, token_problem
from tcbreplay._importers.otel import genai, openinference
from tcbreplay._importers.otel.calls import ToolRun, Turn, json_value
from tcbreplay._importers.otel.conversation import conversation, stored, warn_resultless
from tcbreplay._importers.otel.grouping import (
    READ,
    Group,
    ancestor,
    convention_of,
    groups,
    holds_agent,
    warn_no_agent,
)
from tcbreplay._importers.otel.spans import STATUS_ERROR, Span
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries
from tcbreplay.errors import DatasetError, TcbReplayWarning, TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs

_NAMES_SHOWN = 12  # attribute names an error lists at most
# 2000 and 2100 in nanoseconds since 1970: a span's times are between them
_Y2000, _Y2100 = 946_684_800 * 10**9, 4_102_444_800 * 10**9
_UNITS = (("seconds", 10**9), ("milliseconds", 10**6), ("microseconds", 10**3))
_INDEX = re.compile(r"\.\d+(?=\.|$)")  # an index in a flattened attribute's name
# what export --format otlp writes on a sample's root span, to be read back the same
TRIAL = "tcbreplay.trial"
ENTRY = "tcbreplay.entry"  # the dataset entry, as JSON
METADATA = "tcbreplay.metadata"  # the trial's own metadata, as JSON


@dataclass
class Built:
    """A sample read from its spans: its messages (LangChain's, stored form), input text,
    dataset entry (from ``tcbreplay.entry`` where the spans hold one), trial, how it ended,
    the tools its model calls were offered and the tools it called."""

    group: Group
    line: TraceLine
    input: str
    entry: dict[str, Any] | None
    tools: list[dict[str, Any]]
    models: list[str]
    called: dict[str, set[str]] = field(default_factory=dict)
    resultless: list[ToolRun] = field(default_factory=list)  # runs that gave their call none
    unmatched: list[ToolRun] = field(default_factory=list)  # runs that answer no call


def build(group: Group, sample_by: str, label: str) -> Built:
    """One sample's trace line (messages, status, metadata) from its spans."""
    place = f"{label}: trace {group.trace_id}"
    by_id = {s.span_id: s for s in group.spans}
    kinds: dict[str, tuple[ModuleType, str | None]] = {}
    for span in group.spans:
        convention = convention_of(span)
        kind = "model" if convention.is_model_call(span) else None
        if kind is None and convention.is_tool_run(span):
            kind = "tool"
        kinds[span.span_id] = (convention, kind)
    turns: list[Turn] = []
    runs: list[ToolRun] = []
    for span in group.spans:
        convention, kind = kinds[span.span_id]
        if kind is None:
            continue
        # a model call (tool run) inside another is the same one, seen by two instrumentors
        if ancestor(span, by_id, lambda s, kind=kind: kinds[s.span_id][1] == kind) is not None:
            continue
        try:
            if kind == "model":
                turns.append(convention.turn(span, place))
            else:
                runs.append(convention.tool_run(span, place))
        except TraceError as exc:  # (a value's own error, such as a token count's: placed)
            if str(exc).startswith(place):
                raise
            raise TraceError(f"{place}: span {span.span_id}: {exc}") from exc
    unseen = not turns  # (no model call: an agent span's messages say the run, if any)
    if unseen and convention_of(group.root) is genai and genai.INPUT in group.root.attributes:
        turns.append(genai.turn(group.root, place))
    turns = _in_order(turns, place)
    runs.sort(key=lambda r: (r.start, r.span_id))
    unmatched: list[ToolRun] = []
    resultless: list[ToolRun] = []
    entries = conversation(turns, runs, unmatched, models_seen=not unseen, resultless=resultless)
    root = group.root
    input_text = next((e.message.text for e in entries if e.message.role == "user"), None)
    if input_text is None:
        input_text = openinference.input_text(root) or ""
    line = TraceLine(sample_id=group.sample_id(sample_by), messages=stored(entries), place=place)
    problem = token_problem(line.messages)
    if problem:
        raise TraceError(f"{place}: {problem}")
    _ending(line, group, place)
    entry = None
    if ENTRY in root.attributes:
        entry = json_value(root.attributes[ENTRY], f"{place}: {ENTRY}")
        if not isinstance(entry, dict):
            raise TraceError(f"{place}: {ENTRY} must be a dataset entry (a JSON object)")
    tools: dict[str, dict[str, Any]] = {}
    for t in turns:
        for tool in t.tools:
            tools.setdefault(tool["name"], tool)
    for span in (root,):  # an agent span may say the tools its agent has
        for tool in _list(json_value(span.attributes.get(genai.TOOLS), f"{place}: {genai.TOOLS}")):
            schema = _function(tool)
            if schema is not None:
                tools.setdefault(schema["name"], schema)
    called: dict[str, set[str]] = {}
    descriptions = {r.name: r.description for r in runs if r.description}
    for e in entries:
        for c in e.message.calls:
            called.setdefault(c.name, set()).update(k for k in c.args if isinstance(k, str))
    for name in called:
        if name in descriptions and name not in tools:
            tools[name] = {"name": name, "description": descriptions[name]}
    models = [t.model for t in turns if t.model]
    return Built(
        group, line, input_text, entry, list(tools.values()), models, called, resultless, unmatched
    )


def warn_unmatched(place: str, unmatched: list[ToolRun]) -> None:
    """Say the tool runs of the sample at ``place`` that answer no call its model made (a
    tool the agent ran without its model asking, or a call id mistyped): left out of its
    messages."""
    if not unmatched:
        return
    named = ", ".join(f"{r.name} ({r.call_id or 'no call id'})" for r in unmatched[:3])
    warnings.warn(
        TcbReplayWarning(
            f"{place}: {len(unmatched)} tool runs answer no call its model made, left out "
            f"of the sample's messages: {named}" + (" ..." if len(unmatched) > 3 else "")
        ),
        stacklevel=3,
    )


def _in_order(turns: list[Turn], place: str) -> list[Turn]:
    """The model calls in the order they were made: by start time; calls that began at the
    same time (or have none) by what they were sent (a call sent another's answer is the later;
    else the one sent more), with a warning where that cannot tell either."""
    turns.sort(key=lambda t: (t.start, len(t.inputs), t.span_id))
    unclear: tuple[Turn, Turn] | None = None
    for k in range(1, len(turns)):
        a, b = turns[k - 1], turns[k]
        if a.start != b.start or _follows(b, a):
            continue
        if _follows(a, b):
            turns[k - 1], turns[k] = b, a
        elif unclear is None:
            unclear = (a, b)
    if unclear is not None:
        a, b = unclear
        warnings.warn(
            TcbReplayWarning(
                f"{place}: model calls {a.span_id} and {b.span_id} began at the same time"
                f"{'' if a.start else ' (they have no start time)'}, and neither was sent the "
                "other's answer: their order cannot be told (laid out in this order)"
            ),
            stacklevel=3,
        )
    return turns


def _follows(b: Turn, a: Turn) -> bool:
    """Whether model call ``b`` was sent ``a``'s answer (or, ``a`` holding none, its
    messages): it was made after ``a``. Any call follows one that holds no message."""
    held = a.outputs or a.inputs
    sent = {m.key() for m in b.inputs}
    return all(m.key() in sent for m in held)


def _function(tool: Any) -> dict[str, Any] | None:
    from tcbreplay._importers.otel.calls import function_schema

    return function_schema(tool)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ending(line: TraceLine, group: Group, place: str) -> None:
    """The trial, status and metadata of a sample, from its root span."""
    root = group.root
    a = root.attributes
    if TRIAL in a:
        trial = a[TRIAL]
        if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial < MAX_TRIALS:
            raise TraceError(f"{place}: {TRIAL} must be an integer from 0 to {MAX_TRIALS - 1}")
        line.trial = trial
    if root.status == STATUS_ERROR:
        line.status = "error"
        exception = next((e for e in root.events if e.name == "exception"), None)
        detail = exception.attributes if exception is not None else {}
        line.error = root.status_message or detail.get("exception.message") or "the span failed"
        error_type = a.get("error.type") or detail.get("exception.type")
        line.error_type = None if error_type is None else str(error_type)
    if METADATA in a:
        metadata = json_value(a[METADATA], f"{place}: {METADATA}")
        if metadata is not None and not isinstance(metadata, dict):
            raise TraceError(f"{place}: {METADATA} must be a JSON object")
        line.metadata = metadata or None
    elif ENTRY not in a:
        meta = {"trace_id": group.trace_id}
        if root.parent_id or group.root.span_id != _first_root(group).span_id:
            meta["span_id"] = root.span_id
        service = root.resource.get("service.name")
        if isinstance(service, str):
            meta["service"] = service
        meta["span"] = root.name
        line.metadata = meta


def _first_root(group: Group) -> Span:
    ids = {s.span_id for s in group.spans}
    return min(
        (s for s in group.spans if not s.parent_id or s.parent_id not in ids),
        key=lambda s: (s.start, s.span_id),
    )


def read_samples(
    spans: Iterable[Span], label: str, inputs: BenchmarkInputs | None, sample_by: str = "trace"
) -> SourceTraces:
    """Spans as the traces of an import: a line per sample, and, without ``inputs``, the
    samples as a dataset (input: the first user message; gold calls: none, unless the spans
    hold their dataset entries) and the tools the model calls were offered."""
    built = []
    merged = 0  # traces of several agent runs, each taken as one sample
    unread: Group | None = None  # the first trace of no agent's (see holds_agent)
    left_out = 0  # and how many
    names: dict[str, None] = {}  # the attributes of such traces' spans, their indices as N
    odd_time: Span | None = None  # the first span whose times are not nanoseconds
    for g in groups(spans, sample_by, label):
        odd_time = odd_time or next((s for s in g.spans if 0 < (s.start or s.end) < _Y2000), None)
        if not holds_agent(g):
            left_out += 1
            unread = unread or g
            for span in g.spans:
                for key in span.attributes:
                    if len(names) < _NAMES_SHOWN:
                        names.setdefault(_INDEX.sub(".N", key))
            continue
        merged += g.agents > 1
        built.append(build(g, sample_by, label))
        warn_unmatched(built[-1].line.place, built[-1].unmatched)
        for span in g.spans:  # read: their messages, the largest part, can go
            if span is not g.root:
                span.attributes, span.events = {}, []
    if not built and not left_out:
        raise TraceError(f"{label}: no spans in the file")
    if not built:
        seen = ", ".join(names) if names else "none"
        raise TraceError(
            f"{label}: no GenAI spans: no model call, tool run or agent span ({READ}) in "
            f"its {left_out} trace{'s' if left_out > 1 else ''}; the spans' attributes: {seen}",
            hint="docs/otlp.md lists the attributes each convention is read by (OpenLLMetry's "
            "own gen_ai.prompt.N.* attributes are not among them)",
        )
    if unread is not None:
        warn_no_agent(label, left_out, unread.trace_id, unread.root.name)
    if resultless := [(b.group.trace_id, r) for b in built for r in b.resultless]:
        warn_resultless(label, len(resultless), *resultless[0])
    if merged:
        warnings.warn(
            TcbReplayWarning(
                f"{label}: {merged} traces hold several agent runs (agent spans none of which "
                "holds another), each trace taken as one sample with every run's calls "
                "(--sample-by agent makes a sample of each run)"
            ),
            stacklevel=2,
        )
    if odd_time is not None:
        _say_odd_time(odd_time, label)
    if inputs is not None:
        _match(built, inputs.dataset, label)
    else:
        _number_trials(built)
    lines = [b.line for b in built]
    dataset = None if inputs is not None else _dataset(built, label)
    tools = _tools(built)
    models = Counter(m for b in built for m in b.models)
    model = models.most_common(1)[0][0] if models else None
    return SourceTraces(lines, dataset, tools, model)


def _say_odd_time(span: Span, label: str) -> None:
    """Warn of times that are not nanoseconds since 1970 (seconds, milliseconds or
    microseconds, as some exporters write them, where their size says so): they are read as
    they are."""
    time = span.start or span.end
    said = "the latencies read from the file's times are wrong"
    for unit, factor in _UNITS:  # (a time of this century in that unit)
        if _Y2000 // factor <= time < _Y2100 // factor:
            said = (f"the file's times look like {unit}: read as nanoseconds, its latencies "
                    f"are {factor:,} times too small")  # fmt: skip
    warnings.warn(
        TcbReplayWarning(
            f"{label}: span {span.span_id} ({span.name!r}) begins at {time}, before the year "
            f"2000 as nanoseconds since 1970 (OTLP's unit): {said}"
        ),
        stacklevel=3,
    )


def trial_order(group: Group, rank: int) -> tuple[int, int, str]:
    """Where the sample of ``group`` comes among the trials of its sample id: by the start
    of its root span; of one start time, by ``rank`` (how many traces came before its trace:
    a file's order) and then by its root span's id (agent runs of one trace)."""
    return group.root.start, rank, group.root.span_id


def _number_trials(built: list[Built]) -> None:
    """Samples of the same id without a trial of their own: in the order they began (see
    :func:`trial_order`), each the first trial of its sample no sample has, those named
    (``tcbreplay.trial``) kept as named; ``collect`` numbers them so too."""
    ranks: dict[str, int] = {}
    taken: dict[str, set[int]] = {}
    for b in built:
        ranks.setdefault(b.group.trace_id, len(ranks))
        if TRIAL in b.group.root.attributes:
            taken.setdefault(b.line.sample_id, set()).add(b.line.trial)
    for b in sorted(built, key=lambda b: trial_order(b.group, ranks[b.group.trace_id])):
        if TRIAL in b.group.root.attributes:
            continue
        trials = taken.setdefault(b.line.sample_id, set())
        b.line.trial = next(n for n in range(len(trials) + 1) if n not in trials)
        trials.add(b.line.trial)


def _match(built: list[Built], dataset: Dataset, label: str) -> None:
    """Each sample named by the dataset entry it is: by id (its own, or its trace's), else
    by input text; samples of one entry are its trials, in the order they began."""
    by_input: dict[str, str] = {}
    for s in dataset.samples:
        by_input.setdefault(s.input.strip(), s.sample_id)
    for b in built:
        sid = b.line.sample_id
        if sid not in dataset.by_id:
            found = by_input.get(b.input.strip())
            if found is None:
                shown = b.input if len(b.input) <= 60 else b.input[:57] + "..."
                raise TraceError(
                    f"{b.line.place}: sample {sid}: neither its id nor its input {shown!r} is "
                    "a dataset entry's",
                    hint="give the dataset its traces were recorded from, or leave --dataset "
                    "out to take each trace as a sample",
                )
            b.line.sample_id = found
    _number_trials(built)


def _dataset(built: list[Built], label: str) -> Dataset:
    entries: dict[str, dict[str, Any]] = {}
    for b in built:
        entry = b.entry or {"id": b.line.sample_id, "input": b.input, "target": []}
        entries.setdefault(b.line.sample_id, entry)
    try:
        return dataset_from_entries(list(entries.values()), label)
    except DatasetError as exc:
        raise TraceError(str(exc)) from None


def _tools(built: list[Built]) -> list[dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    called: dict[str, set[str]] = {}
    for b in built:
        for tool in b.tools:
            tools.setdefault(tool["name"], tool)
        for name, args in b.called.items():
            called.setdefault(name, set()).update(args)
    return tools_of(tools, called)


def tools_of(tools: dict[str, dict[str, Any]], called: dict[str, set[str]]) -> list[dict[str, Any]]:
    """The tools offered (by name), each once; a tool called (with the arguments in
    ``called``) but never offered takes the arguments it was called with (its schema is
    unknown: ``--tools`` gives it)."""
    out = {name: dict(tool) for name, tool in tools.items()}
    for name, args in called.items():
        tool = out.setdefault(name, {"name": name})
        if "parameters" not in tool:
            tool["parameters"] = {
                "type": "object",
                "properties": {arg: {} for arg in sorted(args) if arg != _invalid()},
            }
            tool.setdefault("description", "(not declared in the traces: its parameters are "
                            "those it was called with)")  # fmt: skip
    return list(out.values())


def _invalid() -> str:
    from tcbreplay._store.schema import INVALID_ARGUMENTS

    return INVALID_ARGUMENTS
