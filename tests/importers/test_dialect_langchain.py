"""The langchain dialect (``tcbreplay._importers.langchain``): JSON Lines whose messages are
LangChain's message dicts; the fallback for a first line whose messages tell no dialect."""

from __future__ import annotations

import json

from helpers import TEST_DATA

from tcbreplay._importers import langchain
from tcbreplay._importers.dialect import GUESS, TraceFile

SHAPES = TEST_DATA / "import" / "traces_shapes.jsonl"


def file_of(*lines: dict) -> TraceFile:
    return TraceFile("t.jsonl", data="".join(json.dumps(x) + "\n" for x in lines).encode())


def test_it_sniffs_langchains_message_dicts():
    verdict = langchain.sniff(TraceFile.at(SHAPES))
    assert (verdict.confidence, verdict.reason) == (
        0.9, "its messages are LangChain dicts (type, data)"
    )  # fmt: skip


def test_it_is_the_fallback_for_messages_that_tell_no_dialect():
    verdict = langchain.sniff(file_of({"sample_id": 0, "messages": []}))
    assert 0 < verdict.confidence < GUESS


def test_it_does_not_take_messages_with_roles():
    verdict = langchain.sniff(file_of({"sample_id": 0, "messages": [{"role": "user"}]}))
    assert not verdict.fits
    assert verdict.reason == "its messages have roles, not LangChain's type and data"


def test_it_reads_a_sample_per_line_from_the_bytes():
    source = langchain.read(TraceFile(SHAPES.name, data=SHAPES.read_bytes()), None)
    assert [line.sample_id for line in source.lines] == ["0", "catalog-then-multiply", "7"]
    assert source.dataset is None
    assert source.lines[0].messages[0]["type"] == "system"


def test_token_counts_that_are_no_counts_are_refused_with_their_place():
    """LangChain reads true as 1 and "5" as 5: they were stored so."""
    import pytest

    from tcbreplay.errors import TraceError

    for n in (True, "5", 2.5):
        ai = {"type": "ai", "data": {"content": "hi", "usage_metadata": {
            "input_tokens": n, "output_tokens": 1, "total_tokens": 2}}}  # fmt: skip
        line = {"sample_id": "s0", "messages": [{"type": "human", "data": {"content": "?"}}, ai]}
        with pytest.raises(TraceError, match=r"line 1: message 1: usage_metadata\.input_tokens "):
            langchain.read(file_of(line), None)
