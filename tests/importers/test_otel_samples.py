"""Spans as samples (``tcbreplay._importers.otel.samples``), the part every span dialect
shares: messages stored as LangChain would store them, one conversation out of many model
calls, tool runs filling what the model calls do not say."""

from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA
from langchain_core.messages import message_to_dict, messages_from_dict

from tcbreplay._importers import otlp
from tcbreplay._importers.dialect import TraceFile
from tcbreplay._importers.otel.calls import Call, Message, ToolRun, Turn
from tcbreplay._importers.otel.conversation import conversation
from tcbreplay.errors import TcbReplayWarning, TraceError

OTEL = TEST_DATA / "otel"
FIXTURES = sorted(p.name for p in OTEL.glob("*.otlp.*"))


@pytest.mark.parametrize("name", FIXTURES)
def test_messages_are_stored_as_langchain_stores_them(name):
    """The stored JSON is written without LangChain's classes (for speed): read back by
    LangChain and written again, every message is the same text."""
    source = otlp.read(TraceFile.at(OTEL / name), None)
    for line in source.lines:
        for m in line.messages:
            data = json.loads(m["message"])
            (again,) = messages_from_dict([data])
            assert message_to_dict(again) == data, name
            assert m["type"] == data["type"]


def turn(span_id: str, inputs: list[Message], outputs: list[Message], start: int) -> Turn:
    return Turn(span_id=span_id, start=start, inputs=inputs, outputs=outputs)


USER = Message("user", "What is 2 + 3?")
CALL = Message("assistant", "", [Call("c1", "add_numbers", {"a": 3, "b": 2})])
RESULT = Message("tool", "5", call_id="c1")
ANSWER = Message("assistant", "5.")


def roles(entries) -> list[str]:
    return [e.message.role for e in entries]


def test_each_model_calls_history_is_laid_out_once():
    entries = conversation(
        [turn("a", [USER], [CALL], 1), turn("b", [USER, CALL, RESULT], [ANSWER], 2)], []
    )
    assert roles(entries) == ["user", "assistant", "tool", "assistant"]


def test_a_history_cut_to_its_last_messages_joins_where_it_overlaps():
    more = Message("user", "And times 4?")
    call2 = Message("assistant", "", [Call("c2", "multiply_numbers", {"a": 5, "b": 4})])
    entries = conversation(
        [
            turn("a", [USER], [CALL], 1),
            turn("b", [USER, CALL, RESULT], [ANSWER], 2),
            turn("c", [RESULT, ANSWER, more], [call2], 3),  # a window of the last three
        ],
        [],
    )
    assert roles(entries) == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_results_no_model_call_was_sent_come_from_the_tool_runs():
    run = ToolRun(span_id="t", start=2, name="add_numbers", call_id="c1", args=None, result="5")
    entries = conversation([turn("a", [USER], [CALL], 1)], [run])
    assert roles(entries) == ["user", "assistant", "tool"]
    assert (entries[-1].message.text, entries[-1].run) == ("5", run)


def test_without_messages_the_tool_runs_tell_the_calls(tmp_path):
    """Content capture off on the model calls, on the tool runs (as execute_tool writes its
    arguments): the calls come from the tool runs, in the order they ran."""
    lines = []
    for raw in (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines():
        doc = json.loads(raw)
        for rs in doc.get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["attributes"] = [
                        a for a in span["attributes"]
                        if a["key"] not in ("gen_ai.input.messages", "gen_ai.output.messages")
                    ]  # fmt: skip
        lines.append(json.dumps(doc))
    path = tmp_path / "no-content.jsonl"
    path.write_text("\n".join(lines) + "\n")
    source = otlp.read(TraceFile.at(path), None)
    calls = [
        [(c["name"], c["args"]) for m in map(json.loads, (x["message"] for x in line.messages))
         if m["type"] == "ai" for c in m["data"]["tool_calls"]]
        for line in source.lines
    ]  # fmt: skip
    assert calls == [
        [("multiply_numbers", {"a": 7, "b": 9})],
        [("list_items", {})],
        [("list_items", {}), ("add_numbers", {"a": 25.0, "b": 8.0}),
         ("add_numbers", {"a": 33.0, "b": 1.2})],
    ]  # fmt: skip


def test_a_model_call_inside_another_is_the_same_call_read_once():
    """OpenInference's LangChain span around openai-v2's chat span: one call, two spans."""
    from tcbreplay._importers.otel.grouping import groups
    from tcbreplay._importers.otel.samples import build
    from tcbreplay._importers.otel.spans import Span

    outer = Span("t" * 32, "a" * 16, "", "ChatOpenAI", 1, 9, {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "What is 2 + 3?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "5.",
    })  # fmt: skip
    inner = Span("t" * 32, "b" * 16, "a" * 16, "chat gpt-4o", 2, 8, {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "What is 2 + 3?"}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "5."}]}]
        ),
    })  # fmt: skip
    (group,) = groups([outer, inner])
    built = build(group, "trace", "t.json")
    assert [m["type"] for m in built.line.messages] == ["human", "ai"]


