"""The recording's own tools and tool results, standing in for a request's that say the same
in the terms of the request's API (a wire whose clients send less than a recording holds:
Gemini's, :mod:`tcbreplay._replay.gemini_terms`), so that such a request has the
fingerprint of the recorded one it stands for.

A request's tool stands for a recorded tool of its name when the two are alike in the wire's
terms: the tool of the sample its conversation was answered from (for a first request, or a
conversation this server answered none of, of the samples that start as it does, the first
alike), as each sample of an import may carry tools of its own, else the run's.

A request's tool message stands for a recorded one of the same tool whose output is alike in
those terms: the recorded message in its place in the sample its conversation was
answered from (so that alike outputs of one tool, ``{"output": "hi"}`` and ``"hi"``, stand
each for its own, in interleaved conversations and within one sample; for a conversation
this server answered none of, in the first of the samples that start as it does that has
one there), else one among the
samples this server answered from (learnt as each is first answered from: a tool message
follows an answer), where several are alike the one of the sample answered from last.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from tcbreplay._replay.divergence import Divergence, describe
from tcbreplay._replay.fingerprint import (
    assemble,
    canonical_json,
    canonical_tools,
    message_entry,
)
from tcbreplay._replay.recording import Key, RecordedRun
from tcbreplay._replay.wire import Wire, WireRequest


class Alike:
    """What stands in for what, for one served recording (see the module)."""

    def __init__(self, recording: RecordedRun) -> None:
        self.recording = recording
        # (wire, tool name, the output's terms as JSON) -> the recorded tool message's
        # canonical content and its text as stored
        self._outputs: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._learnt: dict[tuple[str, Key], list[tuple[tuple[str, str, str], Any]]] = {}
        # (wire, sample) -> its tool messages by their place in its canonical messages:
        # (tool name, the output's terms as JSON, canonical content, text as stored)
        self._placed: dict[tuple[str, Key], dict[int, tuple[str, str, Any, Any]]] = {}
        # samples' own tool lists (canonical) by their stored text, the last few read
        self._lists: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def versions(self, keys: Iterable[Key]) -> tuple[str | None, ...]:
        """The tool lists a request of the samples of ``keys`` may stand for: each sample's
        own (as stored, once each, in the order of ``keys``), then the run's (None)."""
        found = dict.fromkeys(self.recording.own_tools_text(key) for key in keys)
        found.pop(None, None)
        return (*found, None)

    def tools(
        self, wire: Wire, tools: dict[str, Any], versions: tuple[str | None, ...] = (None,)
    ) -> dict[str, Any]:
        """A request's canonical tools, each alike to a recorded tool of its name that one:
        the first of ``versions`` (:meth:`versions`: the tools of the samples the request
        may be of, then the run's) that has a tool of its name alike to it."""
        if not wire.has_terms:
            return tools
        lists = [self._tool_list(text) for text in versions]
        out: dict[str, Any] = {}
        for name, tool in tools.items():
            for recorded in lists:
                mine = recorded.get(name)
                if mine is not None and (mine == tool or self._alike(wire, mine, tool)):
                    tool = mine
                    break
            out[name] = tool
        return out

    def _alike(self, wire: Wire, mine: dict[str, Any], tool: dict[str, Any]) -> bool:
        return _same(wire.tool_terms(mine, tool, True), wire.tool_terms(tool, mine))

    def _tool_list(self, text: str | None) -> dict[str, Any]:
        """A sample's own tools (canonical) from their stored text; None: the run's."""
        if text is None:
            return self.recording.tools
        found = self._lists.get(text)
        if found is None:
            schemas = json.loads(text)
            found = canonical_tools(schemas if isinstance(schemas, list) else [])
            self._lists[text] = found
            if len(self._lists) > 256:
                self._lists.popitem(last=False)
        return found

    def learn(self, wire: Wire, key: Key) -> None:
        """Know the tool outputs of the sample of ``key`` (answered from), before others'."""
        if wire.has_terms:
            self._outputs.update(self._read(wire, key))

    def _read(self, wire: Wire, key: Key) -> list[tuple[tuple[str, str, str], Any]]:
        """The tool outputs of the sample of ``key`` (read once)."""
        found = self._learnt.get((wire.name, key))
        if found is None:
            found = []
            placed = self._placed[(wire.name, key)] = {}
            stored = [json.loads(text) for text in self.recording.texts(key)]
            entries = [message_entry(m) for m in stored]
            _, items, _ = assemble(entries)
            skipped = len(stored) - len(items)
            for k, item in enumerate(items):
                if item["role"] == "tool":
                    terms = canonical_json(wire.output_terms(item["content"]))
                    raw = (stored[k + skipped].get("data") or {}).get("content")
                    found.append(((wire.name, str(item.get("name")), terms), (item["content"],
                                                                              raw)))  # fmt: skip
                    placed[k] = (str(item.get("name")), terms, item["content"], raw)
            self._learnt[(wire.name, key)] = found
        return found

    def outputs(
        self, wire: Wire, request: WireRequest, items: list[dict[str, Any]], parts: list[str],
        answered: Callable[[int], Key | None],
    ) -> None:  # fmt: skip
        """Each tool message of a request (its canonical ``items``, their JSON ``parts`` and
        ``request.messages``, changed in place) a recorded one alike to it; ``answered(k)``:
        the sample a conversation of the messages up to ``items[k]`` (an answer, the parts
        before it final) was answered from, if any. A conversation this server answered none
        of (begun with another server) is looked for among the samples that start as it does."""
        if not wire.has_terms:
            return
        skipped = len(request.messages) - len(items)
        last = max((k for k, item in enumerate(items) if item["role"] == "tool"), default=-1)
        key: Key | None = None
        for k, item in enumerate(items[: last + 1]):
            if item["role"] == "assistant":
                key = answered(k) or key
            if item["role"] != "tool":
                continue
            name = str(item.get("name"))
            terms = canonical_json(wire.output_terms(item["content"]))
            keys = [key] if key is not None else self.recording.starting().get(parts[0], [])
            found: tuple[Any, Any] | None = None
            for candidate in keys:
                self._read(wire, candidate)
                mine = self._placed[(wire.name, candidate)].get(k)
                if mine is not None and mine[:2] == (name, terms):
                    found = mine[2:]
                    break
            if found is None:
                found = self._outputs.get((wire.name, name, terms))
            if found is None or found[0] == item["content"]:
                continue
            items[k] = {**item, "content": found[0]}
            parts[k] = canonical_json(items[k])
            message = request.messages[k + skipped]
            request.messages[k + skipped] = message.model_copy(update={"content": found[1]})

    def tools_divergence(
        self, wire: Wire, divergence: Divergence, key: Key | None, tools: dict[str, Any]
    ) -> Divergence:
        """A divergence in the tools said in the wire's terms (where the tool differs in
        them, not where the client leaves a keyword out)."""
        if not wire.has_terms or divergence.component != "tools":
            return divergence
        recorded = self.recording.tools_of(key, divergence.turn)
        said = describe(
            divergence.turn,
            {"tools": {n: wire.tool_terms(t, tools.get(n), True) for n, t in recorded.items()}},
            {"tools": {n: wire.tool_terms(t, recorded.get(n)) for n, t in tools.items()}},
        )
        # (alike in the terms, the tools of another sample stood for them: said as they are)
        return said if said.component == "tools" else divergence


def _same(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)
