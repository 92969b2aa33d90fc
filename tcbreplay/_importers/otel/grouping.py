"""Spans grouped into samples: by trace (or by outermost agent span), each group's spans
read by the convention that knows them.

A sample is a trace by default: the one unit every producer has (not every framework marks
its agent: OpenInference's LangChain spans call a LangGraph agent a ``CHAIN``). With
``sample_by="agent"`` each outermost agent span (GenAI ``invoke_agent``, OpenInference
``AGENT``, the AI SDK's ``generateText``/``streamText``) and the spans under it are a sample,
for traces that hold several agent runs; a trace without one is still a sample. Its id is
the trace id (the agent span's id), in hex, unless the spans say otherwise
(``tcbreplay.sample_id``, as ``export --format otlp`` writes). A trace of no model call, tool
run or agent span (an HTTP request's) is no sample: left out, and said.
:mod:`tcbreplay._importers.otel.samples` builds each group's sample.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tcbreplay._importers.otel import genai, openinference, vercel
from tcbreplay._importers.otel.spans import STATUS_ERROR, Span
from tcbreplay.errors import TcbReplayWarning, TraceError

SAMPLE_BY = ("trace", "agent")
READ = "GenAI, OpenInference, the AI SDK"  # the conventions, as warnings name them
# what export --format otlp writes on a sample's root span as its id, to be read back the same
SAMPLE_ID = "tcbreplay.sample_id"
# the conventions, the first that knows a span reading it
_CONVENTIONS: tuple[tuple[ModuleType, Any], ...] = (
    (openinference, openinference.is_openinference),
    (vercel, vercel.is_vercel),
    (genai, lambda span: True),
)


@dataclass
class Group:
    """The spans of one sample: its root (the trace's, or the agent span) and the rest."""

    trace_id: str
    root: Span
    spans: list[Span]
    agents: int = 0  # of a whole trace's: its agent runs (outermost agent spans)

    def sample_id(self, sample_by: str) -> str:
        own = self.root.attributes.get(SAMPLE_ID)
        if isinstance(own, str) and own:
            return own
        return self.trace_id if sample_by == "trace" else self.root.span_id


def groups(spans: Iterable[Span], sample_by: str = "trace", label: str = "") -> list[Group]:
    """The spans as samples (see the module docstring), in the order their traces first
    appear (a trace's agent spans in the order they began); ``label``, the file they came
    from, begins an error's text."""
    at = f"{label}: " if label else ""
    if sample_by not in SAMPLE_BY:
        raise TraceError(f"sample_by {sample_by!r}: choose trace or agent")
    traces: dict[str, dict[str, Span]] = {}
    for span in spans:
        trace = traces.setdefault(span.trace_id, {})
        seen = trace.get(span.span_id)
        if seen is not None and seen != span:  # (sent again as it was: one span)
            raise TraceError(
                f"{at}trace {span.trace_id}: span {span.span_id} comes twice, holding other "
                "values each time: which one is the trace's cannot be told"
            )
        trace[span.span_id] = span
    out: list[Group] = []
    for trace_id, by_id in traces.items():
        roots = [s for s in by_id.values() if not s.parent_id or s.parent_id not in by_id]
        if not roots:  # each span's parent is in the trace: they go round
            first = min(by_id.values(), key=lambda s: (s.start, s.span_id))
            raise TraceError(
                f"{at}trace {trace_id}: its spans' parents go round in a cycle (span "
                f"{first.span_id}'s parent is {first.parent_id}): it has no root span"
            )
        root = min(roots, key=lambda s: (s.start, s.span_id))
        agents = [s for s in by_id.values() if _is_agent(s)]
        outermost = {s.span_id: s for s in agents if ancestor(s, by_id, _is_agent) is None}
        if sample_by == "trace":
            out.append(Group(trace_id, root, list(by_id.values()), len(outermost)))
            continue
        if not outermost:
            out.append(Group(trace_id, root, list(by_id.values())))
            continue
        members: dict[str, list[Span]] = {span_id: [] for span_id in outermost}
        outside: list[Span] = []  # in no agent run
        for span in by_id.values():
            top = (
                span
                if span.span_id in outermost
                else ancestor(span, by_id, _is_outermost(outermost))
            )
            if top is not None:
                members[top.span_id].append(span)
            else:
                outside.append(span)
        runs = [Group(trace_id, outermost[k], v) for k, v in members.items()]
        runs.extend(_outside_runs(trace_id, outside))
        out.extend(sorted(runs, key=lambda g: (g.root.start, g.root.span_id)))
    return out


def _outside_runs(trace_id: str, outside: list[Span]) -> list[Group]:
    """The spans of a trace outside its agent runs, by agent span: a sample of their own
    when they hold a model call or a tool run (its root the first of their roots, its status
    that root's); else nothing, and a warning where one of them failed (its error is no
    agent run's)."""
    if not outside:
        return []
    ids = {s.span_id for s in outside}
    root = min(
        (s for s in outside if not s.parent_id or s.parent_id not in ids),
        key=lambda s: (s.start, s.span_id),
    )
    for span in outside:
        convention = convention_of(span)
        if convention.is_model_call(span) or convention.is_tool_run(span):
            return [Group(trace_id, root, outside)]
    failed = next((s for s in outside if s.status == STATUS_ERROR), None)
    if failed is not None:
        warnings.warn(
            TcbReplayWarning(
                f"trace {trace_id}: span {failed.name!r} ({failed.span_id}) failed outside "
                f"its agent runs ({failed.status_message or 'no message'}): with --sample-by "
                "agent no sample keeps its error (--sample-by trace does)"
            ),
            stacklevel=3,
        )
    return []


def _is_outermost(outermost: dict[str, Span]) -> Any:
    return lambda span: span.span_id in outermost


def ancestor(span: Span, by_id: dict[str, Span], test: Any) -> Span | None:
    """The nearest ancestor of ``span`` that passes ``test``, or None."""
    seen = 0
    parent = by_id.get(span.parent_id)
    while parent is not None and seen < len(by_id):
        if test(parent):
            return parent
        parent = by_id.get(parent.parent_id)
        seen += 1
    return None


def convention_of(span: Span) -> ModuleType:
    for module, claims in _CONVENTIONS:
        if claims(span):
            return module
    return genai


def _is_agent(span: Span) -> bool:
    return bool(convention_of(span).is_agent(span))


def holds_agent(group: Group) -> bool:
    """Whether a span of ``group`` is a model call, a tool run or an agent span in a
    convention read here: a trace of none (an HTTP request's, or in a convention not read)
    is no agent's, and no sample."""
    for span in group.spans:
        c = convention_of(span)
        if c.is_model_call(span) or c.is_tool_run(span) or c.is_agent(span):
            return True
    return False


def warn_no_agent(label: str, count: int, trace_id: str, root: str) -> None:
    """Say in one warning the ``count`` traces of no agent's (see :func:`holds_agent`) left
    out of ``label``, naming the first (its id, its root span's name)."""
    traces = "trace holds" if count == 1 else "traces hold"
    warnings.warn(
        TcbReplayWarning(
            f"{label}: {count} {traces} no model call, tool run or agent span ({READ}), left "
            f"out: trace {trace_id} ({root!r})" + (" ..." if count > 1 else "")
        ),
        stacklevel=3,
    )
