"""google-genai's reading of a 200 whose body is a JSON error, made to say the error.

A gateway in front of Gemini may answer ``generateContent`` or ``streamGenerateContent`` with
a 200 whose body is an error in JSON (Google's ``{"error": {"code": 400, "message": ...,
"status": "INVALID_ARGUMENT"}}``), not a reply and, for a stream, not events. Not streamed,
google-genai builds an empty reply of it and the recording retried it as one with no
content, the error lost; streamed, it raised the error as if the status had been its
``code``, and crashed on an error with no code (``TypeError``) or one that is only text
(``AttributeError``). Such a body is raised as
:class:`~tcbreplay._record.models.anthropic_calls.ErrorBody`, which the recording takes as the
status of its kind (see :func:`tcbreplay._record.retry.error_reply`), as it takes the same
body from OpenAI's and Anthropic's SDKs (see ``streamed_bodies``). An event stream's error
event, and any other body, are read as before.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

from tcbreplay._record.models.streamed_bodies import raise_body_error

# the module whose client sends google-genai's requests and reads their bodies
_CLIENT = "google.genai._api_client"


def raise_gemini_error_bodies() -> None:
    """Have google-genai (when it is imported) raise a 200 whose body is a JSON error as
    :class:`ErrorBody`, streamed or not; idempotent."""
    client = sys.modules.get(_CLIENT)
    api, response = getattr(client, "BaseApiClient", None), getattr(client, "HttpResponse", None)
    if api is None or response is None or getattr(api.request, "tcbreplay", False):
        return
    api.request = _checked_body(api.request)
    api.async_request = _async_checked_body(api.async_request)
    response.segments = _checked_segments(response.segments)
    response.async_segments = _async_checked_segments(response.async_segments)


def _checked_body(request: Any) -> Any:
    @functools.wraps(request)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        reply = request(self, *args, **kwargs)
        _raise_error(getattr(reply, "body", None))
        return reply

    checked.tcbreplay = True  # type: ignore[attr-defined]
    return checked


def _async_checked_body(request: Any) -> Any:
    @functools.wraps(request)
    async def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        reply = await request(self, *args, **kwargs)
        _raise_error(getattr(reply, "body", None))
        return reply

    return checked


def _checked_segments(segments: Any) -> Any:
    @functools.wraps(segments)
    def checked(self: Any) -> Iterator[Any]:
        json_body = _json(self)
        for segment in segments(self):
            if json_body:
                _raise_error(segment)
            yield segment

    return checked


def _async_checked_segments(segments: Any) -> Any:
    @functools.wraps(segments)
    async def checked(self: Any) -> AsyncIterator[Any]:
        json_body = _json(self)
        async for segment in segments(self):
            if json_body:
                _raise_error(segment)
            yield segment

    return checked


def _json(response: Any) -> bool:
    """Whether ``response`` says its body is JSON, not events."""
    headers = getattr(response, "headers", None) or {}
    kinds = [str(v) for k, v in dict(headers).items() if str(k).lower() == "content-type"]
    return any(kind.split(";")[0].strip().lower().endswith("json") for kind in kinds)


def _raise_error(body: Any) -> None:
    """Raise the error a body (its text, or its JSON read) holds instead of a reply, if any:
    a body with ``candidates`` is a reply."""
    raise_body_error(body, replies=("candidates",))