def test_a_failed_tool_run_answers_its_call_with_its_error(tmp_path):
    """openai-v2's spans with two tool runs failed (status ERROR): one without a result and
    no later model call (its call was left unanswered, the error stored nowhere), one whose
    result a later model call was sent (its tool message said success)."""
    lines = []
    for raw in (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines():
        doc = json.loads(raw)
        for rs in doc.get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                kept = []
                for span in ss["spans"]:
                    first = span["traceId"].startswith("16ec9d")
                    if span["name"].startswith("execute_tool") and first:
                        span["status"] = {"code": 2, "message": "bad input"}
                        span["attributes"] = [
                            a for a in span["attributes"] if a["key"] != "gen_ai.tool.call.result"
                        ] + [{"key": "error.type", "value": {"stringValue": "ValueError"}}]
                    elif span["name"].startswith("execute_tool list_items"):
                        span["status"] = {"code": 2, "message": "timed out"}
                    sent = [a for a in span["attributes"] if a["key"] == "gen_ai.input.messages"]
                    if first and sent and '"role":"tool"' in sent[0]["value"]["stringValue"]:
                        continue  # the model call after the tool run: none
                    kept.append(span)
                ss["spans"] = kept
        lines.append(json.dumps(doc))
    path = tmp_path / "failed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    source = otlp.read(TraceFile.at(path), None)
    tools = {
        line.sample_id[:6]: [m["data"] for m in map(json.loads, (x["message"] for x in
                             line.messages)) if m["type"] == "tool"]
        for line in source.lines
    }  # fmt: skip
    (failed,) = tools["16ec9d"]
    assert (failed["content"], failed["status"], failed["name"]) == (
        "bad input",
        "error",
        "multiply_numbers",
    )
    assert [m["status"] for m in tools["b4b4b9"]] == ["error"]
    assert [m["status"] for m in tools["229807"]] == ["error", "success", "success"]


def first_trace(change) -> TraceFile:
    """The first trace of openai_v2_latest (chat, execute_tool, chat, invoke_agent: its four
    requests) with ``change(spans)`` made to its spans, as a file ``t.jsonl``."""
    lines = (OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()[:4]
    docs = [json.loads(line) for line in lines]
    change([d["resourceSpans"][0]["scopeSpans"][0]["spans"][0] for d in docs])
    return TraceFile("t.jsonl", data="".join(json.dumps(d) + "\n" for d in docs).encode())


def _attribute(span: dict, key: str, value: str) -> None:
    kept = [a for a in span["attributes"] if a["key"] != key]
    span["attributes"] = [*kept, {"key": key, "value": {"stringValue": value}}]


def _answers_without_calling(spans):
    """The model answers at once, in text; the tool run is still in the trace."""
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]
    _attribute(spans[0], "gen_ai.output.messages", json.dumps(answer))
    spans[2]["attributes"] = []  # (the second model call: none)


def test_a_tool_run_the_model_never_asked_for_is_no_call_of_its_agent():
    """Model calls holding messages but no calls: the tool run was made an agent call (and
    scored as one) instead of being left out as a run that answers no call."""
    with pytest.warns(TcbReplayWarning) as caught:
        source = otlp.read(first_trace(_answers_without_calling), None)
    (line,) = source.lines
    data = [json.loads(m["message"]) for m in line.messages]
    assert [m["type"] for m in data] == ["system", "human", "ai"]
    assert data[-1]["data"]["tool_calls"] == []
    [said] = [str(w.message) for w in caught]
    assert "1 tool runs answer no call its model made, left out of the sample's messages: " in said
    assert said.endswith("multiply_numbers (call_0_0_0)")


def test_an_agent_span_whose_model_calls_are_unseen_is_told_by_its_tool_runs(recwarn):
    """No model call span, the agent span holding the question and the final answer: its tool
    runs are its calls (the model that asked for them was not traced)."""

    def agent_only(spans):
        spans[0]["attributes"] = spans[2]["attributes"] = []  # (no model call spans)
        said = [{"role": "user", "parts": [{"type": "text", "content": "Multiply 7 by 8."}]}]
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": "63."}]}]
        _attribute(spans[3], "gen_ai.input.messages", json.dumps(said))
        _attribute(spans[3], "gen_ai.output.messages", json.dumps(answer))

    (line,) = otlp.read(first_trace(agent_only), None).lines
    data = [json.loads(m["message"])["data"] for m in line.messages]
    assert [(d["type"], d["content"]) for d in data] == [
        ("human", "Multiply 7 by 8."), ("ai", ""), ("tool", '{"result": 63}'), ("ai", "63."),
    ]  # fmt: skip
    assert [c["name"] for c in data[1]["tool_calls"]] == ["multiply_numbers"]
    assert not [w for w in recwarn if isinstance(w.message, TcbReplayWarning)]


def _http_trace(trace_id: str) -> str:
    """A trace of one HTTP server span (an auto-instrumented service's health check), in the
    resource and scope of openai_v2_latest's first request: OTLP/JSON, a line."""
    doc = json.loads((OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()[0])
    (span,) = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    span.update(traceId=trace_id, spanId="00f067aa0ba902b7", name="GET /health", kind=2)
    del span["parentSpanId"]
    span["attributes"] = [
        {"key": "http.request.method", "value": {"stringValue": "GET"}},
        {"key": "url.path", "value": {"stringValue": "/health"}},
        {"key": "http.response.status_code", "value": {"intValue": "200"}},
    ]
    return json.dumps(doc) + "\n"


def test_a_trace_of_no_model_call_tool_run_or_agent_is_left_out_and_said():
    """An HTTP trace beside the agent's was a sample of no messages, scored as an agent that
    did nothing, without a word."""
    data = (OTEL / "openai_v2_latest.otlp.jsonl").read_bytes() + _http_trace("ab" * 16).encode()
    with pytest.warns(TcbReplayWarning) as caught:
        source = otlp.read(TraceFile("t.jsonl", data=data), None)
    assert len(source.lines) == 3 and "ab" * 16 not in {li.sample_id for li in source.lines}
    assert [str(w.message) for w in caught] == [
        "t.jsonl: 1 trace holds no model call, tool run or agent span (GenAI, OpenInference, "
        f"the AI SDK), left out: trace {'ab' * 16} ('GET /health')"
    ]


def test_a_file_of_no_model_call_tool_run_or_agent_is_refused():
    """OpenLLMetry's own attributes (gen_ai.prompt.N.*, which are not read) and an HTTP
    trace: each imported as a sample of no messages."""

    def openllmetry(spans):
        for span in spans:
            span["attributes"] = [
                {"key": "traceloop.span.kind", "value": {"stringValue": "task"}},
                {"key": "gen_ai.prompt.0.role", "value": {"stringValue": "user"}},
            ]

    data = first_trace(openllmetry).data + _http_trace("ab" * 16).encode()
    with pytest.raises(TraceError) as caught:
        otlp.read(TraceFile("t.jsonl", data=data), None)
    assert str(caught.value) == (
        "t.jsonl: no GenAI spans: no model call, tool run or agent span (GenAI, OpenInference, "
        "the AI SDK) in its 2 traces; the spans' attributes: traceloop.span.kind, "
        "gen_ai.prompt.N.role, http.request.method, url.path, http.response.status_code"
    )
    assert "docs/otlp.md" in caught.value.hint


def _without_call_ids(spans):
    """Gemini's calls, which have no ids: none on the parts, none on the tool run."""
    for span in spans:
        for a in span["attributes"]:
            if a["key"] in ("gen_ai.input.messages", "gen_ai.output.messages"):
                said = json.loads(a["value"]["stringValue"])
                for m in said:
                    for part in m["parts"]:
                        part.pop("id", None)
                a["value"]["stringValue"] = json.dumps(said)
        span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.tool.call.id"]


def test_a_call_without_an_id_is_answered_once():
    """Its result, sent to the next model call, was stored again from its tool run."""
    (line,) = otlp.read(first_trace(_without_call_ids), None).lines
    data = [json.loads(m["message"])["data"] for m in line.messages]
    assert [(d["type"], d["content"]) for d in data] == [
        ("system", "You are the shop's assistant."),
        ("human", "Multiply 7 by 8 for me."),
        ("ai", ""),
        ("tool", '{"result": 63}'),
        ("ai", "7 times 8 is 63.00."),
    ]
    assert data[2]["tool_calls"][0]["id"] is None


def test_calls_without_ids_are_answered_in_order():
    """Two calls of one answer, without ids (or with empty ones), both results sent on: each
    answered once, in order; the one result not sent comes from its tool run."""
    idless = Message("assistant", "", [Call(None, "add", {"a": 1}), Call(None, "mul", {"a": 2})])
    runs = [
        ToolRun(span_id="t1", start=2, name="add", call_id=None, args={"a": 1}, result="3"),
        ToolRun(span_id="t2", start=3, name="mul", call_id=None, args={"a": 2}, result="4"),
    ]
    sent = [USER, idless, Message("tool", "3"), Message("tool", "4")]
    entries = conversation([turn("a", [USER], [idless], 1), turn("b", sent, [ANSWER], 5)], runs)
    assert [(e.message.role, e.message.text) for e in entries] == [
        ("user", USER.text), ("assistant", ""), ("tool", "3"), ("tool", "4"), ("assistant", "5."),
    ]  # fmt: skip
    assert [e.run for e in entries[2:4]] == runs
    half = [USER, idless, Message("tool", "3")]  # the second result never sent
    entries = conversation([turn("a", [USER], [idless], 1), turn("b", half, [ANSWER], 5)], runs)
    assert [e.message.text for e in entries if e.message.role == "tool"] == ["3", "4"]


def _began_together(spans):
    """The two model calls with one start time (the second's span id the lower)."""
    spans[2]["startTimeUnixNano"] = spans[0]["startTimeUnixNano"]


def _no_times(spans):
    for span in spans:
        del span["startTimeUnixNano"], span["endTimeUnixNano"]


@pytest.mark.parametrize("change", [_began_together, _no_times])
def test_model_calls_of_one_start_time_are_laid_out_by_what_they_were_sent(change, recwarn):
    """Ordered by span id, the second call came first: the user message and the call were
    laid out twice (two agent calls for one), without a word."""
    (line,) = otlp.read(first_trace(change), None).lines
    data = [json.loads(m["message"])["data"] for m in line.messages]
    assert [d["type"] for d in data] == ["system", "human", "ai", "tool", "ai"]
    assert [c["name"] for d in data if d["type"] == "ai" for c in d["tool_calls"]] == [
        "multiply_numbers"
    ]
    assert not [w for w in recwarn if isinstance(w.message, TcbReplayWarning)]


def test_model_calls_whose_order_cannot_be_told_are_said():
    """One start time, and neither call was sent the other's answer."""

    def apart(spans):
        _began_together(spans)
        _attribute(spans[2], "gen_ai.input.messages", json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "And 2 by 3?"}]}]
        ))  # fmt: skip

    with pytest.warns(TcbReplayWarning) as caught:
        otlp.read(first_trace(apart), None)
    [said] = [str(w.message) for w in caught]
    assert said.startswith("t.jsonl: trace 16ec9d")
    assert said.endswith(
        ": model calls ca5ab68de1baaaf1 and f6c00bf52f9ecc31 began at the same time, and "
        "neither was sent the other's answer: their order cannot be told (laid out in this order)"
    )


