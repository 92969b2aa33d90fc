"""Load and validate datasets: a JSON array or JSONL of entries with gold tool calls (or a
Google ADK eval set, its cases as entries: :mod:`tcbreplay._inputs.adk_evalset`), the file's
text read as entries by :mod:`tcbreplay._inputs.dataset_text`.

Three shapes of gold calls are accepted per entry:

- ``{"tool_call_names": [...], "tool_call_args": [...]}`` (the original benchmark's),
- ``{"target": [{"name": ..., "args": {...}}, ...]}``,
- ``{"target": {"tool_call_names": [...], "tool_call_args": [...]}}``.

``id`` is optional (default: the entry's zero-based position); ``category`` is optional;
``metadata`` is an optional object kept with the sample (stored as the samples' ``metadata``).
A gold call in ``target`` may carry rules (``accept``, ``optional``, ``group``, ``compare``)
and a ``side`` (``"user"``: a call the user is to make), an entry
``"order": "any"`` and its own ``tools`` (gold.py describes them).
An entry gives its gold calls one way: ``target`` together with ``tool_call_names`` or
``tool_call_args`` is refused as ambiguous. Any other key, in an entry or in a gold call, is
refused with its place (and, for a known alias such as ``kwargs``, the key it stands for):
read silently, it would change what is scored.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tcbreplay._inputs.dataset_text import read_entries
from tcbreplay._inputs.finite import refuse_non_finite
from tcbreplay._inputs.gold import (
    GoldCall,
    GoldProblem,
    call_rules,
    check_groups,
    check_order,
    key_problems,
    stored_calls,
)
from tcbreplay._inputs.tools import ToolSchema, schemas_from_items
from tcbreplay._json import lone_surrogate
from tcbreplay.errors import DatasetError, ToolSchemaError

__all__ = ["GoldCall", "lone_surrogate"]


@dataclass(frozen=True)
class Sample:
    """One dataset entry: an input and its gold trajectory."""

    id: str | int
    index: int
    input: str
    target: tuple[GoldCall, ...]
    category: str | None = None
    metadata: dict[str, Any] | None = None
    where: str = field(default="", compare=False, repr=False)
    order: str | None = None  # "any": every gold call in one order-free group
    tools: tuple[ToolSchema, ...] | None = None  # the sample's own tools

    def gold_calls(self) -> list[dict[str, Any]]:
        """The gold calls as a run stores them (``order`` as a group on every call)."""
        return stored_calls(self.target, self.order)

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        """The sample's own tools as a run stores them, or None (the run's tools)."""
        return None if self.tools is None else [t.to_dict() for t in self.tools]

    @property
    def sample_id(self) -> str:
        """The id as stored: always a string."""
        return str(self.id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "input": self.input,
            "target": [c.to_dict() for c in self.target],
        }
        if self.category is not None:
            out["category"] = self.category
        if self.order is not None:
            out["order"] = self.order
        if self.tools is not None:
            out["tools"] = self.tool_schemas()
        if self.metadata:
            out["metadata"] = self.metadata
        return out


@dataclass
class Dataset:
    """A validated dataset and where it came from."""

    samples: list[Sample]
    source: str
    sha256: str | None = None
    by_id: dict[str, Sample] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_id = {s.sample_id: s for s in self.samples}

    def __len__(self) -> int:
        return len(self.samples)

    def entries(self) -> list[dict[str, Any]]:
        """The dataset in the one normalised shape tcbreplay stores."""
        return [s.to_dict() for s in self.samples]

    def for_run(self) -> list[dict[str, Any]] | Path:
        """What a new run's ``dataset.jsonl`` is made of: the entries (a stored dataset: its
        file, copied as it is)."""
        return self.entries()

    def ids(self) -> list[str]:
        """The sample ids, in dataset order."""
        return [s.sample_id for s in self.samples]

    def take(self, positions: Iterable[int]) -> list[Sample]:
        """The samples at these dataset positions."""
        return [self.samples[k] for k in positions]

    def sample(self, sample_id: str) -> Sample | None:
        """The sample of this id, if there is one."""
        return self.by_id.get(sample_id)

    def own_tools(self) -> Sample | None:
        """The first sample with tools of its own, if any."""
        return next((s for s in self.samples if s.tools is not None), None)

    def sha256_stored(self) -> str:
        """sha256 of the dataset as a run stores it (``dataset.jsonl``: one entry a line, as
        :func:`tcbreplay._store.files.write_jsonl_atomic` writes them)."""
        digest = hashlib.sha256()
        for entry in self.entries():
            digest.update((json.dumps(entry, ensure_ascii=False) + "\n").encode())
        return digest.hexdigest()

    def tool_names(self) -> set[str]:
        return {c.name for s in self.samples for c in s.target}


def load_dataset(path: str | Path, params: Mapping[str, set[str] | None] | None = None) -> Dataset:
    """Read a dataset file (JSON array or JSONL) and validate it.

    With ``params`` (tool name -> parameter names) gold calls are checked against the
    tools too, and every problem of the file is reported in one error.
    """
    path = Path(path)
    label = path.name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read dataset: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    raw, where = read_entries(text, label)
    refuse_non_finite(raw, where, text, label)
    samples = parse_entries(raw, label, where, params)
    return Dataset(samples=samples, source=str(path), sha256=hashlib.sha256(data).hexdigest())


def entry_sample(entry: Any, index: int, label: str, where: str) -> Sample:
    """Entry ``index`` of a dataset (``where``: its place in ``label``) as a sample, checked
    as :func:`parse_entries` checks it, but for ids repeated in other entries."""
    try:
        sample = replace(_parse_entry(entry, index), where=where)
    except _EntryProblem as exc:
        raise DatasetError(f"{label}: {where}: {exc}") from None
    problems = _tool_problems(sample, {}, label) if sample.tools is not None else []
    if problems:
        raise DatasetError("\n".join(problems))
    return sample


def dataset_from_entries(
    entries: Iterable[Mapping[str, Any]], source: str = "<entries>"
) -> Dataset:
    """Build a dataset from entries already in memory (for example a run manifest)."""
    raw = list(entries)
    samples = parse_entries(raw, source, [f"entry {i}" for i in range(len(raw))])
    return Dataset(samples=samples, source=source)


def parse_entries(
    raw: list[Any],
    label: str,
    where: list[str],
    params: Mapping[str, set[str] | None] | None = None,
) -> list[Sample]:
    """Normalise raw entries into samples; raise one DatasetError listing every problem."""
    problems: list[str] = []
    samples: list[Sample] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(raw):
        place = f"{label}: {where[index]}"
        raw_id = entry.get("id", index) if isinstance(entry, dict) else index
        if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool):
            if str(raw_id) in seen:
                problems.append(f"{place}: duplicate id {raw_id!r} (also {seen[str(raw_id)]})")
            seen.setdefault(str(raw_id), where[index])
        try:
            sample = _parse_entry(entry, index)
        except _EntryProblem as exc:
            problems.append(f"{place}: {exc}")
            continue
        sample = replace(sample, where=where[index])
        if params is not None or sample.tools is not None:
            problems += _tool_problems(sample, params or {}, label)
        samples.append(sample)
    if problems:
        raise DatasetError("\n".join(problems))
    if not samples:
        raise DatasetError(f"{label}: the dataset has no entries")
    return samples


class _EntryProblem(Exception):
    pass


# the keys of an entry and of a gold call, and keys other tools use for them
ENTRY_KEYS = (
    "id", "input", "target", "tool_call_names", "tool_call_args", "category", "metadata",
    "order", "tools",
)  # fmt: skip
# (bfcl: BFCL's answer, as import --format bfcl keeps it and export writes it back)
CALL_KEYS = ("name", "args", "accept", "optional", "group", "compare", "side", "bfcl")
_ENTRY_ALIASES = {
    "sample_id": "id",
    "task_id": "id",
    "question": "input",
    "prompt": "input",
    "instruction": "input",
    "query": "input",
    "gold": "target",
    "actions": "target",
    "calls": "target",
    "expected": "target",
    "tool_calls": "target",
    "meta": "metadata",
    "info": "metadata",
}
_CALL_ALIASES = {
    "kwargs": "args",
    "arguments": "args",
    "parameters": "args",
    "params": "args",
    "input": "args",
    "tool": "name",
    "tool_name": "name",
    "function": "name",
    "compare_args": "compare",
    "requestor": "side",
}


def unknown_keys(
    obj: dict[str, Any], known: tuple[str, ...], aliases: dict[str, str], what: str, rest: str
) -> str | None:
    """A problem naming the first key of ``obj`` not in ``known`` (``what``: where it sits),
    with the known key it most likely stands for, else ``rest`` (what to do instead)."""
    for key in obj:
        if key in known:
            continue
        guess = aliases.get(key) or next(
            iter(difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)), None
        )
        hint = f"did you mean {guess}?" if guess else rest
        return f"unknown key {key!r} in {what} ({hint})"
    return None


def _parse_entry(entry: Any, index: int) -> Sample:
    if not isinstance(entry, dict):
        raise _EntryProblem(f"expected an object, got {_kind(entry)}")
    problem = unknown_keys(
        entry, ENTRY_KEYS, _ENTRY_ALIASES, "the entry",
        "an entry has id, input, its gold calls, category, metadata, order and tools; put "
        "other fields in metadata",
    )  # fmt: skip
    if problem:  # said with the first problem of the rest, if it has one (a gold call's key)
        try:
            _parse_known(entry, index)
        except _EntryProblem as exc:
            raise _EntryProblem(f"{problem}; {exc}") from None
        raise _EntryProblem(problem)
    return _parse_known(entry, index)


def _parse_known(entry: dict[str, Any], index: int) -> Sample:
    """An entry's sample, from its known keys (see _parse_entry)."""
    if "input" not in entry:
        raise _EntryProblem("missing input")
    text = entry["input"]
    if not isinstance(text, str):
        raise _EntryProblem(f"input must be a string, got {_kind(text)}")
    sample_id = entry.get("id", index)
    if isinstance(sample_id, bool) or not isinstance(sample_id, (str, int)):
        raise _EntryProblem(f"id must be a string or an integer, got {_kind(sample_id)}")
    category = entry.get("category")
    if category is not None and not isinstance(category, str):
        raise _EntryProblem(f"category must be a string, got {_kind(category)}")
    metadata = entry.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _EntryProblem(f"metadata must be an object, got {_kind(metadata)}")
    target = _parse_target(entry)
    try:
        check_groups(target)
        check_order(target, entry.get("order"))
    except GoldProblem as exc:
        raise _EntryProblem(str(exc)) from None
    return Sample(
        id=sample_id,
        index=index,
        input=text,
        target=target,
        category=category,
        order=entry.get("order"),
        tools=_parse_tools(entry["tools"]) if "tools" in entry else None,
        metadata=metadata or None,
    )


