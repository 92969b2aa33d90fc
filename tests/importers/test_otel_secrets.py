"""Secrets in span attributes (an HTTP instrumentor's ``Authorization`` header, a URL with
Gemini's ``?key=``, invocation parameters with an ``api_key``) are redacted where tcbreplay
reads spans: in the samples, in ``collect``'s received files, and in the run an import
writes. The spans are openai-v2's real ones (the fixtures), with the attributes added through
the real protobuf types of opentelemetry-proto."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from collecting import collecting, post
from google.protobuf import json_format
from helpers import TEST_DATA, cli
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

from tcbreplay import _scrub, _secrets
from tcbreplay._importers.otel.otlp_json import decode_json
from tcbreplay._importers.otel.otlp_proto import decode_proto
from tcbreplay._scrub import scrub
from tcbreplay._secrets import MIN_SECRET_LENGTH, REDACTED, redact

OTEL = TEST_DATA / "otel"
# none of these is a real key: each has the form of one
BEARER = "Bearer sk-proj-Tq4bXr9LmN2pQ7vW1yZ3aB5cD8eF0gH"
GEMINI_KEY = "AIzaSyD4k7Qx9Lm2Np5Rt8Vw1Yz3Bc6Ef0Gh-Jk"
INVOKE_KEY = "f3a9c1e7b5d2a8c4e6f0"
SECRETS = ("sk-proj-Tq4bXr9LmN2pQ7vW1yZ3aB5cD8eF0gH", GEMINI_KEY, INVOKE_KEY)
ADDED = {
    "http.request.header.authorization": [BEARER],
    "url.full": f"https://generativelanguage.googleapis.com/v1beta/models/m:generate?key={GEMINI_KEY}",
    "llm.invocation_parameters": json.dumps({"temperature": 0, "api_key": INVOKE_KEY}),
    "llm.token_count.prompt": 12,
    "session.id": "conversation-0042",
}
KEPT = {
    "http.request.header.authorization": REDACTED,
    "url.full": "https://generativelanguage.googleapis.com/v1beta/models/m:generate?key=[redacted]",
    "llm.invocation_parameters": '{"temperature": 0, "api_key": "[redacted]"}',
    "llm.token_count.prompt": 12,
    "session.id": "conversation-0042",
}


def _value(value: object) -> common_pb2.AnyValue:
    if isinstance(value, list):
        return common_pb2.AnyValue(
            array_value=common_pb2.ArrayValue(values=[_value(v) for v in value])
        )
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    return common_pb2.AnyValue(string_value=str(value))


def with_secrets() -> trace_service_pb2.ExportTraceServiceRequest:
    """The fixture's request, every span given the attributes of ADDED."""
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(
        (OTEL / "openai_v2_latest.otlp.pb").read_bytes()
    )
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                span.attributes.extend(
                    common_pb2.KeyValue(key=k, value=_value(v)) for k, v in ADDED.items()
                )
    return request


def as_otlp_json(request: trace_service_pb2.ExportTraceServiceRequest) -> bytes:
    """The request in OTLP/JSON (ids in hex, as OTLP/JSON writes them, not base64)."""
    doc = json_format.MessageToDict(request)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = __import__("base64").b64decode(span[key]).hex()
    return json.dumps(doc).encode()


def stored_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_scrub_redacts_secrets_and_keeps_counts_ids_and_plain_values():
    for name, value in ADDED.items():
        assert scrub(name, value) == KEPT[name] or scrub(name, value) == [REDACTED]
    plain = "https://api.openai.com/v1/chat/completions"
    assert scrub("url.full", plain) is plain
    assert (
        scrub("gen_ai.request.model", "gpt-4o?api_key=" + INVOKE_KEY) == "gpt-4o?api_key=[redacted]"
    )
    assert scrub("gen_ai.usage.input_tokens", 31) == 31
    assert scrub("x-goog-api-key", GEMINI_KEY) == REDACTED
    assert scrub("error.message", f"401 for {BEARER}") == "401 for Bearer [redacted]"


