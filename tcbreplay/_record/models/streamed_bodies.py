"""A request for a stream answered with a JSON body, not server-sent events, made to say its
error.

A server (a gateway, an OpenAI-compatible one) may answer a streamed request with a 200 whose
body is an error in JSON (OpenAI's ``{"error": {...}}``, Anthropic's ``{"type": "error",
"error": {...}}``), not an event stream. The SDKs (openai's and anthropic's) read the body as
events, find none, and LangChain fails with "No generations found in stream": the error lost,
and the reply retried as one that could not be read, an invalid request spending its retries.
Such a body is raised as :class:`~tcbreplay._record.models.anthropic_calls.ErrorBody` before
the stream is read, which the recording takes as the status of its kind (see
:func:`tcbreplay._record.retry.error_reply`), as it takes the same body answering a request
not streamed. Any other body is read as before. (A status other than 2xx the SDKs raise with
its body themselves, streamed or not.)
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from tcbreplay._record.models.anthropic_calls import ErrorBody

# the SDKs whose streams are read so: their stream classes
_SDKS = ("openai", "anthropic")


def raise_streamed_error_bodies() -> None:
    """Have the openai and anthropic SDKs (those imported) raise a JSON error answering a
    request for a stream as :class:`ErrorBody`; idempotent."""
    for name in _SDKS:
        sdk = sys.modules.get(name)
        for cls in (getattr(sdk, "Stream", None), getattr(sdk, "AsyncStream", None)):
            stream = getattr(cls, "__stream__", None)
            if stream is None or getattr(stream, "tcbreplay", False):
                continue
            checked = (
                _async_checked(stream) if inspect.isasyncgenfunction(stream) else _checked(stream)
            )
            checked.tcbreplay = True
            cls.__stream__ = checked  # type: ignore[union-attr]


def _checked(stream: Any) -> Any:
    def __stream__(self: Any) -> Iterator[Any]:
        if _json(self.response):
            raise_body_error(self.response.read())
        inner = stream(self)
        try:
            yield from inner
        finally:
            inner.close()

    return __stream__


def _async_checked(stream: Any) -> Any:
    async def __stream__(self: Any) -> AsyncIterator[Any]:
        if _json(self.response):
            raise_body_error(await self.response.aread())
        inner = stream(self)
        try:
            async for item in inner:
                yield item
        finally:
            await inner.aclose()

    return __stream__


def _json(response: Any) -> bool:
    """Whether ``response`` says its body is JSON, not events."""
    headers = getattr(response, "headers", None)
    kind = str(headers.get("content-type", "") if headers is not None else "").split(";")[0]
    return kind.strip().lower().endswith("json")


def raise_body_error(body: Any, replies: tuple[str, ...] = ()) -> None:
    """Raise the error a JSON ``body`` (its text, or the JSON read) holds (OpenAI's and
    Google's ``error``, Anthropic's ``{"type": "error", "error": ...}``), if it holds one and
    none of the keys a reply has (``replies``)."""
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except ValueError:
            return  # (read as before: no events in it)
    if not isinstance(body, Mapping) or any(key in body for key in replies):
        return
    error = body.get("error")
    if isinstance(error, Mapping):
        raise ErrorBody(error)
    if isinstance(error, str) and error:
        raise ErrorBody({"message": error})