def _parse_tools(items: Any) -> tuple[ToolSchema, ...]:
    """An entry's own tools, in the formats of a tools file."""
    try:
        return tuple(schemas_from_items(items, "tools"))
    except ToolSchemaError as exc:
        raise _EntryProblem(str(exc)) from None


def _parse_target(entry: dict[str, Any]) -> tuple[GoldCall, ...]:
    lists = [key for key in ("tool_call_names", "tool_call_args") if key in entry]
    if "target" in entry and lists:
        raise _EntryProblem(
            f"gives both target and {' and '.join(lists)}: give the gold calls one way"
        )
    if "target" in entry:
        target = entry["target"]
        if isinstance(target, list):
            return tuple(_call_from_object(call, i) for i, call in enumerate(target))
        if isinstance(target, dict):
            return _calls_from_lists(target, prefix="target.")
        raise _EntryProblem(f"target must be a list of calls or an object, got {_kind(target)}")
    if "tool_call_names" in entry or "tool_call_args" in entry:
        return _calls_from_lists(entry, prefix="")
    raise _EntryProblem("missing gold calls: give target or tool_call_names and tool_call_args")


def _call_from_object(call: Any, i: int) -> GoldCall:
    if not isinstance(call, dict):
        raise _EntryProblem(f"target[{i}] must be an object with name and args, got {_kind(call)}")
    problem = unknown_keys(
        call,
        CALL_KEYS,
        _CALL_ALIASES,
        f"target[{i}]",
        "a gold call has name, args, accept, optional, group, compare and side",
    )
    if problem:
        raise _EntryProblem(problem)
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise _EntryProblem(f"target[{i}].name must be a non-empty string")
    args = call.get("args", {})
    if not isinstance(args, dict):
        raise _EntryProblem(f"target[{i}].args is not an object ({_kind(args)})")
    try:
        rules = call_rules(call, f"target[{i}]")
    except GoldProblem as exc:
        raise _EntryProblem(str(exc)) from None
    return GoldCall(name=name, args=args, **rules)


