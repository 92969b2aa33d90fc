"""langchain-anthropic's reading of a 200 whose body is an error, made to say the error.

Anthropic's API, or a gateway in front of it, may answer a request that is not streamed with
a 200 whose body is an error (``{"type": "error", "error": {"type": "overloaded_error",
"message": ...}}``). The SDK builds a message of it unchecked, and langchain-anthropic fails
reading its content: ``TypeError: 'NoneType' object is not iterable``, the error lost, and
an overloaded server taken for a bug of the request. Such a reply is raised as
:class:`ErrorBody`, holding the error, which the recording takes as the status of its kind
(see :func:`tcbreplay._record.retry.error_reply`); one whose error is only text, as an error
of no kind. A 200 that is no message and holds no error (``{}``, a gateway's) is raised as
:class:`NoMessage`, a reply that could not be read. A stream's error event the SDK raises
itself.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

# the module whose ChatAnthropic reads the SDK's messages
_CHAT = "langchain_anthropic.chat_models"


class ErrorBody(ValueError):
    """A reply whose body was an error, not a message: ``error`` is that error, as it came
    (``{"type": "overloaded_error", "message": ...}``)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(f"the reply is an error, not a message: {dict(error)}")
        self.error = error


class NoMessage(ValueError):
    """A reply whose body was no message (it has no content) and held no error."""


def raise_error_bodies() -> None:
    """Have langchain-anthropic (when it is imported) raise a reply whose body is an error as
    :class:`ErrorBody`; idempotent. Any other reply it reads as before."""
    chat: Any = sys.modules.get(_CHAT)
    model = getattr(chat, "ChatAnthropic", None)
    if model is None or getattr(model._format_output, "tcbreplay", False):
        return
    format_output = model._format_output

    def _format_output(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        # (the SDK keeps the body's keys a message has not: "error" among them)
        error = getattr(data, "error", None)
        if getattr(data, "content", None) is None:
            if isinstance(error, Mapping):
                raise ErrorBody(error)
            if isinstance(error, str) and error:
                raise ErrorBody({"message": error})
            raise NoMessage("the reply is no message: it has no content")
        return format_output(self, data, *args, **kwargs)

    _format_output.tcbreplay = True  # type: ignore[attr-defined]
    model._format_output = _format_output
