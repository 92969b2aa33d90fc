"""The answers ``serve`` gave that a client may ask for again by their id: the Responses
API's ``GET /v1/responses/{id}``, which a client polls after ``"background": true`` (and
may stream, from an event on, with ``?stream=true&starting_after=N``), cancels (``POST
/v1/responses/{id}/cancel``: it is finished, and answered as it is) or deletes (``DELETE``:
forgotten, a 404 from then on).

A background response is answered finished at once (the recording holds its answer), so a
client that polls while the status is ``queued`` or ``in_progress`` polls no more; one that
asks for the response again (or resumes its stream) gets the same answer from here. Each
answer kept goes by an id of its own (a recorded message's id may answer several
conversations, and a recording without ids numbers its turns alike in every sample); the
oldest are forgotten first.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from itertools import count

from tcbreplay._replay.server import Reply
from tcbreplay._replay.wire import Answer, Wire, WireError, WireRequest, dumps_json
from tcbreplay._replay.wire_responses import ResponsesWire

# answers kept (each its text and calls, and the request's model: no messages)
KEPT = 4096


class KeptAnswers:
    """The answers given on wires whose clients may ask for them again (see the module)."""

    def __init__(self, size: int = KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[str, tuple[Answer, WireRequest]] = OrderedDict()
        self._serial = count()

    def keep(self, wire: Wire, answer: Answer, request: WireRequest) -> None:
        """Give ``request``'s answer an id of its own (``request.said_back["id"]``) and keep
        it, where ``wire``'s clients may ask for it again."""
        if not isinstance(wire, ResponsesWire):
            return
        made = f"resp_{answer.id}_{next(self._serial)}"
        request.said_back["id"] = made
        bare = dataclasses.replace(request, messages=[], entries=[], parts=[], tools=[],
                                   places=list, inside=None)  # fmt: skip
        self._kept[made] = (answer, bare)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)

    def _unknown(self, wire: ResponsesWire, answer_id: str) -> Reply:
        message = (f"{answer_id[:100]!r}: no response of that id was made by this server "
                   f"(of the last {self._size} it made, those deleted left out)")  # fmt: skip
        return Reply(404, wire.error(404, message, "not_found_error"))

    def reply(self, wire: ResponsesWire, answer_id: str, query: str) -> Reply:
        """The answer of ``answer_id`` again (``query``: the query string; ``stream=true``
        its events, after ``starting_after``), or a 404."""
        found = self._kept.get(answer_id)
        if found is None:
            return self._unknown(wire, answer_id)
        answer, request = found
        asked = dict(p.partition("=")[::2] for p in query.split("&") if p)
        if asked.get("stream", "false") not in ("true", "false"):
            return _refused(wire, f"stream {asked['stream'][:20]!r}: true or false")
        if asked.get("stream") != "true":
            return Reply(200, wire.answer(answer, request))
        after = asked.get("starting_after", "-1")
        if not (after.isascii() and after.lstrip("-").isdigit() and len(after) < 12):
            return _refused(wire, f"starting_after {after[:20]!r}: a whole number")
        return Reply(200, wire.stream(answer, request, int(after)), "text/event-stream")

    def cancel(self, wire: ResponsesWire, answer_id: str) -> Reply:
        """The answer of ``answer_id`` cancelled: as it is, finished (it was answered whole),
        where it was made with ``background: true``; else a 400, as only those can be
        cancelled; or a 404."""
        found = self._kept.get(answer_id)
        if found is None:
            return self._unknown(wire, answer_id)
        answer, request = found
        if not request.said_back.get("background"):
            return _refused(wire, f"{answer_id[:100]!r}: only a response made with background: "
                                  "true can be cancelled")  # fmt: skip
        return Reply(200, wire.answer(answer, request))

    def delete(self, wire: ResponsesWire, answer_id: str) -> Reply:
        """Forget the answer of ``answer_id`` (a 404 asked for again): OpenAI's deletion
        object; or a 404."""
        if self._kept.pop(answer_id, None) is None:
            return self._unknown(wire, answer_id)
        return Reply(200, dumps_json({"id": answer_id, "object": "response.deleted",
                                      "deleted": True}))  # fmt: skip


def _refused(wire: Wire, message: str) -> Reply:
    error = WireError(message)
    return Reply(error.status, wire.error(error.status, message, error.kind))
