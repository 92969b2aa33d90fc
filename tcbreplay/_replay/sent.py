"""Where a divergence lies in the request body a client of ``serve`` sent.

A divergence's path indexes the canonical request (:mod:`tcbreplay._replay.fingerprint`): its
messages without the system messages it starts with, each tool_result block of an Anthropic
user turn a message of its own. A client reads its 409 against the body it sent: there the
path names the same message (``messages[3]``; on Anthropic's form a tool_result block,
``messages[2].content[1]``; on Gemini's a part, ``contents[2].parts[0]``), then the part of
it as the canonical form has it (``.content.result``: inside the JSON its tool answered; on
Gemini's form ``.functionResponse.response.result``); a difference inside the schema a
Gemini request's answer must follow is named by its field
(``generationConfig.responseJsonSchema.properties.city``). Tool results given in another
order than the calls they answer are said so, by the calls' ids: which result answers which
call is part of what the model reads, so the recording answers them in its own order only;
a result that answers another call than the recorded one is named at the API's field of the
call it answers (``tool_use_id``), the recorded and sent calls' ids for values.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from tcbreplay._replay.divergence import Divergence, message_index
from tcbreplay._replay.wire import WireRequest


def as_sent(
    divergence: Divergence, items: list[dict[str, Any]], request: WireRequest, wire: str
) -> tuple[Divergence, str]:
    """``divergence`` of ``request`` (whose canonical messages are ``items``) with its path
    into the body as sent (see the module), and its line for a person."""
    schema = "params.response_format.schema"
    if request.schema_asked and (divergence.path + ".").startswith((schema + ".", schema + "[")):
        # (in the schema the request gave: its field, as the body names it)
        moved = replace(divergence, path=request.schema_asked + divergence.path[len(schema) :])
        return moved, moved.line()
    index = message_index(divergence.path)
    listed = _LISTS.get(wire, "messages")  # the body's list of messages
    if divergence.path == "messages" and listed != "messages":  # (the list as a whole)
        moved = replace(divergence, path=listed)
        return moved, moved.line()
    places = [] if index is None else request.places()
    if index is None or not places:
        return divergence, divergence.line()
    kept = _items(request)  # the entry of each canonical message
    rest = divergence.path[len(f"messages[{index}]") :]
    if index >= len(kept):  # a message the recording has after the request's last one
        moved = replace(divergence, path=_after(divergence, items, places, listed, request.sent)
                        + rest)  # fmt: skip
        return moved, moved.line()
    if rest == ".call":
        found = _reordered(divergence, items, request, places, kept, index, wire)
        if found is not None:
            return found
        block = _left_out(divergence, items, places, kept, index)
        if block is not None:
            moved = replace(divergence, path=block)
            return moved, moved.line()
        named = _by_id(divergence, items, request, places, kept, index, wire)
        if named is not None:  # (another call answered: the first result left out, say)
            return named, named.line()
    place = places[kept[index]]
    path = request.inside(place, rest) if request.inside is not None else place + rest
    moved = replace(divergence, path=path)
    return moved, moved.line()


# the body's list of messages, where a wire names it otherwise than ``messages``
_LISTS = {"gemini": "contents", "responses": "input"}


def _after(
    divergence: Divergence, items: list[dict[str, Any]], places: list[str], listed: str,
    sent: int,
) -> str:  # fmt: skip
    """Where the message the recording has after the request's last one would be in the
    body: the next block of the last message's content when both are tool results and that
    content holds its results as blocks (Anthropic's tool_result blocks, Gemini's
    functionResponse parts), else the next entry of the body's list."""
    try:
        recorded = json.loads(divergence.recorded or "null")
    except ValueError:
        recorded = None
    tool = isinstance(recorded, dict) and recorded.get("role") == "tool"
    block = _next_block(places[-1])
    if tool and items and items[-1].get("role") == "tool" and block is not None:
        return block
    return f"{listed}[{sent}]"


def _next_block(place: str) -> str | None:
    """The place of the block after ``place`` in its message's content, where that content
    holds its tool results as blocks (``messages[2].content[0]``: ``messages[2].content[1]``),
    else None."""
    found = re.fullmatch(r"(.+\.(?:parts|content))\[(\d+)\]", place)
    return f"{found[1]}[{int(found[2]) + 1}]" if found is not None else None


