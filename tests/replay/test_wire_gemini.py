"""How the Gemini wire pairs responses with calls that carry no ids: by id where given, else
the first open call of the name, in time linear in the parts."""

from __future__ import annotations

import time

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


def _best(n: int) -> float:
    body = contents(n)
    times = []
    for _ in range(2):
        began = time.perf_counter()
        _units_of(body)
        times.append(time.perf_counter() - began)
    return min(times)


def test_pairing_takes_time_linear_in_the_parts():
    """Each response looked through every open call: 40000 calls and responses took
    minutes (8 times the parts, some 40 times the time)."""
    small, large = _best(2000), _best(16000)
    assert large / small < 20, (small, large)
