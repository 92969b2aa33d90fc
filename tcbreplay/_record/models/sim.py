"""The ``sim`` model: a seeded, offline stand-in for an LLM agent.

For each sample it plays the gold trajectory through the real tools, with
mistakes drawn from a random generator seeded by ``(seed, sample id, trial)`` only
(trial 0 by ``(seed, sample id)``, as before trials): skip a call, add a wrong call,
swap two calls, change a value, invent an argument. It may group consecutive calls
into one AI message (parallel calls). It answers as the tools are bound
(``tool_choice``, ``parallel_tool_calls``: :func:`_as_bound`). Every AI message it
writes names it as simulated in ``response_metadata``.

Options (``sim:seed=7,error_rate=0.2``): ``seed`` (int, 0), ``error_rate``
(probability of a mistake per gold call, 0.15), ``mistakes`` (kinds joined by
``+``, all by default), ``parallel`` (probability that a call joins the
previous AI message, 0.2), ``latency`` (seconds per model turn, 0),
``fault_rate`` (probability that a model turn fails with a transient error, 0).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

from tcbreplay._record.tool_choice import asked, parallel_allowed
from tcbreplay.errors import ModelError

# The key of the run config's metadata under which the runner names each sample: the sim
# plays that sample's gold plan.
SAMPLE_ID_KEY = "tcbreplay_sample_id"
# ... and its trial: each trial draws its own mistakes
TRIAL_KEY = "tcbreplay_trial"
MISTAKES = ("skip", "extra", "swap", "wrong_value", "invented_arg")
MODEL_NAME = "tcbreplay-sim (simulated)"
_DEFAULTS: dict[str, Any] = {
    "seed": 0,
    "error_rate": 0.15,
    "mistakes": "+".join(MISTAKES),
    "parallel": 0.2,
    "latency": 0.0,
    "fault_rate": 0.0,
}
_INVENTED_KEYS = ("unit", "currency", "precision", "note", "round_to")
# how a call binds the tools (bind_tools' keywords, or a call's own): the answers follow them
BINDING = ("tool_choice", "parallel_tool_calls")


class SimTransientError(RuntimeError):
    """A simulated transient provider failure (like a 503); retrying may succeed."""

    transient = True


def parse_sim_options(text: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Parse ``seed=7,error_rate=0.2`` into settings with defaults filled in.

    ``options`` (``--model-option`` pairs) are checked the same way; a key given in both is
    refused.
    """
    out = dict(_DEFAULTS)
    pairs = [(p, "sim option") for p in filter(None, (p.strip() for p in text.split(",")))]
    given: set[str] = set()
    for part, _ in pairs:
        key = part.partition("=")[0].strip()
        if key in given:  # (the last one won, in silence, and named the run)
            raise ModelError(f"sim option {part!r}: {key} is given twice in sim:{text}")
        given.add(key)
    for key, value in (options or {}).items():
        if key in given:  # the model id names the run: it must not say another value
            raise ModelError(f"--model-option {key}={value}: {key} is given in sim:{text} too")
        pairs.append((f"{key}={value}", "--model-option"))
    for part, where in pairs:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _DEFAULTS:
            raise ModelError(
                f"{where} {part!r}: expected one of {', '.join(_DEFAULTS)} as key=value"
            )
        out[key] = _coerce(key, value.strip(), where)
    return out


def _coerce(key: str, value: str, where: str = "sim option") -> Any:
    if key == "mistakes":
        kinds = [k for k in value.split("+") if k]
        bad = [k for k in kinds if k not in MISTAKES]
        if bad:
            raise ModelError(
                f"{where} {key}={value!r}: unknown mistake {bad[0]!r} "
                f"(kinds: {', '.join(MISTAKES)})"
            )
        return "+".join(kinds)
    try:
        if key == "seed":
            return int(value)
        number = float(value)
    except ValueError as exc:
        kind = "an integer" if key == "seed" else "a number"
        raise ModelError(f"{where} {key}={value!r}: must be {kind}") from exc
    if key in ("error_rate", "parallel", "fault_rate") and not 0.0 <= number <= 1.0:
        raise ModelError(f"{where} {key}={value}: must be between 0 and 1")
    # an infinite latency would hang every model turn until the call timeout
    if not math.isfinite(number) or number < 0:
        raise ModelError(f"{where} {key}={value}: must be a finite number, not negative")
    return number