def test_decoded_spans_hold_no_secret_and_the_request_is_kept_without_them():
    request = with_secrets()
    batch = decode_proto(request.SerializeToString(), "request")
    assert batch.redacted >= 3 * len(batch.spans)  # (an array, and its elements)
    for span in batch.spans:
        assert {k: span.attributes[k] for k in KEPT} == KEPT
    assert batch.kept is not None and not any(s.encode() in batch.kept for s in SECRETS)
    again = decode_proto(batch.kept, "kept")
    assert again.redacted == 0 and [s.attributes for s in again.spans] == [
        s.attributes for s in batch.spans
    ]
    doc = json.loads(as_otlp_json(request))
    from_json = decode_json(doc, "request")
    assert [s.attributes for s in from_json.spans] == [s.attributes for s in batch.spans]
    assert not any(s in json.dumps(doc) for s in SECRETS)  # the document, changed in place


def test_collect_keeps_no_secret_in_its_received_files_or_its_run(tmp_path):
    request = with_secrets()
    store = tmp_path / "store"
    with collecting(store) as (endpoint, _log, summary):
        status, _ = post(f"{endpoint}/v1/traces", request.SerializeToString(),
                         "application/x-protobuf")  # fmt: skip
        assert status == 200
        status, _ = post(f"{endpoint}/v1/traces", as_otlp_json(request), "application/json")
        assert status == 200
    assert summary[0].spans == 2 * len(decode_proto(request.SerializeToString(), "r").spans)
    run = store / "live"
    kept = stored_bytes(run)
    assert not any(s.encode() in kept for s in SECRETS)
    assert b"conversation-0042" in (run / "received.otlp.pb").read_bytes()
    # the received files import as they are, into the same calls
    for name in ("received.otlp.pb", "received.otlp.jsonl"):
        result = cli("import", "--traces", run / name, "--run-id", name.split(".")[-1],
                     "--store", store)  # fmt: skip
        assert result.exit_code == 0, result.output


# in the parts of a request no attribute is read from: names, status messages, a scope's
# attributes, links (none of these is a real key either)
ELSEWHERE = ("Zq9xTT7pLmW3vR8sNAME", "Zq9xTT7pLmW3vR8sEVENT", "Zq9xTT7pLmW3vR8sSTATUS",
             "Zq9xTT7pLmW3vR8sSCOPE", "Zq9xTT7pLmW3vR8sLINK", "Zq9xTT7pLmW3vR8sLOWER")  # fmt: skip


def with_secrets_elsewhere() -> trace_service_pb2.ExportTraceServiceRequest:
    from opentelemetry.proto.trace.v1 import trace_pb2

    name, event, status, scope, link, lower = ELSEWHERE
    request = with_secrets()
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            ss.scope.attributes.append(common_pb2.KeyValue(key="api_key", value=_value(scope)))
            for span in ss.spans:
                span.name += f" Bearer {name}"
                span.events.append(trace_pb2.Span.Event(name=f"exception api_key={event}"))
                span.status.message = f"Unauthorized: authorization: bearer {lower}, token={status}"
                span.links.append(
                    trace_pb2.Span.Link(
                        trace_id=span.trace_id,
                        span_id=span.span_id,
                        attributes=[common_pb2.KeyValue(key="authorization", value=_value(link))],
                    )
                )
    return request