def test_times_that_are_not_nanoseconds_are_said_once():
    """Milliseconds since 1970 (as some exporters write them) were read as nanoseconds, every
    latency a millionth of itself, without a word."""

    def milliseconds(spans):
        for span in spans:
            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                span[key] = str(int(span[key]) // 1_000_000)

    with pytest.warns(TcbReplayWarning) as caught:
        otlp.read(first_trace(milliseconds), None)
    [said] = [str(w.message) for w in caught]
    assert said == (
        "t.jsonl: span f6c00bf52f9ecc31 ('chat gpt-4o-mini') begins at 1795790200368, before "
        "the year 2000 as nanoseconds since 1970 (OTLP's unit): the file's times look like "
        "milliseconds: read as nanoseconds, its latencies are 1,000,000 times too small"
    )


def _without_result(spans):
    """The tool run's span holds no result (the agent was killed while its tool ran: no
    later model call either)."""
    kept = [a for a in spans[1]["attributes"] if a["key"] != "gen_ai.tool.call.result"]
    spans[1]["attributes"] = kept
    spans[2]["attributes"] = []


def _no_content(spans):
    """Content capture off: no messages on the model calls, no result on the tool run."""
    _without_result(spans)
    for span in spans:
        span["attributes"] = [
            a for a in span["attributes"]
            if a["key"] not in ("gen_ai.input.messages", "gen_ai.output.messages")
        ]  # fmt: skip


@pytest.mark.parametrize("change", [_without_result, _no_content])
def test_a_tool_run_without_a_result_keeps_its_call_open_and_is_said(change):
    """An execute_tool span without gen_ai.tool.call.result: its call was left unanswered
    in silence (or, told by the tool runs alone, answered by an empty success)."""
    with pytest.warns(TcbReplayWarning) as caught:
        (line,) = otlp.read(first_trace(change), None).lines
    data = [json.loads(m["message"]) for m in line.messages]
    assert data[-1]["type"] == "ai"
    assert [c["name"] for c in data[-1]["data"]["tool_calls"]] == ["multiply_numbers"]
    assert "tool" not in [m["type"] for m in data]
    assert [str(w.message) for w in caught] == [
        "t.jsonl: 1 tool runs hold no result and no error (cut short, or their content not "
        "captured): their calls are stored without a result: trace "
        "16ec9dc6a3edd0fc7ca41b4fcde927a3 span 89d8f800cc274c13 (multiply_numbers)"
    ]