def plan_turns(
    sample_id: str,
    gold: Sequence[tuple[str, Mapping[str, Any]]],
    tools: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
    trial: int = 0,
) -> list[list[dict[str, Any]]]:
    """Return the AI turns the sim plays for a trial of a sample: lists of ``{"name",
    "args"}`` calls."""
    rng = random.Random(_seed(settings["seed"], sample_id, _trial_purpose("plan", trial)))
    kinds = [k for k in str(settings["mistakes"]).split("+") if k]
    rate = float(settings["error_rate"])
    calls: list[dict[str, Any]] = []
    i = 0
    while i < len(gold):
        name, args = gold[i]
        call: dict[str, Any] = {"name": name, "args": dict(args)}
        if not (kinds and rng.random() < rate):
            calls.append(call)
            i += 1
            continue
        kind = rng.choice(kinds)
        if kind == "swap" and i + 1 < len(gold):
            nxt = gold[i + 1]
            calls += [{"name": nxt[0], "args": dict(nxt[1])}, call]
            i += 2
            continue
        if kind == "extra":
            calls.append(_wrong_call(rng, name, tools))
            calls.append(call)
        elif kind == "wrong_value" and call["args"]:
            key = rng.choice(sorted(call["args"]))
            call["args"][key] = _perturb(rng, call["args"][key])
            calls.append(call)
        elif kind == "invented_arg" or (kind != "skip" and "invented_arg" in kinds):
            # also a swap of the last call, or a wrong value for a call without arguments,
            # when invented arguments are among the mistakes
            key = next(k for k in _INVENTED_KEYS if k not in call["args"])
            call["args"][key] = rng.choice(["USD", 2, True, "each"])
            calls.append(call)
        elif kind != "skip":  # a swap or wrong value that cannot happen here: no mistake
            calls.append(call)
        # "skip": the call is left out
        i += 1
    if not gold and kinds and "extra" in kinds and rng.random() < rate:
        calls.append(_wrong_call(rng, None, tools))
    turns: list[list[dict[str, Any]]] = []
    parallel = float(settings["parallel"])
    for call in calls:
        if turns and len(turns[-1]) < 3 and rng.random() < parallel:
            turns[-1].append(call)
        else:
            turns.append([call])
    return turns


def _wrong_call(rng: random.Random, avoid: str | None, tools: Sequence[Mapping[str, Any]]):
    choices = [t for t in tools if t["name"] != avoid] or list(tools)
    if not choices:
        return {"name": "lookup", "args": {}}
    tool = rng.choice(choices)
    props = tool.get("parameters", {}).get("properties", {})
    args: dict[str, Any] = {}
    for key, schema in props.items():
        kind = schema.get("type")
        if kind in ("number", "integer"):
            args[key] = rng.randint(1, 9)
        elif kind == "boolean":
            args[key] = rng.random() < 0.5
        else:
            args[key] = f"value-{rng.randint(1, 9)}"
    return {"name": tool["name"], "args": args}


def _perturb(rng: random.Random, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, -1, 10])
    if isinstance(value, float):
        return round(value * rng.choice([2.0, 0.5, 10.0]) + 1.0, 6)
    if isinstance(value, str):
        return value + "s"
    return "wrong"


def _trial_purpose(purpose: str, trial: int) -> str:
    """A draw's purpose in a trial: trial 0 draws as a sim without trials did."""
    return purpose if not trial else f"{purpose}:trial={trial}"