def test_secrets_outside_the_attributes_read_are_kept_nowhere(tmp_path):
    """Only the attributes spans are read with were scrubbed: a span's or event's name, its
    status message, a scope's attributes and links went into collect's received files (and
    the span's name into its sample's metadata) as they came; and an authorization header
    in lower case (``bearer``) was never redacted."""
    request = with_secrets_elsewhere()
    # read to be kept (collect's received files): every text of the request
    batch = decode_proto(request.SerializeToString(), "request", whole=True)
    assert batch.kept is not None and not any(s.encode() in batch.kept for s in ELSEWHERE)
    assert all(span.name.endswith(" Bearer [redacted]") for span in batch.spans)
    doc = json.loads(as_otlp_json(request))
    decode_json(doc, "request", whole=True)
    assert not any(s in json.dumps(doc) for s in ELSEWHERE)
    # read to be imported: what the spans are read with (names, status messages)
    for read in (decode_proto(request.SerializeToString(), "request"),
                 decode_json(json.loads(as_otlp_json(request)), "request")):  # fmt: skip
        held = json.dumps([(s.name, s.status_message, [e.name for e in s.events])
                           for s in read.spans])  # fmt: skip
        assert "Bearer [redacted]" in held and not any(s in held for s in ELSEWHERE)
    store = tmp_path / "store"
    with collecting(store) as (endpoint, _log, _summary):
        for body, kind in ((request.SerializeToString(), "application/x-protobuf"),
                           (as_otlp_json(request), "application/json")):  # fmt: skip
            assert post(f"{endpoint}/v1/traces", body, kind)[0] == 200
    run = store / "live"
    for name in ("received.otlp.pb", "received.otlp.jsonl"):
        held = (run / name).read_bytes()
        assert held and not any(s.encode() in held for s in ELSEWHERE), name
        assert b"conversation-0042" in held
    found = cli("sql", "--store", store, "--format", "json",
                "select metadata, error from samples")  # fmt: skip
    assert found.exit_code == 0, found.output
    assert "Bearer [redacted]" in found.stdout
    assert not any(s in found.stdout for s in ELSEWHERE)


def test_an_import_of_spans_with_secrets_stores_none(tmp_path):
    traces = tmp_path / "spans.otlp.jsonl"
    traces.write_bytes(as_otlp_json(with_secrets()) + b"\n")
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "imported", "--store", store)
    assert result.exit_code == 0, result.output
    assert not any(s.encode() in stored_bytes(store / "imported") for s in SECRETS)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # a user info of any length, redacted at its URL; a user name alone is no secret
        ("is mongodb://u:p4ssw0rd99@cluster0/x up?", "is mongodb://[redacted]@cluster0/x up?"),
        (
            "see https://user@example.com/x and the user manual",
            "see https://[redacted]@example.com/x and the user manual",
        ),
        # the password echoed elsewhere, as Basic's base64 of user:password
        (
            "Basic dTpwNHNzdzByZDk5 for mongodb://u:p4ssw0rd99@c",
            "Basic [redacted] for mongodb://[redacted]@c",
        ),
        # a password with "/", as urllib's quote leaves it, ends the host a parser reads
        ("postgres://bob:S3cr3t/P%40ss@db/x", "postgres://[redacted]@db/x"),
        ("https://medium.com/@someone/post", "https://medium.com/@someone/post"),
        ("http://host:8080/a@b", "http://host:8080/a@b"),
        # Bearer and its value with the space percent-encoded
        ("header Bearer%20tokABCDEF123456", "header Bearer%20[redacted]"),
    ],
)
def test_the_credentials_of_a_url_are_redacted_at_the_url(text, kept):
    assert scrub("note", text) == kept


def test_a_conversation_quoting_a_url_with_a_short_user_imports_without_its_password(tmp_path):
    """A one-letter user name once made every position of the attribute's text a match: the
    messages' JSON was broken, the trace refused."""
    text = (OTEL / "openai_v2_latest.otlp.jsonl").read_text()
    assert "You are the shop's assistant." in text
    traces = tmp_path / "spans.otlp.jsonl"
    quoted = "You are the shop's assistant (mongodb://u:p4ssw0rd99@db/shop)."
    traces.write_text(text.replace("You are the shop's assistant.", quoted))
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "quoted", "--store", store)
    assert result.exit_code == 0, result.output
    query = (
        "select distinct message->>'$.data.content' as content from messages where type = 'system'"
    )
    systems = cli("sql", query, "--format", "json", "--store", store)
    assert json.loads(systems.output) == [
        {"content": "You are the shop's assistant (mongodb://[redacted]@db/shop)."}
    ]
    assert b"p4ssw0rd99" not in stored_bytes(store / "quoted")