def _left_out(
    divergence: Divergence, items: list[dict[str, Any]], places: list[str], kept: list[int],
    index: int,
) -> str | None:  # fmt: skip
    """Where the tool result the recording has at ``index`` would be in the body, when the
    request left it out and went on (its message there is no tool's): the next block of
    the content holding the results before it (Anthropic's, Gemini's), else the request's
    message there (the whole wave left out, or on a wire of one message a result); None
    when the request has a tool message there."""
    if divergence.replayed is not None or items[index].get("role") == "tool":
        return None
    block = None
    if index > 0 and items[index - 1].get("role") == "tool":
        block = _next_block(places[kept[index - 1]])
    return block if block is not None else places[kept[index]]


def _items(request: WireRequest) -> list[int]:
    """The entry each canonical message is: every one but the system messages the request
    starts with (as :func:`~tcbreplay._replay.fingerprint.assemble` takes them)."""
    out: list[int] = []
    for k, entry in enumerate(request.entries):
        if entry[0] == "system" and not out:
            continue
        out.append(k)
    return out


def _calls_before(
    items: list[dict[str, Any]], request: WireRequest, kept: list[int], index: int
) -> tuple[int, dict[int, tuple[str, str]]]:
    """Where the run of tool messages holding ``index`` starts, and the calls of the message
    before it by their places in it (each one's id and name; none where the run starts the
    request)."""
    first = index
    while first > 0 and items[first - 1].get("role") == "tool":
        first -= 1
    if first == 0:
        return first, {}
    made = request.entries[kept[first - 1]][3]
    return first, {place: (call_id, name) for call_id, (name, place) in made.items()}


def _by_id(
    divergence: Divergence, items: list[dict[str, Any]], request: WireRequest, places: list[str],
    kept: list[int], index: int, wire: str,
) -> Divergence | None:  # fmt: skip
    """``divergence`` of a tool message that answers another call than the recorded one
    there, or none of the calls (its path ``.call``, the calls' places in the message before
    for values), at the API's field of the call a result answers with the recorded and sent
    calls' ids for values; on Gemini's form its functionResponse's ``id`` where it gave a
    call's, else its ``name`` with the calls' names (Gemini's calls need no ids). None where
    the recorded value is no call of the message before the results."""
    _, calls = _calls_before(items, request, kept, index)
    try:
        recorded = json.loads(divergence.recorded or "")
    except ValueError:
        return None
    if items[index].get("role") != "tool" or type(recorded) is not int or recorded not in calls:
        return None
    was_id, was_name = calls[recorded]
    given = request.entries[kept[index]][2]
    place = places[kept[index]]
    if wire == "gemini":
        path = request.inside(place, ".call") if request.inside is not None else place
        if not path.endswith(".id"):
            name = items[index].get("name")
            return replace(divergence, path=path, recorded=json.dumps(was_name),
                           replayed=None if name is None else json.dumps(name))  # fmt: skip
    else:
        key = {"anthropic": "tool_use_id", "responses": "call_id"}.get(wire, "tool_call_id")
        path = f"{place}.{key}"
    return replace(divergence, path=path, recorded=json.dumps(was_id),
                   replayed=None if given is None else json.dumps(given))  # fmt: skip


def _reordered(
    divergence: Divergence, items: list[dict[str, Any]], request: WireRequest, places: list[str],
    kept: list[int], index: int, wire: str,
) -> tuple[Divergence, str] | None:  # fmt: skip
    """The divergence of a tool message that answers another call than the recorded one
    there, said as results in another order than the calls, when its run of tool messages
    answers distinct calls of the message before it out of their order; else None."""
    first, calls = _calls_before(items, request, kept, index)
    last = index
    while last + 1 < len(items) and items[last + 1].get("role") == "tool":
        last += 1
    answered = [c for j in range(first, last + 1) if isinstance(c := items[j].get("call"), int)]
    if first == 0 or len(answered) <= last - first or len(set(answered)) < len(answered):
        return None  # (a result that answers no call of it, or two that answer one)
    if answered == sorted(answered):  # (in order: another call, not another order)
        return None
    moved = _by_id(divergence, items, request, places, kept, index, wire)
    given = request.entries[kept[index]][2]
    if moved is None or given is None:
        return None
    was_id, was_name = calls[json.loads(divergence.recorded or "")]
    name = items[index].get("name")
    place = places[kept[index]]
    if moved.path.endswith(".name"):  # (Gemini's calls, by name)
        said = (str(name), was_name)
    else:
        said = (f"{given} ({name})", f"{was_id} ({was_name})")
    line = (
        f"turn {divergence.turn}: tool results in another order than the calls of "
        f"{places[kept[first - 1]]}: {place} answers {said[0]} where the recording's "
        f"answered {said[1]}; give the results in the calls' order"
    )
    return moved, line
