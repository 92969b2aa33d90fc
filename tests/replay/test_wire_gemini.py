"""How the Gemini wire pairs responses with calls that carry no ids: by id where given, else
the first open call of the name, in time linear in the parts."""

from __future__ import annotations

import sys

from tcbreplay._replay.wire_gemini import _units_of


def contents(n: int) -> list[dict]:
    calls = [{"functionCall": {"name": "f", "args": {"i": i}}} for i in range(n)]
    answers = [{"functionResponse": {"name": "f", "response": {}}}] * n
    return [{"role": "user", "parts": [{"text": "a"}]}, {"role": "model", "parts": calls},
            {"role": "user", "parts": answers}]  # fmt: skip


def test_responses_answer_the_call_of_their_id_else_the_first_open_of_their_name():
    calls = [{"functionCall": {"name": "f", "args": {}}},
             {"functionCall": {"name": "g", "args": {}, "id": "x"}},
             {"functionCall": {"name": "f", "args": {}}}]  # fmt: skip
    answers = [{"functionResponse": {"name": "g", "response": {}, "id": "x"}},
               {"functionResponse": {"name": "f", "response": {}}},
               {"functionResponse": {"name": "f", "response": {}}},
               {"functionResponse": {"name": "f", "response": {}}}]  # fmt: skip
    asked = {"role": "user", "parts": [{"text": "a"}]}
    units = _units_of(
        [asked, {"role": "model", "parts": calls}, {"role": "user", "parts": answers}]
    )
    assert units[1]["ids"] == ["call_1_0", "x", "call_1_2"]
    assert units[2]["ids"] == ["x", "call_1_0", "call_1_2", ""]


def test_pairing_takes_time_linear_in_the_parts():
    """Each response looked through every open call: 40000 calls and responses took
    minutes (8 times the parts, some 40 times the time). The lines the wire runs are
    counted, not timed: a count does not move with the machine's load."""
    small, large = _lines_run(2000), _lines_run(16000)
    assert large / small < 12, (small, large)


def _lines_run(n: int) -> int:
    """The lines of the Gemini wire's modules run to read ``n`` calls and their responses."""
    body = contents(n)
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if "_replay" not in frame.f_code.co_filename:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        _units_of(body)
    finally:
        sys.settrace(None)
    return count