def test_a_model_name_with_a_key_is_kept_without_it_and_refused_as_an_option(tmp_path):
    request = with_secrets()
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                for kv in span.attributes:
                    if kv.key in ("gen_ai.request.model", "gen_ai.response.model"):
                        kv.value.string_value = f"gpt-4o?api_key={INVOKE_KEY}"
    traces = tmp_path / "spans.otlp.jsonl"
    traces.write_bytes(as_otlp_json(request) + b"\n")
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "named", "--store", store)
    assert result.exit_code == 0, result.output
    manifest = json.loads((store / "named" / "manifest.json").read_text())
    assert manifest["model"]["id"] == "gpt-4o?api_key=[redacted]"
    refused = cli("import", "--traces", traces, "--run-id", "given", "--store", store,
                  "--model", f"gpt-4o?api_key={INVOKE_KEY}")  # fmt: skip
    assert refused.exit_code != 0 and INVOKE_KEY not in refused.output
    assert "secrets are not accepted" in refused.output
    assert not (store / "given").exists()


def test_a_long_secret_name_before_its_value_is_found_in_a_text():
    """The quick look for a secret's name allowed 8 letters after its word: authorization
    (auth, then 9) went unredacted."""
    assert scrub("note", "authorization=abcdef123456") == "authorization=[redacted]"
    assert scrub("note", "Passphrase: hunter2hunter2") == "Passphrase: [redacted]"
    assert scrub("note", "KeyError: something went wrong") == "KeyError: something went wrong"


# ---------------------------------------------------------------- scrub's quick test

# texts made of: what comes before, what each form scrub redacts starts with (in other cases
# too, and near misses), what may come between, a value, and what comes after
BEFORE = ["", "x ", "İİİİİİ ", '{"']
STARTS = ["Bearer", "bearer", "Basic", "Token", "TOKEN", "api_key", "API_KEY", "apiKey",
          "Authorization", "PASSWORD", "passphrase", "pwd", "sig", "x-auth-token",
          "client_secret", "Cookie", "credentials", "key", "KeyError", "token_count", "sk-",
          "sk-proj-", "AIza", "AKIA", "ghp_", "xoxb-", "hf_", "role", "--api-key", "--password",
          "set-cookie", "--max-tokens"]  # fmt: skip
BETWEEN = ["", " ", "\t", "=", ":", ": ", '":"', '\\": \\"', " = "]
VALUES = ["1234567", "12345678", "abcdefghijklmnop", "0123456789abcdefghijABCDEFGHIJ0123", REDACTED]
AFTER = ["", '"}', " and more"]


def by_every_look(text: str) -> str:
    """What scrub's looks make of a text without a URL when none of them is skipped."""
    text = _secrets._AUTH_IN_TEXT.sub(_secrets._credential, text)
    text = _secrets._KEY_FORMS.sub(REDACTED, text)
    return _secrets._cookies_and_flags(_secrets._named_values(text))


