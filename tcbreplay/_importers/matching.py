"""Gold for traces that have none: each trace matched to a sample of ``--dataset`` by an id it
carries or by its input text.

Production traces (LangSmith's runs, Langfuse's observations) know nothing of tcbreplay's
sample ids. A trace is a sample's when one of its ids (surest first: a dataset example's id
it was run against, then its own trace id) is a sample's id, or else when its input text (its
first user message, blanks at either end and runs of blanks inside not counted) is the input of
exactly one sample. The traces of one sample are its trials, in the order they began. A trace
that matches no sample, or whose text is the input of several, is refused with its place.

Without a dataset, each trace is a sample of its own id: its input is its input text, it has
no gold calls (``score --gold-run`` scores it against another run's calls), and the tools are
those its model calls were offered, or, for a tool never offered, the arguments it was called
with (its schema unknown: ``--tools`` gives it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tcbreplay._importers.dialect import SourceTraces, TraceLine
from tcbreplay._importers.lines import MAX_TRIALS
from tcbreplay._importers.trees import tool_name
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries
from tcbreplay.errors import DatasetError, TraceError

_BLANKS = re.compile(r"\s+")


@dataclass(frozen=True)
class Unmatched:
    """A trace as read, before it is a sample's: its ``line`` (whose ``sample_id`` is the
    trace's own id), the ``ids`` it may be known by in a dataset (surest first), its input
    ``text``, where it falls among a sample's trials (``began``: any sortable value) and the
    tool calls it made (``calls``: each one's name and argument names)."""

    line: TraceLine
    ids: tuple[str, ...]
    text: str | None
    began: Any = ""
    calls: tuple[tuple[str, tuple[str, ...]], ...] = ()


def source_of(
    traces: Sequence[Unmatched],
    dataset: Dataset | None,
    label: str,
    *,
    offered: Iterable[dict[str, Any]] = (),
    model: str | None = None,
) -> SourceTraces:
    """The traces as an import's source: matched to ``dataset``'s samples, or without one,
    each a sample of its own with the tools ``offered`` to its model calls and those it
    called (see the module docstring)."""
    if dataset is not None:
        return SourceTraces(samples_of(traces, dataset), model=model)
    entries = [{"id": t.line.sample_id, "input": t.text or "", "target": []} for t in traces]
    try:
        own = dataset_from_entries(entries, label)
    except DatasetError as exc:  # the traces' ids or texts: the file's problem
        raise TraceError(str(exc)) from None
    return SourceTraces(samples_of(traces, None), own, _tools(offered, traces), model)


def _tools(offered: Iterable[dict[str, Any]], traces: Sequence[Unmatched]) -> list[dict[str, Any]]:
    """The tools offered, each name once (the first offer), then each tool called but never
    offered, its parameters the arguments it was called with."""
    tools: dict[str, dict[str, Any]] = {}
    for tool in offered:
        name = tool_name(tool)
        if name is not None:
            tools.setdefault(name, tool)
    called: dict[str, set[str]] = {}
    for trace in traces:
        for name, args in trace.calls:
            if name not in tools:
                called.setdefault(name, set()).update(args)
    for name, arg_names in called.items():
        tools[name] = {
            "name": name,
            "description": "(not offered in the traces: its parameters are those it was "
            "called with)",
            "parameters": {"type": "object", "properties": {a: {} for a in sorted(arg_names)}},
        }
    return list(tools.values())


def samples_of(traces: Sequence[Unmatched], dataset: Dataset | None) -> list[TraceLine]:
    """The traces as lines of the dataset's samples, each sample's trials in the order they
    began; without a dataset, each trace is a sample of its own id."""
    if dataset is None:
        return [t.line for t in traces]
    by_text: dict[str, list[str]] = {}
    for sample in dataset.samples:
        by_text.setdefault(_text(sample.input), []).append(sample.sample_id)
    chosen: dict[str, list[Unmatched]] = {}
    for trace in traces:
        chosen.setdefault(_sample_of(trace, dataset, by_text), []).append(trace)
    lines = []
    for sample_id, matched in chosen.items():
        ordered = sorted(matched, key=lambda t: (str(t.began), t.line.sample_id))
        if len(ordered) > MAX_TRIALS:
            raise TraceError(
                f"{ordered[MAX_TRIALS].line.place}: sample {sample_id!r} has more than "
                f"{MAX_TRIALS} traces (trials)"
            )
        lines += [replace(t.line, sample_id=sample_id, trial=k) for k, t in enumerate(ordered)]
    return lines


def _sample_of(trace: Unmatched, dataset: Dataset, by_text: dict[str, list[str]]) -> str:
    for known in trace.ids:
        if known in dataset.by_id:
            return known
    ids = ", ".join(trace.ids)
    if trace.text is None:
        raise TraceError(
            f"{trace.line.place}: no sample of {_name(dataset)} has its id ({ids}), and it has "
            "no user message to match a sample's input by",
            hint="give the dataset entries the traces' ids, or their inputs as the traces ask",
        )
    found = by_text.get(_text(trace.text), [])
    if len(found) == 1:
        return found[0]
    shown = trace.text if len(trace.text) <= 80 else trace.text[:77] + "..."
    if found:
        raise TraceError(
            f"{trace.line.place}: its input {shown!r} is the input of samples "
            f"{', '.join(map(repr, found))} in {_name(dataset)}: give the traces' ids instead"
        )
    raise TraceError(
        f"{trace.line.place}: no sample of {_name(dataset)} has its id ({ids}) or its input "
        f"{shown!r}",
        hint="give the dataset entries the traces' ids, or their inputs as the traces ask",
    )


def _name(dataset: Dataset) -> str:
    return Path(dataset.source).name


def _text(text: str) -> str:
    return _BLANKS.sub(" ", text).strip()
