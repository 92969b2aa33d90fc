"""``serve``: a recorded run answering over HTTP, as OpenAI's (Chat Completions and Responses),
Anthropic's and Gemini's APIs, so that agents outside LangChain (an SDK in a loop, any
framework with a base URL) replay too.

Each request is read in its API's form (:mod:`tcbreplay._replay.routes`), made canonical and
fingerprinted as a replay's are (:mod:`tcbreplay._replay.fingerprint`), and answered with
the recorded turn of that fingerprint. A request that matches none gets HTTP 409 naming the
nearest recorded request (its sample, trial and turn) and the first difference from it.

Which conversation is which: HTTP requests carry no sample or trial, and several recorded
turns may share a fingerprint (every trial's first turn, samples of one input). A request
that carries an answer this server gave goes on in the sample and trial that answer came
from (its conversation is found by the messages up to that answer); a conversation's first
request, or one this server never answered before, takes the recorded turns of its
fingerprint in turn (the first such conversation trial 0, the next trial 1, and so on).

Sampling settings: a request's count only where the recording has that setting (a request
that sets another temperature than the recorded one diverges on ``params``); those it has
not (Anthropic's required ``max_tokens`` against a recording made without it) are left out,
but for ``response_format``, which asks for another answer (:data:`ASKED_ANSWER`); all are
left out of a recording whose model takes none (sim) or whose settings are unknown
(imports).

The HTTP server is :mod:`tcbreplay._replay.server`'s. A streamed answer is sent whole, as
events, with its length.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tcbreplay import _json
from tcbreplay._replay.alike import Alike
from tcbreplay._replay.choice import conflict
from tcbreplay._replay.divergence import Divergence, message_index
from tcbreplay._replay.fingerprint import (
    Request,
    assemble,
    assistant_turns,
    canonical_json,
    canonical_messages,
    canonical_tools,
    message_entry,
    request_text,
    sha256_text,
)
from tcbreplay._replay.kept import KeptAnswers
from tcbreplay._replay.nearest import ended_in_error, nearest_request
from tcbreplay._replay.recording import Key, RecordedRun, Turn
from tcbreplay._replay.routes import ENDPOINTS, WIRES
from tcbreplay._replay.sent import as_sent
from tcbreplay._replay.server import ReplayServer, Reply
from tcbreplay._replay.settings import not_finite, unanswerable, unrecorded
from tcbreplay._replay.wire import (
    Answer,
    MessageCache,
    Wire,
    WireError,
    WireRequest,
)
from tcbreplay._replay.wire_responses import ResponsesWire
from tcbreplay._store.schema import utcnow

# the settings that ask for another answer, not another way to sample it: counted where the
# recording has none too (its answers were not made to them), as a replay counts them
ASKED_ANSWER = ("response_format",)
# conversations' turns remembered (a conversation by its messages up to each answer), to
# tell which sample and trial a request goes on (the oldest are forgotten first)
CONVERSATIONS = 500_000


@dataclass
class Conversation:
    """A conversation this server answers: its recorded sample and trial, the turns served
    (turn, position of the recorded message), and where it diverged."""

    key: Key | None
    served: list[tuple[int, int]] = field(default_factory=list)
    divergence: Divergence | None = None
    thread: str | None = None  # the hash of its messages up to its last answer
    started_at: str = field(default_factory=lambda: utcnow().isoformat())
    log_slot: tuple[str, int] | None = None  # its sample and trial in the log run

    def goes_on_in(self, key: Key) -> None:
        """Answered from the recording of ``key``: no longer diverged, and served from here
        on when it went on in another sample."""
        if self.key != key:
            self.served = []
        self.key = key
        self.divergence = None


class ReplayService:
    """Answers requests from a recorded run (see the module); ``log``, when given, is told
    of every request answered and every divergence
    (:class:`~tcbreplay._replay.serve_log.ServeLog`)."""

    def __init__(self, recording: RecordedRun, log: Any = None) -> None:
        self.recording = recording
        self.log = log
        # what is held while serving: the served run's read lock (see serve_run)
        self.held = contextlib.ExitStack()
        # the samples by their first message, before the first request: a request's turns
        # are looked for among those that start as it does
        recording.starting()
        self._lock = threading.Lock()
        self._threads: OrderedDict[str, Conversation] = OrderedDict()
        self._started: dict[str, int] = {}  # fingerprint -> conversations begun with it
        # tool lists as sent (their JSON; on a wire of terms, with the recorded lists they may
        # stand for) -> canonical, and its canonical JSON: a client sends the same tools with
        # every request
        self._tools: OrderedDict[tuple[str, tuple[str | None, ...]],
                                 tuple[dict[str, Any], str]] = OrderedDict()  # fmt: skip
        self._messages = MessageCache()
        self._answers: OrderedDict[tuple[Key, int], tuple[dict[str, Any], str]] = OrderedDict()
        self._alike = Alike(recording)
        self._kept = KeptAnswers()
        self.served = 0
        self.diverged = 0

    def info(self) -> bytes:
        """What ``GET /`` answers: the run served, and the requests answered so far."""
        return json.dumps({
            "run_id": self.recording.run_id, "samples": len(self.recording.samples),
            "served": self.served, "diverged": self.diverged,
            "endpoints": ENDPOINTS,
        }).encode()  # fmt: skip

    def take_up(self, logged: dict[tuple[str, int], Any]) -> int:
        """Go on with the conversations a former server of the same log answered
        (:meth:`~tcbreplay._replay.serve_log.ServeLog.logged`): a request that continues one
        is its sample's same trial in the log, as it would have been without the restart
        (not a trial of its own). How many were taken up."""
        taken = 0
        for (sample_id, trial), found in logged.items():
            block = found.metadata.get("replay") or {}
            served = [tuple(pair) for pair in block.get("served") or []]
            parent_trial = block.get("parent_trial")
            key = (sample_id, parent_trial if isinstance(parent_trial, int) else -1)
            if found.status != "ok" or not served or key not in self.recording.samples:
                continue  # (a diverged one goes on diverging: no request of it matches)
            requests = list(self.recording.requests(key))
            asked = requests[min(served[-1][0], len(requests) - 1)] if requests else {}
            system, items, _ = canonical_messages(
                (json.loads(text) for text in found.texts), asked.get("system", "")
            )
            parts = [canonical_json(item) for item in items]
            system_json = canonical_json(system)
            thread = _thread(system_json, parts)
            conversation = Conversation(
                key, served, None, thread, found.started_at, (sample_id, trial)
            )
            # by its messages up to each answer: a request sent again (a client's retry
            # across the restart) goes on it too
            for k, item in enumerate(items):
                if item["role"] == "assistant":
                    self._threads[_thread(system_json, parts[: k + 1])] = conversation
            for wire in WIRES.values():  # (its tool outputs, as when it was answered)
                self._alike.learn(wire, key)
            taken += 1
        while len(self._threads) > CONVERSATIONS:
            self._threads.popitem(last=False)
        return taken

    def close(self) -> Any:
        """Close the log, if any (its summary, or None), and let the served run go."""
        log, self.log = self.log, None
        with self.held:
            return None if log is None else log.close()

    def handle(self, wire_name: str, body: bytes, target: str = "") -> Reply:
        """The reply to a request body sent to ``wire_name``'s path (``target``: the path as
        sent, with its query string)."""
        wire = WIRES[wire_name]
        with self._lock:
            try:
                request = wire.read(_body(body), self._messages, target)
            except WireError as exc:
                return Reply(exc.status, wire.error(exc.status, _one_line(str(exc)), exc.kind))
            said = unanswerable(request.schema_asked, request.json_asked, self.recording)
            said = said or unrecorded(request.as_recorded, self.recording)
            if said is not None:
                return Reply(400, wire.error(400, said))
            return self._answer(wire, request, self._canonical(request, wire))

    def retrieve(
        self, wire_name: str, answer_id: str, target: str = "", method: str = "GET"
    ) -> Reply:
        """The reply to ``GET`` (or ``DELETE``) of an answer this server gave, by its id (the
        Responses API's ``/v1/responses/{id}``; ``target``: the path as sent, with its query
        string)."""
        wire = WIRES[wire_name]
        with self._lock:
            assert isinstance(wire, ResponsesWire)
            if method == "DELETE":
                return self._kept.delete(wire, answer_id)
            return self._kept.reply(wire, answer_id, target.partition("?")[2])

    def cancel(self, wire_name: str, answer_id: str) -> Reply:
        """The reply to cancelling an answer this server gave, by its id (the Responses
        API's ``POST /v1/responses/{id}/cancel``)."""
        wire = WIRES[wire_name]
        with self._lock:
            assert isinstance(wire, ResponsesWire)
            return self._kept.cancel(wire, answer_id)

    def _canonical(self, request: WireRequest, wire: Wire) -> _Canonical:
        """A request in the canonical form, its messages' canonical JSON and fingerprint
        (built from the parts as :func:`~tcbreplay._replay.fingerprint.request_text` does,
        each message encoded once)."""
        recording = self.recording
        params: dict[str, Any] = {}
        if recording.params_known:
            given = {k: v for k, v in request.params.items() if k in recording.params
                     or (k in ASKED_ANSWER and recording.sampled)}  # fmt: skip
            params = {**recording.params, **given}
            if "response_format" in given:  # (in the form the recording's model sent one)
                params["response_format"] = recording.format_as_sent(given["response_format"])
        system, items, _ = assemble(request.entries)
        # each message's JSON as read, but a tool message's named by the call it answers
        known = {id(entry[1]): part for entry, part in zip(request.entries, request.parts,
                                                             strict=True)}  # fmt: skip
        parts = [known.get(id(item)) or canonical_json(item) for item in items]
        system_json = canonical_json(system)
        answered = self._answered(system_json, parts)
        self._alike.outputs(wire, request, items, parts, answered)
        tools, tools_json = self._canonical_tools(request.tools, wire, items, parts, answered)
        text = request_text(parts, canonical_json(params), system_json, tools_json)
        return _Canonical(
            {"system": system, "messages": items, "tools": tools, "params": params},
            parts,
            system_json,
            sha256_text(text),
        )

    def _answered(self, system_json: str, parts: list[str]) -> Callable[[int], Key | None]:
        """The sample the conversation of ``parts[: k + 1]`` was answered from, for rising
        ``k`` (the parts hashed once, as :func:`_thread` hashes them, when first asked)."""
        digest = None
        done = 0

        def answered(k: int) -> Key | None:
            nonlocal digest, done
            if digest is None:
                digest = hashlib.sha256((system_json + "[").encode("utf-8", "surrogatepass"))
            for part in parts[done : k + 1]:
                digest.update((("," if done else "") + part).encode("utf-8", "surrogatepass"))
                done += 1
            ended = digest.copy()
            ended.update(b"]")
            found = self._threads.get(ended.hexdigest())
            return None if found is None else found.key

        return answered

    def _canonical_tools(
        self, specs: list[dict[str, Any]], wire: Wire, items: list[dict[str, Any]],
        parts: list[str], answered: Callable[[int], Key | None],
    ) -> tuple[dict[str, Any], str]:  # fmt: skip
        """A request's tools in the canonical form, and its canonical JSON; on a wire of
        terms, those alike to a recorded tool that one (of the sample the conversation was
        answered from, else of those that start as it does, else the run's)."""
        versions: tuple[str | None, ...] = (None,)
        if wire.has_terms:
            last = max((k for k, item in enumerate(items) if item["role"] == "assistant"),
                       default=None)  # fmt: skip
            key = answered(last) if last is not None else None
            keys = [key] if key is not None else self.recording.starting().get(
                parts[0] if parts else "", [])  # fmt: skip
            versions = self._alike.versions(keys)
        sent = (wire.name + json.dumps(specs), versions)
        found = self._tools.get(sent)
        if found is None:
            tools = self._alike.tools(wire, canonical_tools(specs), versions)
            found = self._tools[sent] = (tools, canonical_json(tools))
            if len(self._tools) > 64:
                self._tools.popitem(last=False)
        return found

    def _answer(self, wire: Wire, request: WireRequest, canonical: _Canonical) -> Reply:
        items = canonical.request["messages"]
        turn = assistant_turns(items)
        conversation = self._conversation(canonical) if turn else None
        hit = self._match(canonical.fingerprint, canonical.parts[0] if items else "", turn,
                          conversation)  # fmt: skip
        if conversation is None:
            conversation = Conversation(hit[0] if hit else None)
        if hit is None:
            failed = ended_in_error(self.recording, canonical.request, conversation.key)
            if failed is not None:  # answered as recorded: with its error (no divergence)
                return self._recorded_error(wire, request, conversation, failed)
            return self._diverged(wire, request, canonical, conversation, turn)
        key, recorded = hit
        message, part = self._recorded(key, recorded.position)
        made = [str(c.get("name")) for c in (message.get("data") or {}).get("tool_calls") or []]
        refused = conflict(turn, request.choice, made)
        if refused is not None:  # the request forbids what the recorded turn did
            return self._diverged(wire, request, canonical, conversation, turn,
                                  (key, turn, refused))  # fmt: skip
        conversation.goes_on_in(key)
        self._alike.learn(wire, key)
        conversation.served = [s for s in conversation.served if s[0] < turn]
        conversation.served.append((turn, recorded.position))
        self._remember(conversation, canonical, part)
        if self.log is not None:
            self.log.served(conversation, request.messages, message)
        answer = Answer.of(message, turn)
        self._messages.calls.answered([call[0] for call in answer.calls])
        self._kept.keep(wire, answer, request)
        if request.stream:
            reply = Reply(200, wire.stream(answer, request), "text/event-stream")
        else:
            reply = Reply(200, wire.answer(answer, request))
        self.served += 1  # (counted once answered: a request that failed is no served one)
        return reply

    def _match(
        self, print_: str, first: str, turn: int, conversation: Conversation | None
    ) -> tuple[Key, Turn] | None:
        """The recorded turn that answers a request of this fingerprint, whose first message
        is ``first``, holding ``turn`` answers (see the module)."""
        if conversation is not None and conversation.key is not None:
            mine = self.recording.lookup(print_, conversation.key)
            if mine is not None:
                return mine
        found = self.recording.matches(print_, first, turn)
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        n = self._started.get(print_, 0)
        self._started[print_] = n + 1
        return found[n % len(found)]

    def _conversation(self, canonical: _Canonical) -> Conversation | None:
        """The conversation a request goes on, found by its messages up to its last answer."""
        items = canonical.request["messages"]
        last = max(k for k, item in enumerate(items) if item["role"] == "assistant")
        return self._threads.get(_thread(canonical.system_json, canonical.parts[: last + 1]))

    def _recorded(self, key: Key, position: int) -> tuple[dict[str, Any], str]:
        """A recorded message, and its canonical JSON (the last few kept)."""
        found = self._answers.get((key, position))
        if found is None:
            message = self.recording.message(key, position)
            found = (message, canonical_json(message_entry(message)[1]))
            self._answers[(key, position)] = found
            if len(self._answers) > 4096:
                self._answers.popitem(last=False)
        return found

    def _remember(self, conversation: Conversation, canonical: _Canonical, answer: str) -> None:
        """The conversation found again by its messages up to this answer; by those up to
        its earlier answers too (kept): a request sent again (a client's retry after a
        timeout) goes on the same conversation, not a new trial."""
        thread = _thread(canonical.system_json, [*canonical.parts, answer])
        conversation.thread = thread
        self._threads[thread] = conversation
        self._threads.move_to_end(thread)
        while len(self._threads) > CONVERSATIONS:
            self._threads.popitem(last=False)

    def _recorded_error(
        self, wire: Wire, request: WireRequest, conversation: Conversation, key: Key
    ) -> Reply:
        """The reply to a request whose recording ended in an error there: a 502 (the
        provider failed; on a wire whose clients retry it, a status they do not) saying
        which, as replay ends such a sample in its recorded error (and the log's
        conversation ends in it too)."""
        kind, text = self.recording.samples[key].error
        conversation.goes_on_in(key)
        if self.log is not None:
            self.log.failed(conversation, request.messages, (kind, text))
        message = (f"sample {key[0]!r} (trial {key[1]}): its recording ended here in an error "
                   f"({kind}: {' '.join(str(text).split())[:500]})")  # fmt: skip
        self.served += 1  # (answered as recorded)
        status = wire.recorded_error_status
        return Reply(status, wire.error(status, message, "api_error"))

    def _diverged(
        self, wire: Wire, request: WireRequest, canonical: _Canonical, conversation: Conversation,
        turn: int, refused: tuple[Key, int, Divergence] | None = None,
    ) -> Reply:  # fmt: skip
        """The 409 of a request no recorded turn answers, or (``refused``: the sample, turn
        and divergence) one whose turn it forbids."""
        items = canonical.request["messages"]
        where: tuple[Key, int] | None
        if refused is not None:
            where, divergence = (refused[0], refused[1]), refused[2]
        else:
            where, divergence = nearest_request(self.recording, canonical.request,
                                                conversation.key, _tool_output(items))  # fmt: skip
            key = where[0] if where is not None else conversation.key
            divergence = self._alike.tools_divergence(wire, divergence, key,
                                                      canonical.request["tools"])  # fmt: skip
        if conversation.key is None and where is not None:
            conversation.key = where[0]
        conversation.divergence = divergence
        if self.log is not None:
            self.log.diverged(conversation, request.messages)
        self.diverged += 1
        nearest = None
        if where is not None:
            (sample_id, trial), number = where
            nearest = {"sample_id": sample_id, "trial": trial, "turn": number}
        # (the log keeps the canonical request's path, as replay's divergences have it)
        said, line = as_sent(divergence, items, request, wire.name)
        message = f"no recorded turn answers this request: {line}"
        if nearest is not None:
            message += f" (nearest: sample {nearest['sample_id']}, trial {nearest['trial']}, "
            message += f"turn {nearest['turn']})"
        body = wire.error(409, _one_line(message), "divergence", nearest=nearest,
                          divergence=said.to_dict())  # fmt: skip
        return Reply(409, body)


@dataclass
class _Canonical:
    request: Request
    parts: list[str]  # each message's canonical JSON
    system_json: str
    fingerprint: str


def _thread(system_json: str, parts: list[str]) -> str:
    """The hash of a conversation: its system prompt and messages (canonical JSON)."""
    return sha256_text(system_json + "[" + ",".join(parts) + "]")


def _tool_output(items: list[dict[str, Any]]) -> Callable[[str], str | None]:
    """Names a difference inside a tool message's content ``tool_output``: the client's
    tool answered otherwise than the recorded one."""

    def name(path: str) -> str | None:
        i = message_index(path)
        if i is None or i >= len(items) or items[i].get("role") != "tool":
            return None
        return "tool_output" if path.startswith(f"messages[{i}].content") else None

    return name


def _body(body: bytes) -> dict[str, Any]:
    try:
        value = _json.loads(body)
    except ValueError as exc:  # JSONDecodeError and LimitError are ValueErrors
        raise WireError(f"the request body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise WireError("the request body must be a JSON object")
    # (Python's reader takes NaN and Infinity, which no JSON holds and the APIs refuse)
    if (b"NaN" in body or b"Infinity" in body) and (where := not_finite(value)) is not None:
        raise WireError(f"{where}: NaN and Infinity are no JSON numbers")
    # half a UTF-16 pair gets in only by an escape (alone, it is no text the log can keep)
    if b"\\u" in body and _json.lone_surrogate(value):
        raise WireError(
            "the request body holds half a surrogate pair (such as \\ud800): not Unicode text"
        )
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


def serve_run(
    store: Any, run_id: str, *, host: str = "127.0.0.1", port: int = 0,
    log_run: str | None = None, verbose: bool = False,
) -> ReplayServer:  # fmt: skip
    """A server of run ``run_id`` of ``store`` (a Store or its path), not started yet: use it
    as a context manager (it serves in a thread), or call :meth:`ReplayServer.serve_forever`.
    ``log_run``: the run it logs to (:mod:`tcbreplay._replay.serve_log`). Loopback only
    unless ``host`` says otherwise."""
    from tcbreplay._replay.serve_log import ServeLog
    from tcbreplay._store.runs import Store

    store = store if isinstance(store, Store) else Store(store)
    parent = store.open_run(run_id)
    with contextlib.ExitStack() as held:
        # read, as score and export read a run: record --overwrite cannot delete it meanwhile
        held.enter_context(parent.reading())
        recording = RecordedRun.load(parent)
        service = ReplayService(recording)
        # bound before the log run is made: a port that cannot be had leaves the store as it was
        server = ReplayServer(service, host, port, verbose)
        service.held.enter_context(held.pop_all())
    if log_run is not None:
        try:
            service.log = ServeLog.open(store, parent, recording, log_run)
            # a server of this log before (killed, or stopped): its conversations go on
            service.take_up(service.log.logged())
        except BaseException:
            server.close()
            raise
    return server