def test_scrubs_quick_tests_let_by_no_text_its_looks_would_change():
    """A span's value is scrubbed only where a quick test finds what a credential's form
    holds (for speed: values are many): it finds it wherever one is."""
    for parts in itertools.product(BEFORE, STARTS, BETWEEN, VALUES, AFTER):
        text = "".join(parts)
        expected = by_every_look(text) if len(text) >= MIN_SECRET_LENGTH else text
        assert scrub("note", text) == expected, text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # the shortest of each form (the quick test lets shorter texts by)
        ("pwd=12345678", "pwd=[redacted]"),
        ("aKey=1234567", "aKey=1234567"),
        ("aKey=12345678", "aKey=[redacted]"),
        ("Token abcdefg1", "Token [redacted]"),
        ("xoxb-1234567890", "[redacted]"),
        # any space after Bearer, as redact reads it
        ("Authorization: Bearer\tabcdefgh12345678", "Authorization: Bearer\t[redacted]"),
        # a text with "İ", which is two characters in lower case, before the name
        ("İİİİİİ api_key=abcdefgh12345678", "İİİİİİ api_key=[redacted]"),
        # a cookie header's value, whose names are the cookies' (they were kept)
        ("headers={'Cookie': 'sid=QQQ333cookie444'}", "headers={'Cookie': '[redacted]'}"),
        ("Cookie: session=abcdefgh1234; theme=dark\r\nHost: h", "Cookie: [redacted]\r\nHost: h"),
        ("cookie_count=123456789", "cookie_count=123456789"),
        # a command line's option with its value after a space (kept)
        ("ran: tool --password QQQ555pw666 -v", "ran: tool --password [redacted] -v"),
        ("--api-key abcdefgh12345678 --verbose", "--api-key [redacted] --verbose"),
        (
            "--max-tokens 100000000 --password-file /etc/pw.txt",
            "--max-tokens 100000000 --password-file /etc/pw.txt",
        ),
    ],
)
def test_the_shortest_credentials_and_the_rarer_forms_are_scrubbed(text, kept):
    assert scrub("note", text) == kept
    assert redact(text, environ={}) == kept


def test_a_tool_calls_record_keys_are_kept_and_its_secrets_are_not():
    """A GenAI span's messages are scanned as text: a tool's ``sort_key`` argument was
    blanked like an ``api_key`` (and so scored otherwise than the same call from LangSmith)."""
    args = {"sort_key": "created_at_desc", "primary_key": "order-123456", "api_key": INVOKE_KEY}
    text = json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "c1", "name": "list_items", "arguments": args}]}])  # fmt: skip
    kept = json.loads(scrub("gen_ai.output.messages", text))[0]["parts"][0]["arguments"]
    assert kept == {**args, "api_key": REDACTED}


# credentials of the forms scrub finds, where formats keep names, tags and notes
META_SECRETS = ("NAMETOKEN12345", "abcdefghijk12345", "sk-proj-INSPECTMETA0000000000000000")


def _langsmith_with_secrets(folder: Path) -> Path:
    lines = (TEST_DATA / "langsmith" / "runs.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["name"] == "LangGraph" and first.get("parent_run_id") is None
    first["name"] = "LangGraph token=NAMETOKEN12345"
    first["tags"] = ["Bearer abcdefghijk12345", "sk-proj-INSPECTMETA0000000000000000"]
    path = folder / "runs.jsonl"
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    return path


def _inspect_with_secrets(folder: Path) -> Path:
    log = json.loads((TEST_DATA / "inspect" / "mockllm-2-samples-2-epochs.json").read_text())
    for sample in log["samples"]:
        sample["metadata"].update(
            api_key="sk-proj-INSPECTMETA0000000000000000",
            note="Bearer abcdefghijk12345 token=NAMETOKEN12345",
        )
    path = folder / "log.json"
    path.write_text(json.dumps(log))
    return path


@pytest.mark.parametrize("make", [_langsmith_with_secrets, _inspect_with_secrets])
def test_a_formats_names_tags_and_metadata_are_stored_without_credentials(make, tmp_path):
    traces = make(tmp_path)
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "meta", "--store", store)
    assert result.exit_code == 0, result.output
    stored = stored_bytes(store / "meta")
    assert not [s for s in META_SECRETS if s.encode() in stored]
    metadata = cli("sql", "select metadata from samples", "--format", "json", "--store", store)
    assert "[redacted]" in metadata.output


# ---------------------------------------------------------------- inside messages

