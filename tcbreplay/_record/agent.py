"""The agent a run records: LangChain's ``create_agent`` with tcbreplay's middleware.

The middleware times every model and tool call, retries transient model-call
failures (so a rate limit on turn 3 does not redo turns 1 and 2), and applies the
run-wide rate limit. Per-sample state lives in a context variable set by each
sample's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tcbreplay._clock import SYSTEM_CLOCK, Clock
from tcbreplay._record.retry import (
    RateLimiter,
    backoff_delay,
    error_reply,
    is_transient,
    too_long_a_wait,
    unreadable_reply,
)


@dataclass
class SampleState:
    """What the middleware learns while one sample runs."""

    timings: dict[str, float] = field(default_factory=dict)
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    answered: int = 0  # model calls answered
    model_error: BaseException | None = None  # the model call's failure that ended the sample
    # the provider asked to wait longer than retries wait (seconds): the run stops
    asked_wait: float | None = None
    # an agent of one's own (``--agent``): the run's prompt it was given, and the contents of
    # the system messages each answered model call's request began with (see sent_system);
    # the built-in agent's requests begin with the prompt, and keep neither
    prompt: str | None = None
    systems: list[list[Any]] = field(default_factory=list)
    # an agent of one's own: the answer format each answered model call asked for (None
    # where none: tcbreplay._record.formats)
    formats: list[Any] = field(default_factory=list)
    # an agent of one's own: the tools each answered model call was sent, where they are not
    # the sample's (None where they are: tcbreplay._record.call_tools)
    tools: list[Any] = field(default_factory=list)
    # an agent of one's own: what the last model call was sent (its system contents, format
    # and tools) where it failed and no call was answered after it (see keep_failed_call)
    failed_call: tuple[list[Any], Any, Any] | None = None

    def call_answered(self, call: tuple[list[Any], Any, Any]) -> None:
        """Count an answered model call of an agent of one's own and keep what its request
        was sent (its system contents, format and tools)."""
        sent, asked, tools = call
        self.answered += 1
        self.systems.append(sent)
        self.formats.append(asked)
        self.tools.append(tools)
        self.failed_call = None

    def keep_failed_call(self) -> None:
        """Keep what the call a sample in error failed at was sent beside the answered calls'
        (the last of each list), as a recording keeps its request: replay and serve compare
        the request they are sent there with it (a call answered after it: nothing)."""
        if self.failed_call is not None:
            sent, asked, tools = self.failed_call
            self.systems.append(sent)
            self.formats.append(asked)
            self.tools.append(tools)
            self.failed_call = None

    def sent_system(self) -> list[list[Any]] | None:
        """What the stored messages lack of the requests this sample's model calls were
        sent: the contents of the system messages each answered call's request began with,
        a list per call, when any is not the run's prompt (None when every one is, and
        for the built-in agent)."""
        if self.prompt is None:
            return None
        expected = [self.prompt] if self.prompt else []
        return None if all(sent == expected for sent in self.systems) else self.systems

    def asked_formats(self) -> list[Any] | None:
        """The answer format each answered model call asked for, a list per call, when any
        asked one (None when none did, and for the built-in agent, whose calls ask what
        the run's model settings say)."""
        return self.formats if any(f is not None for f in self.formats) else None

    def sent_tools(self) -> list[Any] | None:
        """The tools each answered model call was sent, a list per call (None for a call
        sent the sample's), when any was sent others (None when none was)."""
        return self.tools if any(t is not None for t in self.tools) else None


@dataclass(frozen=True)
class CallPolicy:
    """Retries, backoff and rate limit of model calls; ``on_retry`` sees each retry; ``clock``
    waits out the backoff (the limiter has its own)."""

    retries: int = 2
    backoff: float = 1.0
    call_timeout: float | None = None
    limiter: RateLimiter = field(default_factory=RateLimiter)
    on_retry: Callable[[BaseException], None] | None = None
    clock: Clock = SYSTEM_CLOCK


current_sample: contextvars.ContextVar[SampleState] = contextvars.ContextVar("tcbreplay_sample")


def build_agent(
    chat_model: Any,
    tools: list[Any],
    system_prompt: str,
    policy: CallPolicy,
    middleware: Sequence[Any] = (),
) -> Any:
    """A LangGraph agent: the chat model, the tools, the system prompt, the middleware (the
    recording's, then ``middleware``)."""
    from langchain.agents import create_agent

    return create_agent(
        chat_model,
        tools=tools,
        system_prompt=system_prompt or None,
        middleware=[_middleware(policy), *middleware],
    )


class ModelAttempts:
    """The attempts at one model call under ``policy``, and what the sample's state keeps of
    them (its retries, their errors, the failure that ended the call): the built-in agent's
    middleware's and an ``--agent`` factory's model's (:mod:`tcbreplay._record.policed_model`)."""

    def __init__(self, policy: CallPolicy) -> None:
        self.policy = policy
        self.state: SampleState | None = current_sample.get(None)
        self.attempt = 0

    def failed(self, caught: Exception, timed_out: bool = False, last: bool = False) -> float:
        """The seconds to wait before trying the call again after ``caught`` (``timed_out``:
        it ran past ``--call-timeout``); raises the failure when it is not tried again
        (``last``: it is not, as a stream that failed once under way)."""
        self.attempt += 1
        exc: Exception = caught
        if timed_out:
            exc = CallTimeout(f"model call did not answer within {self.policy.call_timeout:g} s")
        elif (error := error_reply(caught)) is not None and error[1] is not None:
            exc = ErrorReply.of(error[0], error[1], streamed=error[2])
        elif (wrong := unreadable_reply(caught)) is not None:
            exc = UnreadableReply(f"the provider's reply {wrong}: {_quoted(caught)}")
        too_long = too_long_a_wait(exc, self.policy.clock)
        if last or self.attempt > self.policy.retries or not is_transient(exc) or too_long:
            if self.state is not None:
                self.state.model_error = exc
                self.state.asked_wait = too_long
            if exc is caught:
                raise caught
            raise exc from caught
        if self.state is not None:
            self.state.retries += 1
            self.state.errors.append(f"{type(exc).__name__}: {_short(exc)}")
        if self.policy.on_retry is not None:
            self.policy.on_retry(exc)
        return backoff_delay(self.policy.backoff, self.attempt, exc, self.policy.clock)

    def answered(self, message: Any, elapsed: float) -> None:
        """Count an answer's tokens in the rate limit and keep how long it took."""
        usage = getattr(message, "usage_metadata", None) or {}
        self.policy.limiter.record_tokens(usage.get("total_tokens"))
        if self.state is not None and getattr(message, "id", None):
            self.state.timings[message.id] = elapsed


def _middleware(policy: CallPolicy) -> Any:
    from langchain.agents.middleware import AgentMiddleware

    class Recording(AgentMiddleware):
        """Time calls, retry transient model failures, keep to the rate limit."""

        async def awrap_model_call(self, request, handler):
            attempts = ModelAttempts(policy)
            while True:
                await policy.limiter.acquire()
                t0 = time.perf_counter()
                deadline = asyncio.timeout(policy.call_timeout)
                try:
                    async with deadline:
                        response = await handler(request)
                    _check_reply(response, request.model)
                except Exception as caught:
                    # --call-timeout's deadline passed (a client's own timeout, such as
                    # aiohttp's, is a TimeoutError too, and is left as it says)
                    timed_out = deadline.expired() and not isinstance(caught, CallTimeout)
                    await policy.clock.sleep(attempts.failed(caught, timed_out))
                    continue
                elapsed = time.perf_counter() - t0
                if attempts.state is not None:
                    attempts.state.answered += 1
                for message in getattr(response, "result", None) or []:
                    attempts.answered(message, elapsed)
                return response

        async def awrap_tool_call(self, request, handler):
            t0 = time.perf_counter()
            result = await handler(request)
            state = current_sample.get(None)
            call_id = request.tool_call.get("id")
            if state is not None and call_id:
                state.timings[call_id] = time.perf_counter() - t0
            return result

    return Recording()


async def aclose_model(chat_model: Any) -> None:
    """Close the provider's async HTTP client inside the loop that opened it."""
    client = getattr(getattr(chat_model, "client", None), "aio", None)
    aclose = getattr(client, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


class CallTimeout(TimeoutError):
    """A model call ran past ``--call-timeout`` (retried like any transient failure)."""


class EmptyModelResponse(RuntimeError):
    """The provider answered with no content and no tool calls (retried: it may be passing)."""

    transient = True


# finish reasons of a reply with no content and no call that are the model's own behaviour, to
# be scored, not retried: Gemini's MALFORMED_FUNCTION_CALL (the model wrote a function call the
# API could not parse), as a call whose arguments are no JSON is kept (invalid_tool_calls).
# Retried, the model's failed calls would be drawn again until one passes, and the run would
# score it above what it does. (SAFETY and the like are the provider withholding the reply.)
MODELS_OWN_FAILURES = frozenset({"MALFORMED_FUNCTION_CALL"})


class UnreadableReply(RuntimeError):
    """The provider answered 200 with a reply that could not be read (a proxy's page, no
    choices) or that broke off with an error event (retried: it may be passing)."""

    transient = True


class ErrorReply(RuntimeError):
    """The provider answered 200 with an error (a body ``{"error": ...}``, an error event in a
    stream) of a known kind: taken as the HTTP status that kind is answered with, retried as
    that status is (overloaded, rate limited, a server error) and otherwise the sample's
    error, naming it (its ``status_code``: that status)."""

    def __init__(self, text: str, status_code: int) -> None:
        super().__init__(text)
        self.status_code = status_code

    @classmethod
    def of(cls, error: Mapping[str, Any], status: int, streamed: bool) -> ErrorReply:
        kind, code = error.get("type"), error.get("code")
        named = [str(kind)] if kind else []
        if code is not None and str(code) != str(status):
            named.append(f"({code})" if named else str(code))
        message = " ".join(str(error.get("message") or "no message").split())
        said = (
            "the provider's stream broke off with an error"
            if streamed
            else "the provider answered 200 with an error"
        )
        what = f"{' '.join(named)}: {message}" if named else message
        return cls(
            f"{said}, taken as a {status}: {what}",
            status,
        )


# finish reasons of a reply the model stopped at its token limit (``max_tokens``): OpenAI's
# (and compatible servers'), Anthropic's, Gemini's
TOKEN_LIMIT_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})