def _seed(seed: Any, sample_id: str, purpose: str) -> int:
    digest = hashlib.sha256(f"{seed}\x00{sample_id}\x00{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class SimChatModel(BaseChatModel):
    """A chat model that replays gold plans with seeded mistakes; see the module docstring."""

    settings: dict[str, Any]
    # Kept out of repr: LangChain serializes the model's repr on every call for its callbacks.
    samples: dict[str, list[tuple[str, dict[str, Any]]]] = Field(repr=False)
    tool_schemas: list[dict[str, Any]] = Field(default_factory=list, repr=False)
    # how the tools were bound (bind_tools' tool_choice and parallel_tool_calls): answered so
    binding: dict[str, Any] = Field(default_factory=dict, repr=False)
    _calls: _CallCounts = PrivateAttr(default_factory=lambda: _CallCounts())
    _bound: dict[tuple[Any, ...], SimChatModel] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], samples: Mapping[str, Any]) -> SimChatModel:
        """Build from parsed settings and ``{sample_id: [(name, args), ...]}`` gold plans."""
        return cls(settings=dict(settings), samples={k: list(v) for k, v in samples.items()})

    @property
    def _llm_type(self) -> str:
        return "tcbreplay-sim"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"settings": self.settings}

    def _get_invocation_params(self, stop: list[str] | None = None, **kwargs: Any) -> dict:
        # the tools a call is sent, among its invocation parameters as a provider's model
        # binds them (an agent of one's own's calls are watched for them)
        params = super()._get_invocation_params(stop, **kwargs)
        return {**params, "tools": self.tool_schemas} if self.tool_schemas else params

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> SimChatModel:
        """Keep the tools' schemas, from which wrong calls are drawn, and how they are bound
        (``tool_choice``, ``parallel_tool_calls``), which the answers follow.

        The agent binds its tools before every model call; the bound copy is reused for
        the same tools and binding, so its schemas and LangChain's serialized form are
        computed once.
        """
        from langchain_core.utils.function_calling import convert_to_openai_function

        binding = {k: kwargs[k] for k in BINDING if kwargs.get(k) is not None}
        # (and for the class: a copy of another, under a recording's call policy, keeps
        # this cache but must bind copies of its own class)
        key = (
            type(self),
            *(id(t) for t in tools),
            json.dumps(binding, sort_keys=True, default=str),
        )
        bound = self._bound.get(key)
        if bound is None:
            schemas = [convert_to_openai_function(t) for t in tools]
            update = {"tool_schemas": schemas, "binding": binding}
            bound = self._bound[key] = self.model_copy(update=update)
        return bound

    def _turn(
        self, messages: list[BaseMessage], run_manager: Any, asked: Mapping[str, Any]
    ) -> AIMessage:
        metadata = getattr(run_manager, "metadata", None) or {}
        sample_id = metadata.get(SAMPLE_ID_KEY)
        if sample_id is None or sample_id not in self.samples:
            raise ModelError(f"sim: no gold plan for sample {sample_id!r}")
        trial = int(metadata.get(TRIAL_KEY) or 0)
        turn = sum(1 for m in messages if isinstance(m, AIMessage))
        fault_rate = float(self.settings.get("fault_rate", 0.0))
        if fault_rate:
            # The k-th call for this (sample, trial, turn) faults or not by (seed, sample,
            # trial, turn, k) alone, so faults are transient yet reproducible whatever the
            # scheduling.
            k = self._calls.next((sample_id, trial, turn))
            purpose = _trial_purpose(f"fault:{turn}:{k}", trial)
            draw = random.Random(_seed(self.settings["seed"], sample_id, purpose))
            if draw.random() < fault_rate:
                raise SimTransientError("sim: injected transient fault (503 Service Unavailable)")
        plan = plan_turns(
            sample_id, self.samples[sample_id], self.tool_schemas, self.settings, trial
        )
        binding = {**self.binding, **{k: asked[k] for k in BINDING if asked.get(k) is not None}}
        if not parallel_allowed(binding):  # one call a turn
            plan = [[call] for calls in plan for call in calls]
        planned = plan[turn] if turn < len(plan) else []
        draw = random.Random(_seed(self.settings["seed"], sample_id, f"bound:{turn}"))
        answer = _as_bound(planned, plan, binding, self.tool_schemas, draw)
        tag = sample_id if not trial else f"{sample_id}-t{trial}"
        metadata_out = {"model_name": MODEL_NAME, "simulated": True, "finish_reason": "STOP"}
        usage_in = sum(len(str(m.content).split()) for m in messages) + 1
        if answer:
            calls = [
                {
                    "name": c["name"],
                    "args": c["args"],
                    "id": f"sim-{tag}-{turn}-{j}",
                    "type": "tool_call",
                }
                for j, c in enumerate(answer)
            ]
            usage_out = sum(len(json.dumps(c["args"])) // 4 + 2 for c in calls)
            message = AIMessage(content="", tool_calls=calls, response_metadata=metadata_out)
        else:
            text = _final_answer(messages)
            usage_out = len(text.split())
            message = AIMessage(content=text, response_metadata=metadata_out)
        message.id = f"sim-{tag}-{turn}"
        message.usage_metadata = {
            "input_tokens": usage_in,
            "output_tokens": usage_out,
            "total_tokens": usage_in + usage_out,
        }
        return message

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        latency = float(self.settings.get("latency", 0.0))
        if latency:
            time.sleep(latency)
        message = self._turn(messages, run_manager, kwargs)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        latency = float(self.settings.get("latency", 0.0))
        if latency:
            await asyncio.sleep(latency)
        message = self._turn(messages, run_manager, kwargs)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _as_bound(
    planned: list[dict[str, Any]], plan: list[list[dict[str, Any]]], binding: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]], draw: random.Random,
) -> list[dict[str, Any]]:  # fmt: skip
    """A turn's planned calls as its binding's ``tool_choice`` lets them be: none where it is
    ``none``; those of the tool it names (else that tool's first planned call, else the tool
    without arguments); where a call is required and none is planned, a wrong call drawn from
    the tools (what a model forced to call something does)."""
    wanted = asked(binding.get("tool_choice"))
    if wanted is None:
        return planned
    kind, name = wanted
    if kind == "none":
        return []
    if kind == "named":
        if name not in {tool["name"] for tool in tools}:  # (a provider answers 400)
            raise ModelError(f"sim: tool_choice names {name!r}, which is not among the tools")
        mine = [call for call in planned if call["name"] == name]
        later = (call for calls in plan for call in calls if call["name"] == name)
        return mine or [next(later, {"name": name, "args": {}})]
    return planned or [_wrong_call(draw, None, tools)]


class _CallCounts:
    """How many times each (sample, trial, turn) has been asked for in this process."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int, int], int] = {}
        self._lock = threading.Lock()

    def next(self, key: tuple[str, int, int]) -> int:
        with self._lock:
            k = self._counts.get(key, 0)
            self._counts[key] = k + 1
            return k


def _final_answer(messages: list[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            try:
                result = json.loads(str(message.content)).get("result")
            except (json.JSONDecodeError, AttributeError):
                result = None
            if isinstance(result, (int, float)) and not isinstance(result, bool):
                return f"The answer is {result:.2f}."
            return "Here is what I found."
    return "Hello! I can look up the catalog and do arithmetic for you."