# ordinary data in a conversation or a tool call's arguments that the name rule of attributes
# redacted (a name ending in token, key or pass): kept in messages, redacted in attributes
CONTENT_KEPT = [
    '{"page_token": "CAESBgjQ2f8Y", "next_page_token": "CAESBgjQ2f8Z"}',
    '{"pageToken": "CAESBgjQ2f8Y", "continuation_token": "c0nt1nuat10n"}',
    '{"boarding_pass": "BP12345678", "s3_key": "reports/2024/q1.csv"}',
    '{"license_key": "LK-1234-5678", "event_key": "evt_12345678"}',
    "My boarding pass: BP12345678, please check in",
    '{"type": "thinking", "signature": "EqQBCkgIARABGAIiQ"}',
    "ran: lister --page-token CAESBgjQ2f8Y",
    "see https://api.example.com/items?page_token=CAESBgjQ2f8Y",
    "PWD=/home/agent/project",
]
# credentials there: by their names and by their forms
CONTENT_REDACTED = [
    ('{"api_key": "f3a9c1e7b5d2a8c4e6f0"}', '{"api_key": "[redacted]"}'),
    ('{"password": "hunter2hunter2"}', '{"password": "[redacted]"}'),
    ('{"client_secret": "abcdefgh12345678"}', '{"client_secret": "[redacted]"}'),
    ('{"access_token": "ya29.a0AfH6SMxx"}', '{"access_token": "[redacted]"}'),
    ('{"refreshToken": "1//0gLxxxxxxxx"}', '{"refreshToken": "[redacted]"}'),
    ('{"x-goog-api-key": "abcdefgh12345678"}', '{"x-goog-api-key": "[redacted]"}'),
    ("AWS_SECRET_ACCESS_KEY=abcdefgh12345678", "AWS_SECRET_ACCESS_KEY=[redacted]"),
    ("token=abcdefgh12345678", "token=[redacted]"),
    ("Authorization: Bearer abcdefgh12345678", "Authorization: Bearer [redacted]"),
    (f"use {GEMINI_KEY} now", "use [redacted] now"),
    ("is mongodb://u:p4ssw0rd99@db/x up?", "is mongodb://[redacted]@db/x up?"),
    (
        "mongodb://u:p4ssw0rd99@db/x with api_key=abcdefgh12345678",
        "mongodb://[redacted]@db/x with api_key=[redacted]",
    ),
    (
        "get https://g.example.com/m?key=abcdefgh12345678",
        "get https://g.example.com/m?key=[redacted]",
    ),
    ("ran: tool --password QQQ555pw666 -v", "ran: tool --password [redacted] -v"),
    ("Cookie: sid=abcdefgh1234; theme=dark", "Cookie: [redacted]"),
]


@pytest.mark.parametrize("text", CONTENT_KEPT)
def test_ordinary_data_in_messages_is_kept_that_an_attribute_would_lose(text):
    """Messages were scrubbed with the rule of attributes: a tool's page_token argument, a
    boarding pass in the user's words, a thinking block's signature became [redacted]."""
    assert _scrub.scrub_content("", text) == text
    assert scrub("note", text) != text  # (an attribute's text keeps the broader rule)


@pytest.mark.parametrize(("text", "kept"), CONTENT_REDACTED)
def test_credentials_in_messages_are_still_redacted(text, kept):
    assert _scrub.scrub_content("", text) == kept


def test_a_field_named_as_a_credential_is_redacted_whole_inside_a_message():
    assert _scrub.scrub_content("api_key", "f3a9c1e7") == REDACTED
    assert _scrub.scrub_content("page_token", "f3a9c1e7") == "f3a9c1e7"
    assert _scrub.is_credential_name("OPENAI_API_KEY")
    assert not _scrub.is_credential_name("next_page_token")


def _conversation_with(folder: Path, args: str, said: str) -> Path:
    """openai-v2's real spans, the model's call to multiply_numbers given ``args`` too (JSON
    members) and the user's question followed by ``said``."""
    text = (OTEL / "openai_v2_latest.otlp.jsonl").read_text()
    call, question = '{\\"a\\":7,\\"b\\":9', "Multiply 7 by 8 for me."
    assert call in text and question in text
    extra = json.dumps(args)[1:-1]  # (as the text of a JSON string)
    text = text.replace(call, call + "," + extra).replace(question, f"{question} {said}")
    path = folder / "spans.otlp.jsonl"
    path.write_text(text)
    return path


