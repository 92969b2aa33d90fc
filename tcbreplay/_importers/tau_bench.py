"""τ-bench's results files, read as they are: a JSON list of trajectories, each ``{"task_id",
"trial", "reward", "info": {"task": {"user_id", "instruction", "actions", "outputs"},
"reward_info", "user_cost", "source"}, "traj": [OpenAI chat messages]}``.

They hold the samples too: one per task, its input the task's instruction, its gold calls
the task's ``actions`` (``{"name", "kwargs"}``), its metadata the task's ``user_id`` and
expected ``outputs``. Each trajectory is the task's trial ``trial``, with the ``reward``,
``reward_info``, ``user_cost`` and ``source`` as the trial's metadata.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tcbreplay import _json
from tcbreplay._importers import openai
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import MAX_TRIALS
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries, lone_surrogate
from tcbreplay.errors import DatasetError, TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs

_TASK_META = ("user_id", "outputs")
_TRIAL_META = ("reward_info", "user_cost", "source")


def sniff(file: TraceFile) -> Sniff:
    """A JSON list whose first entry has a ``task_id`` and a ``traj``."""
    top = file.top
    if not isinstance(top, list):
        return Sniff.no("it is not a JSON list (of τ-bench results)")
    first = top[0] if top else None
    if isinstance(first, dict) and {"task_id", "traj"} <= first.keys():
        return Sniff(0.9, "a JSON list of τ-bench results (task_id, trial, traj)")
    return Sniff.no("it is a JSON list, but not of τ-bench results", close=True)


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    """The trajectories, and the tasks as the samples (``inputs`` given replace them)."""
    lines, dataset = read_results(file.data, file.name)
    return SourceTraces(lines, dataset, benchmark=("tau-bench", "τ-bench"))


def read_results(data: bytes, label: str) -> tuple[list[TraceLine], Dataset]:
    """The trajectories of a τ-bench results file, and its tasks as a dataset."""
    from tcbreplay._record.messages import serialize_messages

    try:
        doc = _json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise TraceError(f"{label}: not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise TraceError(f"{label}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    except _json.LimitError as exc:
        raise TraceError(f"{label}: {exc}", hint=_json.HINT) from None
    if not isinstance(doc, list) or not doc:
        raise TraceError(f"{label}: expected a JSON list of τ-bench results")
    surrogate = lone_surrogate(doc)
    if surrogate:
        raise TraceError(f"{label}: holds a lone surrogate {surrogate}, which is not valid Unicode")
    tasks: dict[str, tuple[dict[str, Any], str]] = {}
    lines: list[TraceLine] = []
    seen: dict[tuple[str, int], str] = {}
    for i, item in enumerate(doc):
        place = f"{label}: entry {i}"
        task_id, trial, task = _parts(item, place)
        place = f"{place} (task {task_id}, trial {trial})"
        key = (str(task_id), trial)
        if key in seen:
            raise TraceError(
                f"{place}: task {task_id} trial {trial} appears twice (also {seen[key]})"
            )
        seen[key] = f"entry {i}"
        entry = _entry(task_id, task, place)
        if str(task_id) in tasks and tasks[str(task_id)][0] != entry:
            raise TraceError(
                f"{place}: task {task_id} differs from its other trials' ({tasks[str(task_id)][1]})"
            )
        tasks.setdefault(str(task_id), (entry, f"entry {i}"))
        info = item["info"]
        metadata = {"reward": item.get("reward")}
        metadata.update({key: info[key] for key in _TRIAL_META if key in info})
        lines.append(
            TraceLine(
                sample_id=str(task_id),
                messages=serialize_messages(openai.convert(item["traj"], item, place), {}),
                trial=trial,
                metadata=metadata,
                place=place,
            )
        )
    entries = sorted((e for e, _ in tasks.values()), key=lambda e: _order(e["id"]))
    try:
        dataset = dataset_from_entries(entries, label)
    except DatasetError as exc:  # a task's actions that are no gold calls
        raise TraceError(str(exc)) from None
    return lines, dataset


def _parts(item: Any, place: str) -> tuple[Any, int, dict[str, Any]]:
    """An entry's task id, trial and task, checked."""
    if not isinstance(item, dict):
        raise TraceError(f"{place}: expected an object with task_id, trial, info and traj")
    for key in ("task_id", "info", "traj"):
        if key not in item:
            raise TraceError(f"{place}: missing {key}")
    task_id = item["task_id"]
    if isinstance(task_id, bool) or not isinstance(task_id, (int, str)):
        raise TraceError(f"{place}: task_id must be an integer or a string")
    trial = item.get("trial", 0)
    if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial < MAX_TRIALS:
        raise TraceError(f"{place}: trial must be an integer from 0 to {MAX_TRIALS - 1}")
    task = item["info"].get("task") if isinstance(item["info"], dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("instruction"), str):
        raise TraceError(f"{place}: info.task must be an object with an instruction")
    if not isinstance(item["traj"], list):
        raise TraceError(f"{place}: traj must be a list of messages")
    reward = item.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise TraceError(f"{place}: reward must be a number")
    return task_id, trial, task


def _entry(task_id: Any, task: dict[str, Any], place: str) -> dict[str, Any]:
    """A task as a dataset entry: its actions are the gold calls."""
    actions = task.get("actions", [])
    if not isinstance(actions, list):
        raise TraceError(f"{place}: info.task.actions must be a list")
    target = []
    for j, action in enumerate(actions):
        if not isinstance(action, dict) or set(action) - {"name", "kwargs"}:
            extra = sorted(set(action) - {"name", "kwargs"}) if isinstance(action, dict) else []
            raise TraceError(
                f"{place}: info.task.actions[{j}] must be {{name, kwargs}}"
                + (f" (unknown key {extra[0]!r})" if extra else "")
            )
        target.append({"name": action.get("name"), "args": action.get("kwargs", {})})
    entry: dict[str, Any] = {"id": task_id, "input": task["instruction"], "target": target}
    metadata = {key: task[key] for key in _TASK_META if key in task}
    if metadata:
        entry["metadata"] = metadata
    return entry


def _order(task_id: Any) -> tuple[int, Any]:
    """Tasks in id order: numbers by value, before any text."""
    return (0, task_id) if isinstance(task_id, int) else (1, str(task_id))
