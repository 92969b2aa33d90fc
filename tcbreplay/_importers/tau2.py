"""τ²-bench's results files, read as they are: one JSON object ``{"timestamp", "info", "tasks",
"simulations"}`` as τ² writes it.

They hold the samples too: one per task (``tasks[]``), its input the user's instructions, its
gold calls the task's ``evaluation_criteria.actions`` (``{"action_id", "requestor", "name",
"arguments", "compare_args"}``): ``compare_args`` becomes the gold rule ``compare`` (null:
every argument compared; ``[]``: none), and an action whose requestor is the user is a gold call
of the side ``user``, a call the simulated user makes on its own device (telecom). Each
simulation is the trial ``trial`` of its task, its ``reward``, ``reward_info``,
``termination_reason``, costs and duration the trial's metadata (a simulation that ended in
an ``infrastructure_error``, which τ² counts in no metric, is stored with status ``error``);
its messages are read as the
store keeps them: flat calls ``{id, name, arguments}`` as LangChain tool calls, a tool result
(``{role: "tool", id, content}``) as a tool message answering the call of that id, and the
user's own calls on the human message that makes them, where scoring finds them only with
``score --side user`` (never as the agent's calls).

A file whose embedded tasks do not match its simulations (a simulation of a task the file does
not hold, or checked against other actions than its task's: ``reward_info.action_checks``) is
refused, naming them; ``gold_from="action-checks"`` scores each task against the actions its
simulations were checked against instead (a simulation checked against none, as τ² writes for
a task without actions, keeps its task's).

τ² publishes no tool schemas in its files: those of airline, retail and telecom (with the
telecom user's device) ship in ``vendor/``, chosen by the file's domain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from tcbreplay import _json
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import MAX_TRIALS, message_problem, repeated_key_problem
from tcbreplay._importers.openai import parse_arguments
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries, lone_surrogate
from tcbreplay.errors import DatasetError, TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs

# where each trial's gold calls come from: its task's actions, or the actions its simulation
# was checked against
GOLD_FROM = ("tasks", "action-checks")
VENDOR = Path(__file__).parent / "vendor"
# the domains whose tools ship here, and their files (telecom's user acts on its own device)
DOMAIN_TOOLS = {
    "airline": ("tau2-airline-tools.json",),
    "retail": ("tau2-retail-tools.json",),
    "telecom": ("tau2-telecom-tools.json", "tau2-telecom-user-tools.json"),
}
# a simulation's fields kept as its trial's metadata (τ²'s "id" as simulation_id)
# the termination of a simulation that failed for reasons outside the agent and the user
# (the model's API, the environment): τ² leaves it out of every metric; stored as an error
INFRASTRUCTURE_ERROR = "infrastructure_error"
_TRIAL_META = ("reward_info", "termination_reason", "agent_cost", "user_cost", "duration", "seed")
# a task's fields kept as its sample's metadata (beside the evaluation criteria but its actions)
_TASK_META = ("description", "user_scenario", "ticket", "initial_state")
_SIDES = {"assistant": None, "user": "user"}  # an action's requestor: its gold call's side
# how many mismatched simulations an error names
_NAMED = 5


def sniff(file: TraceFile) -> Sniff:
    """A JSON object with τ²'s ``tasks`` and ``simulations``."""
    top = file.top
    if not isinstance(top, dict):
        return Sniff.no("it is not a JSON object (a τ²-bench results file)")
    if {"tasks", "simulations"} <= top.keys():
        return Sniff(0.95, "a τ²-bench results file (info, tasks, simulations)")
    if "simulations" in top or "tasks" in top:
        return Sniff.no("a JSON object, but without τ²-bench's tasks and simulations", close=True)
    return Sniff.no("it is a JSON object without τ²-bench's tasks and simulations")


