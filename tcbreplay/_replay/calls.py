"""Which calls ``serve`` answered in one message: a wire form whose items do not say which
calls are one answer's (the Responses API's, whose calls a client may send back each
followed by its output) is read by them."""

from __future__ import annotations

from collections import OrderedDict
from itertools import count


class AnsweredCalls:
    """Each call id served, with the answer it was served in (the oldest ids forgotten
    first): memory and time linear in the calls, however many one answer holds."""

    def __init__(self, size: int = 20_000) -> None:
        self._size = size
        self._answer: OrderedDict[str, int] = OrderedDict()
        self._answers = count()

    def answered(self, call_ids: list[str]) -> None:
        """The calls of one answer served, by their ids."""
        if len(call_ids) < 2:  # (a call alone is together with no other)
            return
        answer = next(self._answers)
        for call_id in call_ids:
            self._answer[call_id] = answer
            self._answer.move_to_end(call_id)
        while len(self._answer) > max(self._size, len(call_ids)):
            self._answer.popitem(last=False)

    def together(self, first: str, other: str) -> bool:
        """Whether calls of these ids were served in one answer."""
        answer = self._answer.get(first)
        return first != other and answer is not None and self._answer.get(other) == answer