class TokenLimitReply(RuntimeError):
    """The model stopped at its token limit: what it wrote (a text, a tool call's arguments) is
    cut off, no whole answer. Not retried: the same limit would cut it again; the sample's
    error, saying to raise the limit."""

    @classmethod
    def of(cls, model: Any, reason: str) -> TokenLimitReply:
        limit = getattr(model, "max_tokens", None) or getattr(model, "max_output_tokens", None)
        said = f"max_tokens={limit}" if limit else "max_tokens not set: the provider's own"
        return cls(
            f"the model stopped at its token limit ({said}, finish reason {reason}): what it "
            "wrote is cut off; raise --model-option max_tokens=N"
        )


# stop reasons of a reply the model stopped because its context window was full (the request
# and what it wrote fill it): Anthropic's
CONTEXT_WINDOW_REASONS = frozenset({"model_context_window_exceeded"})


class ContextWindowReply(RuntimeError):
    """The model stopped because its context window is full: what it wrote is cut off, no
    whole answer. Not retried: the same conversation fills it again; the sample's error,
    saying that a higher ``max_tokens`` does not help (the window holds the request too)."""

    @classmethod
    def of(cls, reason: str) -> ContextWindowReply:
        return cls(
            f"the model's context window is full (stop reason {reason}): what it wrote is cut "
            "off, and a higher max_tokens does not help; shorten the conversation (fewer turns, "
            "shorter tool outputs) or use a model with a larger context window"
        )


