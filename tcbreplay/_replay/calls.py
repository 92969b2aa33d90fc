"""Which calls ``serve`` answered in one message: a wire form whose items do not say which
calls are one answer's (the Responses API's, whose calls a client may send back each
followed by its output) is read by them."""

from __future__ import annotations

from collections import OrderedDict


class AnsweredCalls:
    """The ids of calls served in one answer, by pairs (the oldest forgotten first)."""

    def __init__(self, size: int = 20_000) -> None:
        self._size = size
        self._pairs: OrderedDict[frozenset[str], None] = OrderedDict()

    def answered(self, call_ids: list[str]) -> None:
        """The calls of one answer served, by their ids."""
        for k, first in enumerate(call_ids):
            for other in call_ids[k + 1 :]:
                pair = frozenset((first, other))
                self._pairs[pair] = None
                self._pairs.move_to_end(pair)
        while len(self._pairs) > self._size:
            self._pairs.popitem(last=False)

    def together(self, first: str, other: str) -> bool:
        """Whether calls of these ids were served in one answer."""
        return frozenset((first, other)) in self._pairs
