"""The recorded model: a LangChain chat model that answers each request with the recorded AI
turn whose request has the same fingerprint.

:class:`RecordedChatModel` is an ordinary chat model (``bind_tools`` included): plug it into
any graph or test in place of the model that was recorded. While the replay runner runs a
sample, it answers from that sample and trial only, and keeps what happened in the
sample's :class:`SampleReplay` (turns served, live calls, the divergence, tool outputs
compared). Elsewhere it answers from any sample (one named in the call's metadata as
``tcbreplay_sample_id`` and ``tcbreplay_trial`` first).

A request that no turn answers raises :class:`~tcbreplay.errors.DivergenceError`, which says
where it first differs from the nearest recorded request; with a ``live`` model (``--then``)
the sample goes on with that model instead, from that request on. ``fork_at`` sends every
request from that turn on to the live model even when the recording answers it.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from tcbreplay._record.models.sim import SAMPLE_ID_KEY, TRIAL_KEY
from tcbreplay._replay.divergence import Divergence, message_index
from tcbreplay._replay.fingerprint import (
    assistant_turns,
    canonical_messages,
    canonical_params,
    canonical_request,
    canonical_tools,
    fingerprint,
)
from tcbreplay._replay.recording import Key, RecordedRun, ToolOutput, ToolPool
from tcbreplay._replay.tools import CHANGED, compare_output
from tcbreplay.errors import DivergenceError, LiveCallRefused


@dataclass
class SampleReplay:
    """What happened while one sample (and trial) was replayed."""

    key: Key
    recording: RecordedRun
    served: list[tuple[int, int]] = field(default_factory=list)  # (turn, parent position)
    live_calls: int = 0
    forked_at: int | None = None
    divergence: Divergence | None = None
    continued: bool = False  # went on with the live model after diverging
    tools: Counter[str] = field(default_factory=Counter)  # outcome -> live outputs compared
    tools_served: int = 0  # outputs served from the recording
    served_calls: set[str] = field(default_factory=set)  # call ids of the turns served
    outcomes: dict[str, str] = field(default_factory=dict)  # call id -> outcome
    _outputs: dict[str, ToolOutput] | None = None
    _pool: ToolPool | None = None

    def serve(self, turn: int, position: int, message: AIMessage) -> None:
        self.served.append((turn, position))
        self.served_calls.update(str(c["id"]) for c in message.tool_calls if c.get("id"))

    def check_tools(self, messages: Sequence[BaseMessage], tool_names: set[str]) -> None:
        """Compare each live tool output in a request, not compared yet, that answers a
        call of a served turn with its recorded output."""
        if self._outputs is None:
            self._outputs = self.recording.tool_outputs(self.key)[0]
        for message in messages:
            call_id = str(getattr(message, "tool_call_id", None) or "")
            if getattr(message, "type", None) != "tool" or not call_id:
                continue
            if call_id in self.outcomes or call_id not in self.served_calls:
                continue
            recorded = self._outputs.get(call_id)
            if recorded is None:
                continue
            outcome = compare_output(
                recorded, message.content, getattr(message, "status", None),
                recorded.name in tool_names,
            )  # fmt: skip
            self.outcomes[call_id] = outcome
            self.tools[outcome] += 1

    def take_tool_output(self, name: str, arguments: Any) -> ToolOutput | None:
        if self._pool is None:
            by_id, _ = self.recording.tool_outputs(self.key)
            self._pool = ToolPool(list(by_id.values()))
        return self._pool.take(name, arguments)

    def tool_served(self, call_id: str) -> None:
        self.tools_served += 1
        self.outcomes[call_id] = "served"

    def component(self, call_ids: list[str | None]) -> Any:
        """What names the component of a difference at a path: ``tool_output`` for a tool
        output that changed when run live (``call_ids``: the request's, per message)."""

        def name(path: str) -> str | None:
            i = message_index(path)
            if i is None or i >= len(call_ids) or call_ids[i] is None:
                return None
            return "tool_output" if self.outcomes.get(call_ids[i] or "") in CHANGED else None

        return name

    def to_dict(self) -> dict[str, Any]:
        """The sample's replay as its row's metadata keeps it (``replay``)."""
        return {
            "served": [list(pair) for pair in self.served],
            "live_calls": self.live_calls,
            "forked_at": self.forked_at,
            "diverged_at": None if self.divergence is None else self.divergence.turn,
            "continued": self.continued,
            "tool_outputs": {k: self.tools[k] for k in sorted(self.tools)},
            "tool_outputs_served": self.tools_served,
        }


current_replay: contextvars.ContextVar[SampleReplay] = contextvars.ContextVar("tcbreplay_replay")


class RecordedChatModel(BaseChatModel):
    """A chat model that answers with a recorded run's AI turns (see the module).

    ``RecordedChatModel.from_run("run-id")`` reads a run of the store; ``live``: a model
    that goes on where the recording has no answer; ``fork_at``: the turn from which every
    request goes to ``live``; ``offline``: a request for ``live`` fails at once.
    """

    recording: RecordedRun = Field(repr=False, exclude=True)
    live: Any = Field(default=None, repr=False, exclude=True)
    fork_at: int | None = None
    offline: bool = False
    tool_specs: dict[str, Any] = Field(default_factory=dict, repr=False)
    call_params: dict[str, Any] = Field(default_factory=dict)
    bound_tools: list[Any] = Field(default_factory=list, repr=False, exclude=True)
    bound_kwargs: dict[str, Any] = Field(default_factory=dict, repr=False, exclude=True)
    bound: dict[Any, Any] = Field(default_factory=dict, repr=False, exclude=True)

    @classmethod
    def from_run(
        cls, run_id: str, store: Any = "traces", *, live: Any = None, fork_at: int | None = None,
        offline: bool = False,
    ) -> RecordedChatModel:  # fmt: skip
        """The recorded model of run ``run_id`` in ``store`` (a path or a Store)."""
        from tcbreplay._store.runs import Store

        store_ = store if isinstance(store, Store) else Store(store)
        recording = RecordedRun.load(store_.open_run(run_id))
        return cls(recording=recording, live=live, fork_at=fork_at, offline=offline)

    @property
    def _llm_type(self) -> str:
        return "tcbreplay-recorded"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"run_id": self.recording.run_id, "fork_at": self.fork_at}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordedChatModel:
        """A copy of the model whose requests carry these tools (and the sampling settings
        among ``kwargs``). Copies are kept: agents bind their tools before every call."""
        from langchain_core.utils.function_calling import convert_to_openai_function

        key = (tuple(id(t) for t in tools), repr(sorted(kwargs.items())))
        copy = self.bound.get(key)
        if copy is None:
            specs = [convert_to_openai_function(t) for t in tools]
            copy = self.bound[key] = self.model_copy(
                update={
                    "tool_specs": canonical_tools(specs),
                    "call_params": canonical_params(kwargs),
                    "bound_tools": list(tools),
                    "bound_kwargs": dict(kwargs),
                    "bound": {},
                }
            )
        return copy

    def _request(self, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]) -> Any:
        params: dict[str, Any] = {}
        if self.recording.params_known:
            given = {**kwargs, **({"stop": stop} if stop else {})}
            params = {**self.recording.params, **self.call_params, **canonical_params(given)}
        return canonical_request(messages, self.tool_specs, params, self.recording.system)

    def _answer(
        self, messages: list[BaseMessage], stop: Any, run_manager: Any, kwargs: dict[str, Any]
    ) -> tuple[AIMessage | None, SampleReplay | None]:
        """The recorded answer to a request, or None where the live model answers it."""
        state = current_replay.get(None)
        request = self._request(messages, stop, kwargs)
        turn = assistant_turns(request["messages"])
        if state is not None:
            state.check_tools(messages, set(self.tool_specs))
            if state.continued:
                return None, state
        if self.fork_at is not None and turn >= self.fork_at and self.live is not None:
            if state is not None and state.forked_at is None:
                state.forked_at = turn
            return None, state
        key = state.key if state is not None else _metadata_key(run_manager)
        hit = self.recording.lookup(fingerprint(request), key)
        if hit is None and state is None and key is not None:
            hit = self.recording.lookup(fingerprint(request))
        if hit is not None:
            found, recorded = hit
            (message,) = messages_from_dict(
                [self.recording.samples[found].message(recorded.position)]
            )
            if state is not None:
                state.serve(turn, recorded.position, message)  # type: ignore[arg-type]
            return message, state  # type: ignore[return-value]
        _, _, call_ids = canonical_messages(messages, self.recording.system)
        component = state.component(call_ids) if state is not None else None
        divergence = self.recording.divergence(request, key, component)
        if state is not None:
            state.divergence = divergence
            if self.live is not None:
                state.continued = True
                return None, state
        raise DivergenceError(divergence, hint="replay with --then MODEL to go on live from here")

    def _live_model(self, state: SampleReplay | None) -> Any:
        if self.offline:
            raise LiveCallRefused(
                "--offline: this request goes to the live model, and no call may leave the "
                "recording"
            )
        if state is not None:
            state.live_calls += 1
        if not self.bound_tools:
            return self.live
        key = "live"
        if key not in self.bound:
            self.bound[key] = self.live.bind_tools(self.bound_tools, **self.bound_kwargs)
        return self.bound[key]

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        message, state = self._answer(messages, stop, run_manager, kwargs)
        if message is None:
            config = {"callbacks": run_manager.get_child() if run_manager else None}
            message = self._live_model(state).invoke(messages, config, stop=stop)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        message, state = self._answer(messages, stop, run_manager, kwargs)
        if message is None:
            config = {"callbacks": run_manager.get_child() if run_manager else None}
            message = await self._live_model(state).ainvoke(messages, config, stop=stop)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _metadata_key(run_manager: Any) -> Key | None:
    metadata = getattr(run_manager, "metadata", None) or {}
    sample = metadata.get(SAMPLE_ID_KEY)
    if sample is None:
        return None
    return str(sample), int(metadata.get(TRIAL_KEY) or 0)
