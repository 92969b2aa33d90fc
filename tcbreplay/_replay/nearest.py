"""A request no recorded turn answers, against the recorded ones: the nearest of them (of its
sample, or of the samples that start as it does), where it first differs (its divergence),
and whether it is the very request a recording failed at (which is answered as recorded:
with its error).

A request without its sample (``serve``, the recorded model outside a replay) is compared
with the samples whose first message is its own, else with those whose first message's text
is the closest to it (an edit distance of their heads only: see :data:`_NEAREST_CHARS`)."""

from __future__ import annotations

from typing import Any

from tcbreplay._replay.divergence import Divergence, describe, distance
from tcbreplay._replay.fingerprint import Request, assistant_turns, canonical_json
from tcbreplay._replay.recording import RecordedRun
from tcbreplay._replay.sample_rows import Key

# how many samples a request without its sample is compared with, to say where it differs
_NEAREST_SAMPLES = 200
# how much of a first message's text is weighed to find the nearest samples: an edit distance
# takes time as the product of the two texts' lengths (60 MB against a run's first messages
# took 34 s, the server answering nothing else meanwhile)
_NEAREST_CHARS = 4096


def ended_in_error(recording: RecordedRun, request: Request, key: Key | None = None) -> Key | None:
    """The sample and trial (of ``key`` only, when given; else of those that start as
    ``request`` does) whose recording ended in error at exactly ``request``: every turn
    before it answered, and this one failed (a provider's 5xx, a timeout). None for
    none."""
    turn = assistant_turns(request["messages"])
    for k in [key] if key is not None else similar_samples(recording, request):
        sample = recording.samples.get(k)
        if sample is None or sample.status != "error" or len(sample.turns) != turn:
            continue
        if recording.failed_request(k) == request:
            return k
    return None


def divergence_of(
    recording: RecordedRun, request: Request, key: Key | None, component: Any = None
) -> Divergence:
    """Where ``request``, which no recorded turn answers, first differs from the nearest
    recorded request (of its sample when ``key`` is given, else of samples that start
    as it does). ``component(path)`` may name the component of a path (tool_output)."""
    return nearest_request(recording, request, key, component)[1]


def nearest_request(
    recording: RecordedRun, request: Request, key: Key | None, component: Any = None
) -> tuple[tuple[Key, int] | None, Divergence]:
    """The nearest recorded request to ``request`` (its sample and trial, and turn; None
    when there is none to compare with) and where ``request`` first differs from it
    (see :func:`divergence_of`). The recorded requests are those answered and, of a sample
    whose recording ended in error, the one it failed at."""
    turn = assistant_turns(request["messages"])
    keys = [key] if key is not None else similar_samples(recording, request)
    best: tuple[Key, int] | None = None
    found: Request | None = None
    best_distance = None
    for k in keys:
        # the requests answered, and the one the recording failed at (a request that
        # differs from it diverges there, and is told how)
        failed = recording.failed_request(k)
        for number, recorded in enumerate([*recording.requests(k), *filter(None, [failed])]):
            here = distance(recorded, request)
            if best_distance is None or here < best_distance:
                best, found, best_distance = (k, number), recorded, here
    divergence = describe(turn, found, request)
    if component is not None and divergence.component == "messages":
        named = component(divergence.path)
        if named:
            divergence = Divergence(turn, named, divergence.path, divergence.recorded,
                                    divergence.replayed)  # fmt: skip
    return best, divergence


def similar_samples(recording: RecordedRun, request: Request) -> list[Key]:
    """The samples a request without its sample is compared with: those whose first
    message is the request's, else those whose first message's text is the closest
    to it (edit distance), at most :data:`_NEAREST_SAMPLES`."""
    from rapidfuzz import fuzz, process

    firsts = recording.firsts()
    messages = request["messages"]
    first = canonical_json(messages[0]) if messages else ""
    same = [key for key, text in firsts.items() if text == first]
    if same:
        recording.prefetch(same[:_NEAREST_SAMPLES])
        return same[:_NEAREST_SAMPLES]
    keys = list(firsts)
    heads = [text[:_NEAREST_CHARS] for text in firsts.values()]
    scorer: Any = fuzz.ratio
    if len(first) > _NEAREST_CHARS:  # its start weighed against each, as long as it
        first = first[:_NEAREST_CHARS]

        def scorer(head: str, text: str, **kwargs: Any) -> float:
            return fuzz.ratio(head[: len(text)], text, **kwargs)

    found = process.extract(first, heads, scorer=scorer,
                            limit=_NEAREST_SAMPLES // 10)  # fmt: skip
    nearest = [keys[i] for _, _, i in sorted(found, key=lambda hit: (-hit[1], hit[2]))]
    recording.prefetch(nearest)
    return nearest