class TruncatedReply(RuntimeError):
    """A streamed reply ended before the provider said why it stopped (no finish or stop
    reason): the stream was cut off mid-way, and what came is no whole answer (retried)."""

    transient = True


# where each provider's reply says why the model stopped (``response_metadata``): a streamed
# reply gets it from its last event, so one without it was cut off before that event came (a
# reply not streamed comes whole or not at all; other providers' keys are not known here)
_FINISH_KEYS = {
    "openai": "finish_reason",
    "anthropic": "stop_reason",
    "google_genai": "finish_reason",
}


def _streams(model: Any) -> bool:
    """Whether LangChain streams the replies of ``model`` (``--model-option streaming=true``)."""
    return getattr(model, "streaming", None) is True and not getattr(
        model, "disable_streaming", False
    )


def _check_reply(response: Any, model: Any, streamed: bool = False) -> None:
    """Refuse a reply of ``model`` that is no answer of the model: one cut off mid-stream,
    one the model stopped at its token limit or with its context window full, one with no
    content and no tool calls (``streamed``: the reply was streamed, whatever the model's
    settings say, as a call of its ``astream`` is; never said of a replay's recorded turns,
    which are stored whole)."""
    recorded = getattr(model, "serves_recorded_turns", False)
    streamed = (streamed and not recorded) or _streams(model)
    for message in getattr(response, "result", None) or []:
        if getattr(message, "type", None) != "ai":
            continue
        metadata = getattr(message, "response_metadata", None) or {}
        key = _FINISH_KEYS.get(str(metadata.get("model_provider")))
        if streamed and key is not None and metadata.get(key) is None:
            raise TruncatedReply(
                f"the streamed reply ended without a {key}: it was cut off before its end"
            )
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        # (a replay's model serves what a recording stored: one made before such replies were
        # refused holds them as answers, replayed as they were)
        if reason in TOKEN_LIMIT_REASONS and not getattr(model, "serves_recorded_turns", False):
            raise TokenLimitReply.of(model, str(reason))
        if reason in CONTEXT_WINDOW_REASONS and not getattr(model, "serves_recorded_turns", False):
            raise ContextWindowReply.of(str(reason))
        if message.content or getattr(message, "tool_calls", None):
            continue
        if getattr(message, "invalid_tool_calls", None):
            continue
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        if reason in MODELS_OWN_FAILURES:
            continue
        said = f" (finish reason {reason})" if reason else ""
        raise EmptyModelResponse(f"the model answered with no content and no tool calls{said}")