def test_an_import_keeps_a_conversations_data_and_says_what_it_redacted(tmp_path):
    """A tool call's ``page_token`` and ``boarding_pass`` arguments, and the user's "boarding
    pass: ...", were stored as [redacted] without a word: the call scored as hallucinated,
    the input matched no dataset entry."""
    args = (
        '"page_token":"CAESBgjQ2f8Y","boarding_pass":"BP12345678","api_key":"f3a9c1e7b5d2a8c4e6f0"'
    )
    said = "My boarding pass: BP12345678, next_page_token=CAESBgjQ2f8Y."
    traces = _conversation_with(tmp_path, args, said)
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "kept", "--store", store)
    assert result.exit_code == 0, result.output
    calls = cli("sql", "--store", store, "--format", "json",
                "select distinct to_json(args) as args from tool_calls "
                "where name = 'multiply_numbers'")  # fmt: skip
    assert calls.exit_code == 0, calls.output
    assert [json.loads(r["args"]) for r in json.loads(calls.stdout)] == [
        {"a": 7, "b": 9, "page_token": "CAESBgjQ2f8Y", "boarding_pass": "BP12345678",
         "api_key": REDACTED}
    ]  # fmt: skip
    asked = cli("sql", "--store", store, "--format", "json",
                "select distinct message->>'$.data.content' as content from messages "
                "where type = 'human'")  # fmt: skip
    assert f"Multiply 7 by 8 for me. {said}" in [r["content"] for r in json.loads(asked.stdout)]
    assert b"f3a9c1e7b5d2a8c4e6f0" not in stored_bytes(store / "kept")
    # said once, counted, with the first place
    warned = [line for line in result.output.splitlines() if "held a credential" in line]
    assert len(warned) == 1, result.output
    assert warned[0].startswith("Warning: spans.otlp.jsonl: 3 value(s) inside messages or ")
    assert "stored as [redacted], the first at line 1: span " in warned[0]
    assert warned[0].split(", the first at ")[1].split(" (")[0].endswith(": gen_ai.output.messages")


def test_collect_says_what_it_redacted_inside_messages_as_import_does(tmp_path):
    """collect redacted credentials inside messages as import does, without a word."""
    from tcbreplay.errors import TcbReplayWarning

    args = '"page_token":"CAESBgjQ2f8Y","api_key":"f3a9c1e7b5d2a8c4e6f0"'
    traces = _conversation_with(tmp_path, args, "Thanks.")
    said = (
        r"^collect: 3 value\(s\) inside messages or tool calls held a credential and are "
        r"stored as \[redacted\], the first at request 1: span [0-9a-f]{16}: gen_ai\."
    )
    with (
        pytest.warns(TcbReplayWarning, match=said),
        collecting(tmp_path / "store") as (endpoint, _log, summary),
    ):
        for line in traces.read_bytes().splitlines():
            assert post(f"{endpoint}/v1/traces", line, "application/json")[0] == 200
    assert summary[0].samples == 3  # (the file's three traces)
    assert b"f3a9c1e7b5d2a8c4e6f0" not in stored_bytes(tmp_path / "store" / "live")


def test_an_import_with_nothing_redacted_in_its_messages_says_nothing_of_it(tmp_path):
    traces = _conversation_with(tmp_path, '"page_token":"CAESBgjQ2f8Y"', "Thanks.")
    result = cli("import", "--traces", traces, "--run-id", "plain", "--store", tmp_path / "s")
    assert result.exit_code == 0, result.output
    assert "held a credential" not in result.output


