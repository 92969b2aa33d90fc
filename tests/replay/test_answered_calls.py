"""Which calls serve answered together (the Responses wire reads calls sent back each
followed by its output by it)."""

from __future__ import annotations

from tcbreplay._replay.calls import AnsweredCalls


def test_the_calls_of_one_answer_are_together_however_many():
    # by pairs, an answer of 300 calls made 44,850 of them: past the 20,000 kept, its first
    # calls were forgotten, and read back as turns of their own (a false 409)
    calls = AnsweredCalls()
    ids = [f"call_{k}" for k in range(300)]
    calls.answered(ids)
    assert calls.together("call_0", "call_299")
    assert calls.together("call_150", "call_1")


def test_calls_of_other_answers_or_alone_are_not_together():
    calls = AnsweredCalls()
    calls.answered(["a", "b"])
    calls.answered(["c", "d"])
    calls.answered(["e"])
    assert not calls.together("a", "c")
    assert not calls.together("a", "a")
    assert not calls.together("e", "a")
    assert not calls.together("x", "y")


def test_the_oldest_calls_are_forgotten_first():
    calls = AnsweredCalls(size=4)
    calls.answered(["a", "b"])
    calls.answered(["c", "d"])
    calls.answered(["e", "f"])
    assert not calls.together("a", "b")
    assert calls.together("c", "d") and calls.together("e", "f")