def read(
    file: TraceFile, inputs: BenchmarkInputs | None, *, gold_from: str = "tasks"
) -> SourceTraces:
    """The simulations, the tasks as the samples (``inputs`` given replace them) and the
    domain's tools; ``gold_from``: one of :data:`GOLD_FROM`."""
    if gold_from not in GOLD_FROM:
        raise TraceError(f"--gold-from {gold_from!r}: choose one of {', '.join(GOLD_FROM)}")
    label = file.name
    repeats: _json.Repeats = {}
    doc = _document(file.data, label, repeats)
    found = doc.get("info")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    domain = _domain(info)
    tasks = _tasks(doc, label)
    sims = doc["simulations"]
    if not isinstance(sims, list) or not sims:
        raise TraceError(f"{label}: simulations must be a non-empty list")
    lines: list[TraceLine] = []
    checked: dict[str, tuple[list[dict[str, Any]], str]] = {}  # task -> (its checks, where)
    seen: dict[tuple[str, int], str] = {}
    unmatched: list[str] = []
    for i, sim in enumerate(sims):
        where = f"simulations[{i}]"
        task_id, trial = _sim_parts(sim, f"{label}: {where}")
        where = f"{where} (task {task_id}, trial {trial})"
        place = f"{label}: {where}"
        if (task_id, trial) in seen:
            raise TraceError(f"{place}: task {task_id} trial {trial} appears twice (also "
                             f"{seen[(task_id, trial)]})")  # fmt: skip
        seen[(task_id, trial)] = f"simulations[{i}]"
        checks = _action_checks(sim, place)
        if gold_from == "action-checks":
            if checks is None:  # not checked (τ²'s tasks without actions): its task's
                checks = tasks[task_id][1] if task_id in tasks else []
            if task_id in checked and _gold_of(checked[task_id][0]) != _gold_of(checks):
                raise TraceError(
                    f"{place}: checked against other actions than {checked[task_id][1]} of "
                    f"the same task: its gold calls cannot be one task's"
                )
            checked.setdefault(task_id, (checks, where))
        elif task_id not in tasks:
            unmatched.append(f"{where}: its task is not among the file's tasks")
        elif checks is not None and _gold_of(checks) != _gold_of(tasks[task_id][1]):
            unmatched.append(f"{where}: checked against other actions than its task's")
        line = TraceLine(
            sample_id=task_id,
            messages=_messages(sim["messages"], place, repeats),
            trial=trial,
            metadata=_trial_metadata(sim),
            place=place,
        )
        if sim.get("termination_reason") == INFRASTRUCTURE_ERROR:
            # a run τ² counts in none of its metrics: not the agent's doing
            line.status, line.error_type = "error", INFRASTRUCTURE_ERROR
            line.error = "the simulation ended in an infrastructure error, not by the agent"
        lines.append(line)
    if unmatched:
        raise _mismatch(label, unmatched, len(sims))
    dataset = _dataset(tasks, checked, domain, label)
    found = info.get("agent_info")
    agent: dict[str, Any] = found if isinstance(found, dict) else {}
    tools = builtin_tools(domain)
    return SourceTraces(
        lines,
        dataset,
        tools=tools,
        model=agent.get("llm") if isinstance(agent.get("llm"), str) else None,
        benchmark=("tau2", "τ²-bench"),
        no_tools=None if tools is not None else _no_tools(domain),
    )


def builtin_tools(domain: str | None) -> list[dict[str, Any]] | None:
    """The tools of a τ² domain that ship with tcbreplay (None for another domain)."""
    if domain not in DOMAIN_TOOLS:
        return None
    tools: list[dict[str, Any]] = []
    for name in DOMAIN_TOOLS[domain]:
        tools += json.loads((VENDOR / name).read_text(encoding="utf-8"))
    return tools


def _no_tools(domain: str | None) -> str:
    """Why a file's domain gives no tools: its name and the domains whose tools ship."""
    shipped = ", ".join(DOMAIN_TOOLS)
    if domain is None:
        return (f"the file names no τ² domain (info.environment_info.domain_name), and "
                f"tcbreplay ships the tools of {shipped} only")  # fmt: skip
    return f"tcbreplay ships no tools for the τ² domain {domain!r}, only for {shipped}"