def test_protobuf_spans_keep_a_conversations_data_as_json_ones_do():
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(
        (OTEL / "openai_v2_latest.otlp.pb").read_bytes()
    )
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.append(
        common_pb2.KeyValue(
            key="gen_ai.tool.call.arguments",
            value=_value('{"page_token": "CAESBgjQ2f8Y", "password": "hunter2hunter2"}'),
        )
    )
    batch = decode_proto(request.SerializeToString(), "request.pb")
    kept = batch.spans[0].attributes["gen_ai.tool.call.arguments"]
    assert kept == '{"page_token": "CAESBgjQ2f8Y", "password": "[redacted]"}'
    assert batch.content_redacted == 1
    assert (
        batch.first_content == f"request.pb: span {span.span_id.hex()}: gen_ai.tool.call.arguments"
    )


def test_inside_messages_no_text_loses_more_than_as_an_attribute():
    """The rule inside messages is narrower than an attribute's: whatever it redacts, an
    attribute's rule redacts too (it adds no look of its own)."""
    for parts in itertools.product(BEFORE, STARTS, BETWEEN, VALUES, AFTER):
        text = "".join(parts)
        if scrub("note", text) == text:
            assert _scrub.scrub_content("", text) == text, text


# ---------------------------------------------------------------- errors quote no value

PASSWORD = "correcthorsebatterystaple"


def _with_a_bad_number(field: str) -> tuple[bytes, str]:
    """openai-v2's first request, its first span given a ``db.password`` whose ``field``
    (intValue, doubleValue) is a password, not a number; and that span's id."""
    doc = json.loads((OTEL / "openai_v2_latest.otlp.jsonl").read_text().splitlines()[0])
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].append({"key": "db.password", "value": {field: PASSWORD}})
    return json.dumps(doc).encode(), span["spanId"]


@pytest.mark.parametrize(
    ("field", "expected"), [("intValue", "an integer"), ("doubleValue", "a number")]
)
def test_a_value_that_is_no_number_is_named_not_quoted(field, expected, tmp_path):
    """The error quoted Python's: ``invalid literal for int() with base 10:
    'correcthorsebatterystaple'``, the value of a db.password, and named no span."""
    body, span_id = _with_a_bad_number(field)
    traces = tmp_path / "bad.otlp.jsonl"
    traces.write_bytes(body + b"\n")
    store = tmp_path / "store"
    result = cli("import", "--traces", traces, "--run-id", "bad", "--store", store)
    assert result.exit_code == 2, result.output
    assert PASSWORD not in result.output
    assert result.output.startswith(
        f"Error: bad.otlp.jsonl: line 1: span {span_id}: attribute 'db.password': its {field} "
        f"is not {expected} (the value is not shown)\n"
    )
    assert not (store / "bad").exists()


def test_collect_answers_a_value_that_is_no_number_without_quoting_it(tmp_path):
    body, span_id = _with_a_bad_number("intValue")
    with collecting(tmp_path / "store") as (endpoint, log, _summary):
        status, answer = post(f"{endpoint}/v1/traces", body, "application/json")
    assert status == 400
    assert PASSWORD.encode() not in answer and not [line for line in log if PASSWORD in line]
    assert f"span {span_id}: attribute 'db.password': its intValue is not an integer" in (
        answer.decode()
    )


def test_a_jaeger_tag_that_is_no_number_is_named_not_quoted(tmp_path):
    doc = json.loads((OTEL / "jaeger" / "openai_v2.jaeger.json").read_text())
    doc["data"][0]["spans"][1]["tags"].append(
        {"key": "db.password", "type": "int64", "value": PASSWORD}
    )
    traces = tmp_path / "bad.jaeger.json"
    traces.write_text(json.dumps(doc))
    result = cli("import", "--traces", traces, "--run-id", "bad", "--store", tmp_path / "s")
    assert result.exit_code == 2, result.output
    assert PASSWORD not in result.output
    assert result.output.startswith(
        "Error: bad.jaeger.json: data[0]: spans[1]: attribute 'db.password': its int64 value "
        "is not an integer (the value is not shown)"
    )
