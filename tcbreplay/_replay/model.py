"""The recorded model: a LangChain chat model that answers each request with the recorded AI
turn whose request has the same fingerprint.

:class:`RecordedChatModel` is an ordinary chat model (``bind_tools`` included): plug it into
any graph or test in place of the model that was recorded. While the replay runner runs a
sample, it answers from that sample and trial only, and keeps what happened in the
sample's :class:`SampleReplay` (turns served, live calls, the divergence, tool outputs
compared). Elsewhere it answers from any sample (one named in the call's metadata as
``tcbreplay_sample_id`` and ``tcbreplay_trial`` first).

A served message is the stored one, its id too, but where that id is an earlier message's in
the conversation (some traces give every answer one id), which LangGraph would take for that
message and replace: then it is ``<id>-turn-<n>``.

A request that no turn answers raises :class:`~tcbreplay.errors.DivergenceError`, which says
where it first differs from the nearest recorded request; with a ``live`` model (``--then``)
the sample goes on with that model instead, from that request on. ``fork_at`` sends every
request from that turn on to the live model even when the recording answers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

from tcbreplay._record.agent import _check_reply
from tcbreplay._record.formats import asked_format
from tcbreplay._record.models.sim import SAMPLE_ID_KEY, TRIAL_KEY
from tcbreplay._replay.choice import conflict
from tcbreplay._replay.fingerprint import (
    Conversation,
    assistant_turns,
    canonical_json,
    canonical_messages,
    canonical_params,
    canonical_tools,
    normalized,
)
from tcbreplay._replay.nearest import divergence_of, ended_in_error
from tcbreplay._replay.recording import Key, RecordedRun
from tcbreplay._replay.settings import call_settings, made_at
from tcbreplay._replay.state import SampleReplay, current_replay
from tcbreplay.errors import DivergenceError, LiveCallRefused, RecordedFailure


class RecordedChatModel(BaseChatModel):
    """A chat model that answers with a recorded run's AI turns (see the module).

    ``RecordedChatModel.from_run("run-id")`` reads a run of the store; ``live``: a model
    that goes on where the recording has no answer; ``fork_at``: the turn from which every
    request goes to ``live``; ``offline``: a request for ``live`` fails at once; ``system``:
    the system prompt the replaying agent was given (None: the recording's). A request that
    starts with no system message has the system "": an agent that drops the prompt it was
    given diverges from a recording that was sent one. Only a run recorded by an agent of
    one's own before runs kept what their requests began with (its manifest's ``agent``
    lacks ``system_kept``) is taken to have been sent its prompt, and ``system`` is then the
    system of requests that start with none.
    """

    # its answers are the recording's turns, as they were stored: the recording's checks of
    # a reply (see tcbreplay._record.agent's _check_reply) do not judge them again; a live
    # model's it judges itself (see _live_answer)
    serves_recorded_turns: ClassVar[bool] = True

    recording: RecordedRun = Field(repr=False, exclude=True)
    live: Any = Field(default=None, repr=False, exclude=True)
    fork_at: int | None = None
    offline: bool = False
    system: str | None = Field(default=None, repr=False)
    tool_schemas: dict[str, Any] = Field(default_factory=dict, repr=False)
    call_params: dict[str, Any] = Field(default_factory=dict)
    bound_tools: list[Any] = Field(default_factory=list, repr=False, exclude=True)
    bound_specs: list[Any] = Field(default_factory=list, repr=False, exclude=True)
    bound_kwargs: dict[str, Any] = Field(default_factory=dict, repr=False, exclude=True)
    bound: dict[Any, Any] = Field(default_factory=dict, repr=False, exclude=True)
    # (tool_schemas, their canonical JSON): written once per set of tools
    _tools_text: tuple[Any, str] | None = PrivateAttr(default=None)

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

    def _resolve_model_profile(self) -> Any:
        # the recorded model's profile, which create_agent reads to choose how it asks for
        # a response_format (ProviderStrategy where it says structured_output); None for a
        # run recorded before tcbreplay kept it
        profile = self.recording.model.get("profile")
        return dict(profile) if isinstance(profile, dict) else None

    @property
    def model_name(self) -> str | None:
        """The recorded model's name, as its chat model gave it (create_agent reads it with
        the profile: Gemini's before 3 take no answer format beside tools); None for a run
        recorded before tcbreplay kept the profile, which keeps the choice it made then."""
        model = self.recording.model
        name = model.get("name")
        return name if "profile" in model and isinstance(name, str) else None

    @property
    def _llm_type(self) -> str:
        return "tcbreplay-recorded"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"run_id": self.recording.run_id, "fork_at": self.fork_at}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordedChatModel:
        """A copy of the model whose requests carry these tools (and the sampling settings
        among ``kwargs``; a ``response_format`` as the recorded run's model class binds it,
        see :func:`tcbreplay._replay.structured.bound_format`). Copies are kept: agents bind
        their tools before every call."""
        from langchain_core.utils.function_calling import convert_to_openai_function

        # (and the class: see tcbreplay._record.policed_model, whose copies keep this cache)
        key = (type(self), tuple(id(t) for t in tools), repr(sorted(kwargs.items())))
        copy = self.bound.get(key)
        if copy is None:
            if "response_format" in kwargs:  # (create_agent's ProviderStrategy binds one)
                from tcbreplay._replay.structured import bound_format

                kwargs = bound_format(self.recording.model, kwargs)
            schemas = [convert_to_openai_function(t) for t in tools]
            copy = self.bound[key] = self.model_copy(
                update={
                    "tool_schemas": canonical_tools(schemas),
                    "call_params": canonical_params(kwargs),
                    "bound_tools": list(tools),
                    "bound_specs": schemas,
                    "bound_kwargs": dict(kwargs),
                    "bound": {},
                }
            )
        return copy

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Any:
        """The model asked for answers of ``schema`` as the recorded run's model class asks
        (its answer format: ``method="json_schema"``, or its default), answered with the
        recorded structured answer and parsed by that class's parser; as a tool where that
        class binds none (``function_calling``, sim's runs: LangChain's way)."""
        from tcbreplay._replay.structured import provider_format

        found = provider_format(self.recording.model, schema, kwargs)
        if found is None:
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        bound, parser = found
        llm = self.bind(**bound)
        if not include_raw:
            return llm | parser
        from operator import itemgetter

        from langchain_core.runnables import RunnableMap, RunnablePassthrough

        # (as LangChain's models give it: the answer, and what was parsed or why not)
        parsed = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
        ).with_fallbacks(
            [RunnablePassthrough.assign(parsed=lambda _: None)], exception_key="parsing_error"
        )
        return RunnableMap(raw=llm) | parsed

    def _get_invocation_params(self, stop: list[str] | None = None, **kwargs: Any) -> dict:
        # the tools a call is sent, among its invocation parameters as a provider's model
        # binds them (an agent of one's own's calls are watched for them)
        params = super()._get_invocation_params(stop, **kwargs)
        return {**params, "tools": self.bound_specs} if self.bound_specs else params

    def _request(
        self, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any],
        conversation: Conversation,
    ) -> tuple[Any, str]:  # fmt: skip
        """The canonical request and its fingerprint."""
        params: dict[str, Any] = {}
        if self.recording.params_known:
            given = {**kwargs, **({"stop": stop} if stop else {})}
            params = {**self.recording.params, **self.call_params, **canonical_params(given)}
            # a schema the call asks for in a provider's own keywords (Gemini's), compared
            # where the recording says which each request asked for; OpenAI's as it is sent
            # (a pydantic model's as its JSON schema)
            asked = asked_format({**self.bound_kwargs, **given}, self.recording.provider)
            if asked is not None and (self.recording.formats_known or "response_format" in params):
                params["response_format"] = asked
            if "response_format" in params:  # (as the recording's model sent one)
                params["response_format"] = self.recording.format_as_sent(params["response_format"])
        # the fields of output_config (but its format) and reasoning the call gives: the
        # recording's answers were made at them only where its model settings have the same;
        # any other diverges at params.output_config (or params.reasoning)
        for place, (name, value) in call_settings({**self.bound_kwargs, **kwargs}).items():
            if not made_at(self.recording, place, name, value):
                group = place.partition(".")[0]
                params[group] = {**params.get(group, {}), name: normalized(value)}
        held = self._tools_text
        if held is None or held[0] is not self.tool_schemas:
            held = self._tools_text = (self.tool_schemas, canonical_json(self.tool_schemas))
        # a request that begins with no system message was sent none; but a recording that
        # does not say what its agent sent is taken to have been sent its prompt, and so is
        # a request of an agent given one
        system = ""
        if not self.recording.system_known:
            system = self.recording.system if self.system is None else self.system
        return conversation.request(messages, self.tool_schemas, held[1], params, system)

    def _answer(
        self, messages: list[BaseMessage], stop: Any, run_manager: Any, kwargs: dict[str, Any]
    ) -> tuple[AIMessage | None, SampleReplay | None]:
        """The recorded answer to a request, or None where the live model answers it."""
        state = current_replay.get(None)
        conversation = state.conversation if state is not None else Conversation()
        request, digest = self._request(messages, stop, kwargs, conversation)
        turn = assistant_turns(request["messages"])
        if state is not None:
            state.check_tools(messages, set(self.tool_schemas))
            if state.continued:
                return None, state
        if self.fork_at is not None and turn >= self.fork_at and self.live is not None:
            if state is not None and state.forked_at is None:
                state.forked_at = turn
            return None, state
        key = state.key if state is not None else _metadata_key(run_manager)
        # the request's first message: only samples that start with it can answer it
        items = request["messages"]
        first = canonical_json(items[0]) if items else ""
        hit = self.recording.lookup(digest, key, first, turn)
        if hit is None and state is None and key is not None:
            hit = self.recording.lookup(digest, first=first, turn=turn)
        refused = None  # the recorded answer, where the request's tool_choice forbids it
        if hit is not None:
            found, recorded = hit
            (message,) = messages_from_dict(
                [self.recording.samples[found].message(recorded.position)]
            )
            made = [str(c.get("name")) for c in getattr(message, "tool_calls", None) or []]
            refused = conflict(turn, {**self.bound_kwargs, **kwargs}, made)
            if refused is None:
                if message.id is not None and any(m.id == message.id for m in messages):
                    # LangGraph would take it for the earlier message of that id and replace it
                    message.id = f"{message.id}-turn-{turn}"
                if state is not None:
                    state.serve(turn, recorded.position, message)  # type: ignore[arg-type]
                return message, state  # type: ignore[return-value]
        # the very request the recording failed at (every turn before it answered, the same
        # system, tools and tool outputs): the replay ends there as the recording did, or,
        # with a live model (--then), goes on live from there: no change either way, no
        # divergence. Any other request diverges, however its recording ended.
        if (
            refused is None
            and state is not None
            and ended_in_error(self.recording, request, state.key) is not None
        ):
            if self.live is not None:
                state.continued = True
                return None, state
            state.recorded_error = True
            raise RecordedFailure(*self.recording.samples[state.key].error)
        _, _, call_ids = canonical_messages(messages, self.recording.system)
        component = state.component(call_ids) if state is not None else None
        divergence = refused or divergence_of(self.recording, request, key, component)
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
        if message is None:  # (the call's own settings with it: tool_choice, temperature)
            live = self._live_model(state)
            message = _live_answer(
                live.invoke(messages, _config(run_manager), stop=stop, **kwargs), self.live
            )
            if state is not None:
                state.live_answered += 1
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        message, state = self._answer(messages, stop, run_manager, kwargs)
        if message is None:
            live = self._live_model(state)
            answer = await live.ainvoke(messages, _config(run_manager), stop=stop, **kwargs)
            message = _live_answer(answer, self.live)
            if state is not None:
                state.live_answered += 1
        return ChatResult(generations=[ChatGeneration(message=message)])


def _live_answer(message: Any, live: Any) -> Any:
    """The live model's reply, refused as a recording refuses it (see
    :func:`tcbreplay._record.agent._check_reply`): cut off mid-stream, stopped at its token
    limit, or empty. A recording's turns are served as they were; a live model's are new."""
    _check_reply(SimpleNamespace(result=[message]), live)
    return message


def _config(run_manager: Any) -> dict[str, Any]:
    """The live model's call config: the metadata of this call (the sample it is for)."""
    return {"metadata": dict(getattr(run_manager, "metadata", None) or {})}


def _metadata_key(run_manager: Any) -> Key | None:
    metadata = getattr(run_manager, "metadata", None) or {}
    sample = metadata.get(SAMPLE_ID_KEY)
    if sample is None:
        return None
    return str(sample), int(metadata.get(TRIAL_KEY) or 0)