def _document(data: bytes, label: str, repeats: _json.Repeats) -> dict[str, Any]:
    """The file's object (``repeats``: where its objects repeat a key, noted)."""
    try:
        doc = _json.loads(data.decode("utf-8-sig"), repeats=repeats)
    except UnicodeDecodeError as exc:
        raise TraceError(f"{label}: not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise TraceError(f"{label}: line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    except _json.LimitError as exc:
        raise TraceError(f"{label}: {exc}", hint=_json.HINT) from None
    if not isinstance(doc, dict) or "simulations" not in doc:
        raise TraceError(f"{label}: expected a τ²-bench results file (info, tasks, simulations)")
    surrogate = lone_surrogate(doc)
    if surrogate:
        raise TraceError(f"{label}: holds a lone surrogate {surrogate}, which is not valid Unicode")
    return doc


def _domain(info: dict[str, Any]) -> str | None:
    env = info.get("environment_info")
    domain = env.get("domain_name") if isinstance(env, dict) else None
    return domain if isinstance(domain, str) else None


def _tasks(doc: dict[str, Any], label: str) -> dict[str, tuple[dict[str, Any], list[Any]]]:
    """Each task by id, with its actions (checked as gold calls later)."""
    tasks = doc.get("tasks", [])
    if not isinstance(tasks, list):
        raise TraceError(f"{label}: tasks must be a list")
    out: dict[str, tuple[dict[str, Any], list[Any]]] = {}
    for k, task in enumerate(tasks):
        place = f"{label}: tasks[{k}]"
        if not isinstance(task, dict):
            raise TraceError(f"{place}: expected a task object")
        task_id = _id(task.get("id"), f"{place}: id")
        if task_id in out:
            raise TraceError(f"{place}: task {task_id} appears twice")
        criteria = task.get("evaluation_criteria") or {}
        if not isinstance(criteria, dict):
            raise TraceError(f"{place}: evaluation_criteria must be an object")
        actions = criteria.get("actions") or []
        if not isinstance(actions, list):
            raise TraceError(f"{place}: evaluation_criteria.actions must be a list")
        out[task_id] = (task, actions)
    return out


def _id(value: Any, place: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TraceError(f"{place} must be a string or an integer")
    return str(value)


def _sim_parts(sim: Any, place: str) -> tuple[str, int]:
    """A simulation's task id and trial, checked with the rest of its shape."""
    if not isinstance(sim, dict):
        raise TraceError(f"{place}: expected a simulation object")
    for key in ("task_id", "messages"):
        if key not in sim:
            raise TraceError(f"{place}: missing {key}")
    task_id = _id(sim["task_id"], f"{place}: task_id")
    trial = sim.get("trial", 0)
    if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial < MAX_TRIALS:
        raise TraceError(f"{place}: trial must be an integer from 0 to {MAX_TRIALS - 1}")
    if not isinstance(sim["messages"], list):
        raise TraceError(f"{place}: messages must be a list")
    reward_info = sim.get("reward_info")
    if reward_info is not None and not isinstance(reward_info, dict):
        raise TraceError(f"{place}: reward_info must be an object")
    reward = (reward_info or {}).get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise TraceError(f"{place}: reward_info.reward must be a number")
    return task_id, trial


def _action_checks(sim: dict[str, Any], place: str) -> list[dict[str, Any]] | None:
    """The actions a simulation was checked against (None: not checked)."""
    checks = (sim.get("reward_info") or {}).get("action_checks")
    if checks is None:
        return None
    if not isinstance(checks, list) or not all(
        isinstance(c, dict) and isinstance(c.get("action"), dict) for c in checks
    ):
        raise TraceError(f"{place}: reward_info.action_checks must be a list of {{action, ...}}")
    return [c["action"] for c in checks]


def _gold_of(actions: list[Any]) -> list[tuple[Any, ...]]:
    """What of each action makes a gold call, to compare two lists of actions."""
    return [
        tuple(json.dumps(a.get(k), sort_keys=True) for k in _ACTION_KEYS) if isinstance(a, dict)
        else (json.dumps(a),)
        for a in actions
    ]  # fmt: skip


_ACTION_KEYS = ("requestor", "name", "arguments", "compare_args")


def _mismatch(label: str, unmatched: list[str], n: int) -> TraceError:
    named = "; ".join(unmatched[:_NAMED])
    more = f" (and {len(unmatched) - _NAMED} more)" if len(unmatched) > _NAMED else ""
    return TraceError(
        f"{label}: {len(unmatched)} of {n} simulations do not match the file's tasks, which "
        f"would be their gold: {named}{more}",
        hint="score each task against the actions its simulations were checked against: "
        "import --gold-from action-checks",
    )


def _trial_metadata(sim: dict[str, Any]) -> dict[str, Any]:
    reward_info = sim.get("reward_info") or {}
    out: dict[str, Any] = {"reward": reward_info.get("reward")}
    out.update({key: sim[key] for key in _TRIAL_META if sim.get(key) is not None})
    if sim.get("id") is not None:
        out["simulation_id"] = sim["id"]
    return out


def _dataset(
    tasks: dict[str, tuple[dict[str, Any], list[Any]]],
    checked: dict[str, tuple[list[dict[str, Any]], str]],
    domain: str | None,
    label: str,
) -> Dataset:
    """The tasks as dataset entries (and, with gold from the action checks, the tasks only
    simulations name); gold from ``checked`` where a task has it, else its actions."""
    entries = []
    for task_id in [*tasks, *(t for t in checked if t not in tasks)]:
        task, actions = tasks.get(task_id, ({}, []))
        place = f"{label}: tasks[{list(tasks).index(task_id)}]" if task_id in tasks else label
        if task_id in checked:
            actions, where = checked[task_id]
            place = f"{label}: {where}: reward_info.action_checks"
        entry: dict[str, Any] = {
            "id": task.get("id", task_id),
            "input": _instructions(task),
            "target": [_gold_call(a, f"{place}: actions[{j}]") for j, a in enumerate(actions)],
        }
        metadata = {key: task[key] for key in _TASK_META if task.get(key) is not None}
        criteria = {
            k: v
            for k, v in (task.get("evaluation_criteria") or {}).items()
            if k != "actions" and v is not None
        }
        if criteria:
            metadata["evaluation_criteria"] = criteria
        if domain is not None:
            metadata["domain"] = domain
        if metadata:
            entry["metadata"] = metadata
        entries.append(entry)
    try:
        return dataset_from_entries(entries, label)
    except DatasetError as exc:
        raise TraceError(str(exc)) from None


def _gold_call(action: Any, place: str) -> dict[str, Any]:
    """An action as a gold call: compare_args as the rule compare, the user's as side user."""
    if not isinstance(action, dict) or not isinstance(action.get("name"), str):
        raise TraceError(f"{place}: expected an action with a name")
    requestor = action.get("requestor", "assistant")
    if requestor not in _SIDES:
        raise TraceError(f"{place}: requestor {requestor!r}: not assistant or user")
    args = action.get("arguments", {})
    if not isinstance(args, dict):
        raise TraceError(f"{place}: arguments must be an object")
    call: dict[str, Any] = {"name": action["name"], "args": args}
    compare = action.get("compare_args")
    if compare is not None:
        if not isinstance(compare, list) or not all(isinstance(k, str) for k in compare):
            raise TraceError(f"{place}: compare_args must be null or a list of argument names")
        call["compare"] = compare
    if _SIDES[requestor] is not None:
        call["side"] = _SIDES[requestor]
    return call


def _instructions(task: dict[str, Any]) -> str:
    """The task's input: what the simulated user was told (τ²'s user scenario)."""
    scenario = task.get("user_scenario")
    instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
    if isinstance(instructions, str):
        return instructions
    if not isinstance(instructions, dict):
        return ""
    parts = [
        f"{title}: {instructions[key]}"
        for key, title in _INSTRUCTIONS
        if isinstance(instructions.get(key), str)
    ]
    return "\n".join(parts)


# the parts of τ²'s structured instructions, in the order the input shows them
_INSTRUCTIONS = (
    ("reason_for_call", "Reason for call"),
    ("known_info", "Known info"),
    ("unknown_info", "Unknown info"),
    ("task_instructions", "Task instructions"),
)


def _messages(raw: list[Any], place: str, repeats: _json.Repeats) -> list[dict[str, Any]]:
    """τ²'s messages as the store keeps them."""
    from tcbreplay._record.messages import serialize_messages

    return serialize_messages(convert(raw, place, repeats), {})


def convert(raw: list[Any], place: str, repeats: _json.Repeats | None = None) -> list[Any]:
    """τ²'s messages as LangChain messages: the assistant's with its calls and token usage,
    the user's with its own calls (``tool_calls`` beside its content, as an AI message holds
    them), tool results answering the call of their ``id``."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    names: dict[str, str] = {}  # call id -> tool name, for the tool messages
    for k, m in enumerate(raw):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise message_problem(place, k, "not a τ² message (an object with a role)")
        role, content = m["role"], m.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise message_problem(place, k, "content must be a string or null")
        try:
            if role in ("assistant", "user"):
                calls = m.get("tool_calls") or []
                if not isinstance(calls, list):
                    raise message_problem(place, k, "tool_calls must be a list")
                calls = [_tool_call(c, place, k, j, repeats) for j, c in enumerate(calls)]
                names.update({c["id"]: c["name"] for c in calls if c["id"] is not None})
                if role == "assistant":
                    out.append(AIMessage(content=content, tool_calls=calls,
                                         usage_metadata=_usage(m.get("usage"))))  # fmt: skip
                elif calls:  # the user's own calls, on its device
                    out.append(HumanMessage(content=content, tool_calls=calls))
                else:
                    out.append(HumanMessage(content=content))
            elif role == "tool":
                call_id = m.get("id")
                if not isinstance(call_id, str):
                    raise message_problem(place, k, "a tool message needs the id of its call")
                out.append(
                    ToolMessage(
                        content=content,
                        tool_call_id=call_id,
                        name=names.get(call_id),
                        status="error" if m.get("error") else "success",
                    )
                )
            elif role == "system":
                out.append(SystemMessage(content=content))
            else:
                raise message_problem(
                    place, k, f"role {role!r}: not assistant, user, tool or system"
                )
        except ValueError as exc:  # pydantic's: a field of the wrong type
            raise message_problem(place, k, "not a τ² message", exc) from exc
    return out


def _tool_call(
    call: Any, place: str, k: int, j: int, repeats: _json.Repeats | None
) -> dict[str, Any]:
    """A flat τ² call ``{id, name, arguments}`` as a LangChain tool call (arguments that
    repeat a key are refused, as the metric spec makes them an error)."""
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise message_problem(place, k, f"tool_calls[{j}] needs a name")
    args = call.get("arguments")
    if args is None:
        args = {}
    elif isinstance(args, str):  # text, as a model wrote it
        args = parse_arguments(args, f"{place}: message {k}: tool_calls[{j}].arguments")
    elif not isinstance(args, dict):
        raise message_problem(place, k, f"tool_calls[{j}].arguments must be an object")
    elif repeats is not None:
        repeated_key_problem(place, k, f"tool_calls[{j}].arguments", args, repeats)
    call_id = call.get("id")
    return {
        "name": call["name"],
        "args": args,
        "id": call_id if isinstance(call_id, str) and call_id else None,
        "type": "tool_call",
    }


def _usage(usage: Any) -> dict[str, int] | None:
    """τ²'s token counts of a model's turn (as litellm gives them) as LangChain's."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not (_count(prompt) and _count(completion)):
        return None
    return {"input_tokens": prompt, "output_tokens": completion,
            "total_tokens": prompt + completion}  # fmt: skip


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