@contextlib.contextmanager
def inline_tracing_hooks() -> Iterator[None]:
    """Run LangSmith's per-call bookkeeping inline while LangSmith tracing is off.

    LangChain's middleware and tool calls are wrapped by LangSmith's ``traceable``,
    which hands two small functions per call to a thread pool even when nothing is
    traced; with tracing off they only touch context variables, so running them in
    the event loop's thread saves two thread hops per call. With tracing on, the
    defaults stay (they may do network I/O).
    """
    try:
        import langsmith
        from langsmith.utils import tracing_is_enabled
    except ImportError:
        yield
        return
    if tracing_is_enabled():
        yield
        return

    async def inline(default, ctx, func, /, *args, **kwargs):
        return ctx.run(func, *args, **kwargs)

    langsmith.set_runtime_overrides(aio_to_thread=inline)
    try:
        yield
    finally:
        langsmith.set_runtime_overrides()


def _quoted(exc: BaseException) -> str:
    """An error as an UnreadableReply quotes it: its type and text, without the last word of
    a text LangChain cut short (``...``): a key the reply quoted may be cut there, and a part
    of a key is not redacted (the whole text is, where it is stored or shown)."""
    text = " ".join(str(exc).split())
    if text.endswith("..."):
        text = text[:-3].rpartition(" ")[0] + " …"
    return f"{type(exc).__name__}: {text}"


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
