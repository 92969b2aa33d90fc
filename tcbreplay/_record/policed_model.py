"""The chat model an agent of one's own (``--agent``) is given: the run's, its calls kept to
the recording's call policy as the built-in agent's middleware keeps its own (see
:mod:`tcbreplay._record.agent`): transient failures retried with backoff (``--retries``,
``--backoff``, the provider's ``Retry-After``), ``--max-rpm`` and ``--max-tpm``,
``--call-timeout``, and the failure that ends a call kept for the rule that stops the run
(:mod:`tcbreplay._record.failures`: a refused key stops it at the first sample).

The model is a copy of the run's, of a subclass of its class made here: ``bind_tools``,
``with_structured_output`` and the provider's settings are its class's own, and whatever they
make calls the model back through ``ainvoke``, ``invoke``, ``astream`` or ``stream``, which
the subclass wraps (each attempt a call of its own, with its callbacks, as the middleware's
retries are). A stream is retried until its first chunk; a synchronous call (a graph's node
that is a plain function, run by LangGraph in a thread) waits by blocking its thread, and
``--call-timeout`` gives up on it while it goes on in another (a synchronous ``stream``
cannot be cut short: said once).

A streamed reply is checked once its stream ends, its chunks put together, as an invoked
one is. Chunks that hold nothing yet (no text, no part of a tool call) are kept back until
one does, so that an empty reply, handed on in no part, is retried as an invoked one; a
chunk handed on is the graph's and cannot be taken back, so a reply refused after that (at
the token limit, cut off) is the call's failure, raised at the stream's end, not retried.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import time
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import Any

from tcbreplay._record.agent import (
    CallPolicy,
    CallTimeout,
    ModelAttempts,
    SampleState,
    _check_reply,
)
from tcbreplay.errors import TcbReplayWarning


class Attempt:
    """One attempt at a policed model's call, as its callbacks see it: the request of the
    call it made (its system contents, format and tools, which the ``--agent`` watcher sets
    once the call has a reply), kept apart until the reply is taken as the call's answer
    (:meth:`SampleState.call_answered`) or refused (an empty reply retried, one cut off at
    the token limit: the call the sample failed at, unless one is answered after it)."""

    __slots__ = ("replied",)

    def __init__(self) -> None:
        self.replied: tuple[list[Any], Any, Any] | None = None

    def taken(self, state: SampleState | None) -> None:
        """Its reply is the call's answer: counted and kept as an answered call's."""
        if state is not None and self.replied is not None:
            state.call_answered(self.replied)

    def refused(self, state: SampleState | None) -> None:
        """Its reply, if it came, is no answer: kept as the call the sample failed at."""
        if state is not None and self.replied is not None:
            state.failed_call = self.replied


# set while a call of a policed model is under way (its callbacks see it): a model call the
# graph makes otherwise is of a model it made itself (see :func:`outside_policy`)
_policed: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(
    "tcbreplay_policed", default=None
)


def under_policy(chat_model: Any, policy: CallPolicy, source: str = "--agent") -> Any:
    """A copy of ``chat_model`` whose calls keep to ``policy`` (see the module); ``source``:
    the ``--agent`` given, which a warning names."""
    cls = type(chat_model)
    namespace = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        **_policed_methods(cls, policy, source),
    }
    policed = type(cls.__name__, (cls,), namespace)
    model = chat_model.model_copy()
    object.__setattr__(model, "__class__", policed)  # (the same fields: only methods differ)
    return model


def outside_policy() -> bool:
    """Whether a model call starting now (seen by a callback) is none of a policed model's."""
    return _policed.get() is None


def attempt_under_way() -> Attempt | None:
    """The policed model's attempt whose call a callback sees now, if any (a call of a model
    the graph made itself: None)."""
    return _policed.get()


def _policed_methods(cls: type, policy: CallPolicy, source: str) -> dict[str, Any]:
    base_ainvoke, base_invoke = cls.ainvoke, cls.invoke  # type: ignore[attr-defined]
    base_astream, base_stream = cls.astream, cls.stream  # type: ignore[attr-defined]
    warned: list[bool] = []

    async def ainvoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return await _acall(policy, self, lambda: base_ainvoke(self, input, config, **kwargs))

    def invoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return _call(policy, self, lambda: base_invoke(self, input, config, **kwargs))

    async def astream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        async for chunk in _astream(
            policy, self, lambda: base_astream(self, input, config, **kwargs)
        ):
            yield chunk

    def stream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if policy.call_timeout is not None and not warned:
            warned.append(True)
            warnings.warn(
                TcbReplayWarning(
                    f"--agent {source}: its graph streams its model synchronously (stream), "
                    f"which --call-timeout {policy.call_timeout:g} cannot cut short (the "
                    "model's own timeout applies: --model-option timeout=...)"
                ),
                stacklevel=2,
            )
        yield from _stream(policy, self, lambda: base_stream(self, input, config, **kwargs))

    return {"ainvoke": ainvoke, "invoke": invoke, "astream": astream, "stream": stream}


def _check_answer(message: Any, model: Any, streamed: bool = False) -> None:
    """Refuse what is no answer of ``model`` as the built-in agent does: a reply cut off
    mid-stream, or with no content and no tool calls (retried), or at the model's token
    limit (not); ``streamed``: ``message`` is a stream's chunks put together."""
    from langchain.agents.middleware.types import ModelResponse
    from langchain_core.messages import message_chunk_to_message

    _check_reply(ModelResponse(result=[message_chunk_to_message(message)]), model, streamed)


