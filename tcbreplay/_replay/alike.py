"""The recording's own tools standing in for a request's that say the same in the terms of
the request's API (a wire whose clients send less than a recording holds: Gemini's,
:mod:`tcbreplay._replay.gemini_terms`), so that such a request has the fingerprint of the
recorded one it stands for: a request's tool stands for the run's tool of its name when the
two are alike in the wire's terms.
"""

from __future__ import annotations

from typing import Any

from tcbreplay._replay.divergence import Divergence, describe
from tcbreplay._replay.fingerprint import canonical_json
from tcbreplay._replay.recording import Key, RecordedRun
from tcbreplay._replay.wire import Wire


class Alike:
    """What stands in for what, for one served recording (see the module)."""

    def __init__(self, recording: RecordedRun) -> None:
        self.recording = recording

    def tools(self, wire: Wire, tools: dict[str, Any]) -> dict[str, Any]:
        """A request's canonical tools, each alike to the run's tool of its name that one."""
        if not wire.has_terms:
            return tools
        recorded = self.recording.tools
        out: dict[str, Any] = {}
        for name, tool in tools.items():
            mine = recorded.get(name)
            if mine is not None and mine != tool and _same(wire.tool_terms(mine),
                                                           wire.tool_terms(tool)):  # fmt: skip
                tool = mine
            out[name] = tool
        return out

    def tools_divergence(
        self, wire: Wire, divergence: Divergence, key: Key | None, tools: dict[str, Any]
    ) -> Divergence:
        """A divergence in the tools said in the wire's terms (where the tool differs in
        them, not where the client leaves a keyword out)."""
        if not wire.has_terms or divergence.component != "tools":
            return divergence
        recorded = self.recording.tools_of(key)
        return describe(
            divergence.turn,
            {"tools": {n: wire.tool_terms(t) for n, t in recorded.items()}},
            {"tools": {n: wire.tool_terms(t) for n, t in tools.items()}},
        )


def _same(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)