def _calls_from_lists(obj: dict[str, Any], prefix: str) -> tuple[GoldCall, ...]:
    if prefix:  # the target object holds the two lists only
        problem = unknown_keys(
            obj, ("tool_call_names", "tool_call_args"), {}, "target",
            "a target object has tool_call_names and tool_call_args only",
        )  # fmt: skip
        if problem:
            raise _EntryProblem(problem)
    names = obj.get("tool_call_names")
    args = obj.get("tool_call_args")
    if names is None:
        raise _EntryProblem(f"missing {prefix}tool_call_names")
    if args is None:
        raise _EntryProblem(f"missing {prefix}tool_call_args")
    if not isinstance(names, list):
        raise _EntryProblem(f"{prefix}tool_call_names must be a list, got {_kind(names)}")
    if not isinstance(args, list):
        raise _EntryProblem(f"{prefix}tool_call_args must be a list, got {_kind(args)}")
    if len(names) != len(args):
        raise _EntryProblem(
            f"{prefix}tool_call_args has {len(args)} items, "
            f"{prefix}tool_call_names has {len(names)}"
        )
    calls = []
    for i, (name, arg) in enumerate(zip(names, args, strict=True)):
        if not isinstance(name, str) or not name:
            raise _EntryProblem(f"{prefix}tool_call_names[{i}] must be a non-empty string")
        if not isinstance(arg, dict):
            raise _EntryProblem(f"{prefix}tool_call_args[{i}] is not an object ({_kind(arg)})")
        calls.append(GoldCall(name=name, args=arg))
    return tuple(calls)


def check_against_tools(
    dataset: Dataset, params: Mapping[str, set[str] | None], label: str
) -> None:
    """Raise a DatasetError for gold calls to unknown tools or with arguments a tool does not take.

    ``params`` maps each tool name to the names of its parameters (None: it takes any).
    """
    problems = [p for sample in dataset.samples for p in _tool_problems(sample, params, label)]
    if problems:
        raise DatasetError("\n".join(problems))


def _tool_problems(sample: Sample, params: Mapping[str, set[str] | None], label: str) -> list[str]:
    place = f"{label}: {sample.where or f'entry {sample.index}'}"
    if sample.tools is not None:  # its own tools
        params = {t.name: None if t.free_form else t.param_names for t in sample.tools}
    problems = []
    for i, call in enumerate(sample.target):
        if call.name not in params:
            known = ", ".join(sorted(params)) or "none"
            own = "its own tools lack" if sample.tools is not None else "the tool set lacks"
            problems.append(
                f"{place}: gold call {i} uses tool {call.name!r}, which {own} (tools: {known})"
            )
            continue
        for problem in key_problems(call, params[call.name]):
            problems.append(f"{place}: gold call {i} ({call.name}) {problem}")
    return problems


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)