async def _acall(policy: CallPolicy, model: Any, call: Callable[[], Awaitable[Any]]) -> Any:
    attempts = ModelAttempts(policy)
    while True:
        await policy.limiter.acquire()
        t0 = time.perf_counter()
        attempt = Attempt()
        token = _policed.set(attempt)
        deadline = asyncio.timeout(policy.call_timeout)
        try:
            async with deadline:
                message = await call()
            _check_answer(message, model)
        except Exception as caught:
            attempt.refused(attempts.state)
            delay = attempts.failed(caught, deadline.expired())
            await policy.clock.sleep(delay)
            continue
        finally:
            _policed.reset(token)
        attempts.answered(message, time.perf_counter() - t0)
        attempt.taken(attempts.state)
        return message


def _call(policy: CallPolicy, model: Any, call: Callable[[], Any]) -> Any:
    attempts = ModelAttempts(policy)
    while True:
        policy.limiter.acquire_blocking()
        t0 = time.perf_counter()
        attempt = Attempt()
        token = _policed.set(attempt)
        try:
            message = _within(policy.call_timeout, call)
            _check_answer(message, model)
        except Exception as caught:
            attempt.refused(attempts.state)
            policy.clock.sleep_blocking(attempts.failed(caught))
            continue
        finally:
            _policed.reset(token)
        attempts.answered(message, time.perf_counter() - t0)
        attempt.taken(attempts.state)
        return message


def _within(timeout: float | None, call: Callable[[], Any]) -> Any:
    """What ``call`` returns; past ``timeout`` seconds, :class:`CallTimeout` (the call is
    left to finish in its thread, its answer unread)."""
    if timeout is None:
        return call()
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tcbreplay-call")
    future = pool.submit(contextvars.copy_context().run, call)
    pool.shutdown(wait=False)
    try:
        return future.result(timeout)
    except TimeoutError:
        if future.done():  # the call's own
            raise
        raise CallTimeout(f"model call did not answer within {timeout:g} s") from None


async def _astream(
    policy: CallPolicy, model: Any, stream: Callable[[], AsyncGenerator[Any, None]]
) -> Any:
    attempts = ModelAttempts(policy)
    while True:
        await policy.limiter.acquire()
        t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        ends = None if policy.call_timeout is None else loop.time() + policy.call_timeout
        chunks = stream()
        attempt = Attempt()
        whole: Any = None
        held: list[Any] | None = []  # chunks that say nothing yet (None: one was handed on)
        delay: float | None = None
        try:
            while True:
                token = _policed.set(attempt)
                deadline = asyncio.timeout_at(ends)
                try:
                    async with deadline:
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except Exception as caught:  # (a stream handed on in part is not retried)
                    delay = attempts.failed(caught, deadline.expired(), last=held is None)
                    break
                finally:
                    _policed.reset(token)
                whole = chunk if whole is None else whole + chunk
                if held is not None and not _says_something(chunk):
                    held.append(chunk)
                    continue
                for kept in held or ():
                    yield kept
                held = None
                yield chunk
            if delay is None and whole is not None:
                delay = _checked(attempts, attempt, whole, model, handed_on=held is None)
        finally:
            with contextlib.suppress(Exception):  # (the stream's connection let go)
                await chunks.aclose()
        if delay is None:
            break
        await policy.clock.sleep(delay)
    for kept in held or ():  # (a reply of no text that is an answer: the model's own failure)
        yield kept
    if whole is not None:
        attempts.answered(whole, time.perf_counter() - t0)
    attempt.taken(attempts.state)


def _stream(policy: CallPolicy, model: Any, stream: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    attempts = ModelAttempts(policy)
    while True:
        policy.limiter.acquire_blocking()
        t0 = time.perf_counter()
        chunks = stream()
        attempt = Attempt()
        whole: Any = None
        held: list[Any] | None = []  # chunks that say nothing yet (None: one was handed on)
        delay: float | None = None
        try:
            while True:
                token = _policed.set(attempt)
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except Exception as caught:  # (a stream handed on in part is not retried)
                    delay = attempts.failed(caught, last=held is None)
                    break
                finally:
                    _policed.reset(token)
                whole = chunk if whole is None else whole + chunk
                if held is not None and not _says_something(chunk):
                    held.append(chunk)
                    continue
                yield from held or ()
                held = None
                yield chunk
            if delay is None and whole is not None:
                delay = _checked(attempts, attempt, whole, model, handed_on=held is None)
        finally:
            _close(chunks)
        if delay is None:
            break
        policy.clock.sleep_blocking(delay)
    yield from held or ()  # (a reply of no text that is an answer: the model's own failure)
    if whole is not None:
        attempts.answered(whole, time.perf_counter() - t0)
    attempt.taken(attempts.state)


def _says_something(chunk: Any) -> bool:
    """Whether a streamed chunk holds any of the reply (its text, a part of a tool call):
    until one does, the stream can be begun anew without the graph knowing."""
    if not hasattr(chunk, "content"):  # (no message chunk: handed on as it is)
        return True
    return bool(chunk.content or getattr(chunk, "tool_call_chunks", None))


def _checked(
    attempts: ModelAttempts, attempt: Attempt, whole: Any, model: Any, handed_on: bool
) -> float | None:
    """None when a stream's whole reply is an answer (see :func:`_check_answer`); otherwise,
    refused, the seconds to wait before streaming it again: retried as an invoked reply is
    (an empty one) while none of its chunks was handed on, and else raised, the call's
    failure (the graph holds chunks of it that cannot be taken back)."""
    try:
        _check_answer(whole, model, streamed=True)
    except Exception as caught:
        attempt.refused(attempts.state)
        return attempts.failed(caught, last=handed_on)
    return None


def _close(chunks: Iterator[Any]) -> None:
    """Let a stream's connection go (a generator's ``close``), whatever became of it."""
    close = getattr(chunks, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()
