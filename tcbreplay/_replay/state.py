"""What happens while one sample (and trial) is replayed: the turns served, the live calls,
its divergence and its tools' outputs, in a context variable that the recorded model and
the tools read (each sample runs in a task of its own).
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from tcbreplay._replay.divergence import Divergence, message_index
from tcbreplay._replay.fingerprint import Conversation
from tcbreplay._replay.outputs import CHANGED, compare_output
from tcbreplay._replay.recording import Key, RecordedRun
from tcbreplay._replay.tool_pool import ToolOutput, ToolPool


@dataclass
class SampleReplay:
    """What happened while one sample (and trial) was replayed."""

    key: Key
    recording: RecordedRun
    served: list[tuple[int, int]] = field(default_factory=list)  # (turn, parent position)
    live_calls: int = 0
    live_answered: int = 0  # of those, the ones the live model answered (with a reply kept)
    forked_at: int | None = None
    divergence: Divergence | None = None
    continued: bool = False  # went on with the live model after diverging
    recorded_error: bool = False  # ended in the error its recording ended in, where it did
    tools: Counter[str] = field(default_factory=Counter)  # outcome -> live outputs compared
    tools_served: int = 0  # outputs served from the recording
    served_calls: set[str] = field(default_factory=set)  # call ids of the turns served
    outcomes: dict[str, str] = field(default_factory=dict)  # call id -> outcome
    # the sample's messages read for its requests' fingerprints, kept between its turns
    conversation: Conversation = field(default_factory=Conversation, repr=False)
    _outputs: dict[str, ToolOutput] | None = None
    _pool: ToolPool | None = None

    @property
    def turns_reached(self) -> int:
        """The recorded turns the replay asked for, each once however often it asked."""
        return len({turn for turn, _ in self.served})

    def serve(self, turn: int, position: int, message: AIMessage) -> None:
        self.served.append((turn, position))
        self.served_calls.update(str(c["id"]) for c in message.tool_calls if c.get("id"))

    def check_tools(self, messages: Sequence[BaseMessage], tool_names: set[str]) -> None:
        """Compare each live tool output in a request, not compared yet, that answers a
        call of a served turn with its recorded output."""
        if self._outputs is None:
            self._outputs = self.recording.tool_outputs(self.key)[0]
        for message in messages:
            call_id = str(getattr(message, "tool_call_id", None) or "")
            if getattr(message, "type", None) != "tool" or not call_id:
                continue
            if call_id in self.outcomes or call_id not in self.served_calls:
                continue
            recorded = self._outputs.get(call_id)
            if recorded is None:
                continue
            outcome = compare_output(
                recorded, message.content, getattr(message, "status", None),
                recorded.name in tool_names,
            )  # fmt: skip
            self.outcomes[call_id] = outcome
            self.tools[outcome] += 1

    def take_tool_output(self, name: str, arguments: Any) -> ToolOutput | None:
        if self._pool is None:
            by_id, _ = self.recording.tool_outputs(self.key)
            self._pool = ToolPool(list(by_id.values()))
        return self._pool.take(name, arguments)

    def tool_served(self, call_id: str) -> None:
        self.tools_served += 1
        self.outcomes[call_id] = "served"

    def component(self, call_ids: list[str | None]) -> Any:
        """What names the component of a difference at a path: ``tool_output`` for a tool
        output that changed when run live (``call_ids``: the request's, per message)."""

        def name(path: str) -> str | None:
            i = message_index(path)
            if i is None or i >= len(call_ids) or call_ids[i] is None:
                return None
            return "tool_output" if self.outcomes.get(call_ids[i] or "") in CHANGED else None

        return name

    def to_dict(self) -> dict[str, Any]:
        """The sample's replay as its row's metadata keeps it (``replay``)."""
        return {
            "served": [list(pair) for pair in self.served],
            "live_calls": self.live_calls,
            "live_answered": self.live_answered,
            "forked_at": self.forked_at,
            "diverged_at": None if self.divergence is None else self.divergence.turn,
            "continued": self.continued,
            "tool_outputs": {k: self.tools[k] for k in sorted(self.tools)},
            "tool_outputs_served": self.tools_served,
            **({"recorded_error": True} if self.recorded_error else {}),
        }


current_replay: contextvars.ContextVar[SampleReplay] = contextvars.ContextVar("tcbreplay_replay")
