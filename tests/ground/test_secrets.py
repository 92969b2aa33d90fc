"""Secrets (issue #18): secret-looking ``--model-option`` values are refused, and the values of
configured secrets are removed from every error text that is stored or printed."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import sys
import warnings
from urllib.parse import quote, quote_plus

import click
import pyarrow.parquet as pq
import pytest
from helpers import cli, snapshot

from tcbreplay import _model_secrets, _secrets
from tcbreplay._importers.import_run import import_traces
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._inputs.dataset import GoldCall, Sample
from tcbreplay._model_secrets import find_secrets
from tcbreplay._record.models import (
    KEY_VARIABLES,
    build_chat_model,
    model_from_manifest,
    parse_model,
)
from tcbreplay._record.options import RecordOptions
from tcbreplay._record.sample import run_sample
from tcbreplay._secrets import is_secret_name, redact
from tcbreplay.errors import InputError, ModelError, TcbReplayWarning

FAKE = "sk-test-FAKE1234567890"  # never a real key
MODEL = "google_genai:gemini-2.5-flash"


@pytest.fixture
def key(monkeypatch) -> str:
    monkeypatch.setenv("GOOGLE_API_KEY", FAKE)
    return FAKE


# ---------------------------------------------------------------- what looks like a secret


@pytest.mark.parametrize(
    "name",
    ["api_key", "apiKey", "APIKEY", "x-goog-api-key", "X-Api-Key", "Authorization",
     "Proxy-Authorization", "access_token", "client_secret", "password", "credentials",
     "Cookie", "aws_secret_access_key", "hf_token", "WATSONX_APIKEY", "session_id",
     "sessionId", "X-Session-ID", "MYSQL_PWD", "db_pwd", "DB_PASS", "GITHUB_PAT",
     "CI_JOB_JWT", "SERVICE_CREDS"],
)  # fmt: skip
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "max_output_tokens", "max_completion_tokens", "temperature", "base_url",
     "keyword", "top_k", "timeout", "additional_headers", "monkey", "PATH", "bypass",
     "compass"],
)  # fmt: skip
def test_names_that_are_no_secret(name):
    assert not is_secret_name(name)


def test_every_provider_key_variable_counts_as_a_secret():
    for names in KEY_VARIABLES.values():
        assert all(is_secret_name(name) for name in names)


# ---------------------------------------------------------------- --model-option


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("api_key", FAKE, "--model-option api_key: secrets are not accepted"),
        ("additional_headers", json.dumps({"x-goog-api-key": FAKE}),
         "'x-goog-api-key' looks like a secret's name (at additional_headers[\"x-goog-api-key\"])"),
        ("client_args", json.dumps({"headers": {"Authorization": f"Bearer {FAKE}"}}),
         "(at client_args[\"headers\"][\"Authorization\"])"),
        ("additional_headers", json.dumps({"x-api-key": FAKE}), "'x-api-key'"),
        ("default_headers", json.dumps([["X-Custom", f"Bearer {FAKE}"]]),
         "looks like a credential (Bearer ...) (at default_headers[0][1])"),
        ("model_kwargs", json.dumps({"a": [{"b": {"secret": FAKE}}]}), "'secret'"),
        ("session_id", FAKE, "--model-option session_id: secrets are not accepted"),
        ("model_kwargs", json.dumps({"sessionId": FAKE}), "'sessionId' looks like a secret's"),
        ("base_url", f"http://user:{FAKE}@127.0.0.1:9/v1",
         "--model-option base_url: holds a URL with a user name or password"),
        ("base_url", f"https://{FAKE}@example.invalid/v1", "a user name or password"),
        ("base_url", f"https://example.invalid/v1?key={FAKE}",
         "holds a URL whose parameter 'key' is secret"),
        ("base_url", f"https://example.invalid/v1?alt=sse&api_key={FAKE}", "'api_key'"),
        ("client_args", json.dumps({"proxy": f"http://u:{FAKE}@proxy.invalid:3128"}),
         "a user name or password (at client_args[\"proxy\"])"),
    ],
)  # fmt: skip
def test_model_options_holding_a_secret_are_refused(key, value, fragment):
    with pytest.raises(ModelError) as caught:
        parse_model(MODEL, {key: value})
    assert fragment in str(caught.value)
    assert FAKE not in str(caught.value) and FAKE not in caught.value.hint
    assert "environment" in caught.value.hint


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("anthropic:claude-x", "ANTHROPIC_API_KEY for anthropic"),
        ("openai:gpt-4o", "OPENAI_API_KEY for openai"),
        ("google_genai:gemini-2.5-flash", "GOOGLE_API_KEY or GEMINI_API_KEY for google_genai"),
        ("other:model", "the provider's API key variable"),
        ("sim", "the sim model takes no secret"),
        (f"sim:seed=4,token={FAKE}", "the sim model takes no secret"),
        (f"openai:gpt-4o?api_key={FAKE}", "OPENAI_API_KEY for openai"),
    ],
)  # fmt: skip
def test_a_refused_secret_hint_names_the_models_own_key_variable(model, said):
    """The hint named GOOGLE_API_KEY (or OPENAI_API_KEY) whatever the model's provider."""
    with pytest.raises(ModelError) as caught:
        parse_model(model, {} if FAKE in model else {"api_key": FAKE})
    assert said in caught.value.hint
    assert FAKE not in str(caught.value) and FAKE not in caught.value.hint


def test_a_model_option_holding_the_environments_key_is_refused(key):
    with pytest.raises(ModelError, match="--model-option note: holds the value of GOOGLE_API_KEY"):
        parse_model(MODEL, {"note": f"my key is {key}"})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("max_tokens", "100", 100),
        ("max_output_tokens", "64", 64),
        ("base_url", "http://127.0.0.1:8080/v1beta?alt=sse", "http://127.0.0.1:8080/v1beta?alt=sse"),
        ("response_schema", '{"properties": {"keyword": {"type": "string"}}}',
         {"properties": {"keyword": {"type": "string"}}}),
        ("additional_headers", '{"x-request-source": "tcbreplay"}',
         {"x-request-source": "tcbreplay"}),
    ],
)  # fmt: skip
def test_model_options_without_secrets_are_kept(key, value, expected):
    """``max_tokens`` and ``max_output_tokens`` are token counts, not tokens (they were refused)."""
    assert parse_model(MODEL, {key: value}).settings == {key: expected}


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        (f'additional_headers={{"x-goog-api-key": "{FAKE}"}}',
         "--model-option additional_headers: 'x-goog-api-key' looks like a secret's name"),
        (f"base_url=http://user:{FAKE}@127.0.0.1:9", "--model-option base_url: holds a URL"),
        (f"base_url=http://127.0.0.1:9/?token={FAKE}", "parameter 'token' is secret"),
        (f"session_id={FAKE}", "--model-option session_id: secrets are not accepted"),
    ],
)  # fmt: skip
def test_cli_refuses_a_secret_in_a_model_option_and_writes_nothing(tmp_path, key, option, fragment):
    store = tmp_path / "traces"
    loopback = "base_url=http://127.0.0.1:9" if not option.startswith("base_url") else option
    result = cli(
        "record", "--model", MODEL, "--model-option", option, "--model-option", loopback,
        "--retries", "0", "--store", store, "--quiet",
    )  # fmt: skip

    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and fragment in errors[0], result.output
    assert "Hint: pass secrets by environment" in result.output
    assert FAKE not in result.output
    assert "Traceback" not in result.output
    assert snapshot(store) == {}


def test_find_secrets_gives_the_values_to_redact():
    (finding,) = find_secrets("base_url", f"http://me:{FAKE}@host.invalid/")
    assert FAKE in finding.values
    (finding,) = find_secrets("h", {"Authorization": {"token": FAKE, "n": 1}})
    assert set(finding.values) == {FAKE, "1"}


# ---------------------------------------------------------------- redaction


def test_redact_removes_the_credentials_of_urls_in_the_text_and_in_the_environment():
    """A storage library quotes its endpoint (AWS_ENDPOINT_URL_S3, a variable whose name says
    nothing of a secret) in its errors: the user info and secret query parameters of any
    environment variable's URL, and of any URL in the text, are removed."""
    environ = {"AWS_ENDPOINT_URL_S3": "http://eu:endpointpass9@127.0.0.1:1/?token=qsecret77"}
    text = "Custom endpoint `http://eu:endpointpass9@127.0.0.1:1/?token=qsecret77` is bad"
    assert (
        redact(text, environ)
        == "Custom endpoint `http://[redacted]@127.0.0.1:1/?token=[redacted]` is bad"
    )
    assert redact("at endpointpass9 and qsecret77", environ) == "at [redacted] and [redacted]"
    quoted = "see https://host.invalid/o?X-Amz-Signature=abcdef123456&part=2"
    assert redact(quoted, {}) == "see https://host.invalid/o?X-Amz-Signature=[redacted]&part=2"
    assert (
        redact("http://host.invalid/?page=1234567890", {}) == "http://host.invalid/?page=1234567890"
    )


def test_an_endpoints_credentials_never_reach_the_screen(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "AWS_ENDPOINT_URL_S3", "http://eu:endpointpass9@127.0.0.1:1/?token=qsecret77"
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    s3fs = pytest.importorskip("s3fs")
    try:
        result = cli("runs", "--store", "s3://bucket/team")
    finally:  # fsspec keeps the filesystem made, with this endpoint, for the next store made
        s3fs.S3FileSystem.clear_instance_cache()
    assert result.exit_code != 0
    assert result.output.startswith("Error: s3://bucket/team: ")
    assert "endpointpass9" not in result.output and "qsecret77" not in result.output
    assert "Traceback" not in result.output


def test_redact_replaces_every_secret_variable_and_its_quoted_forms(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-FAKE/with+chars")
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-FAKE-0987654321")
    monkeypatch.setenv("SHORT_KEY", "abc")  # too short to be a key: left alone
    text = (
        "401 for sk-test-FAKE/with+chars (sent as sk-test-FAKE%2Fwith%2Bchars), "
        'token "tok-FAKE-0987654321", abc'
    )
    assert redact(text) == '401 for [redacted] (sent as [redacted]), token "[redacted]", abc'


# A fake key holding "/", "+" and "=", as AWS secret keys and many base64 tokens do (issue #27)
SLASHY = "AIzaSECRET9f8e7d/+=x"


def _b64(text: str, alphabet: str = "standard", pad: bool = True) -> str:
    encode = base64.urlsafe_b64encode if alphabet == "urlsafe" else base64.b64encode
    out = encode(text.encode()).decode()
    return out if pad else out.rstrip("=")


def _hex_case(text: str, case: str) -> str:
    """``%2F`` escapes in lower case, or alternately lower and upper (the key's own letters
    stay as they are)."""
    flip = itertools.count()
    return re.sub(
        r"%[0-9A-F]{2}",
        lambda m: m[0].lower() if case == "lower" or next(flip) % 2 else m[0],
        text,
    )


def _u_escapes(text: str, case: str) -> str:
    """Every character but letters and digits as a JSON ``\\u`` escape, in hex ``case``."""
    return "".join(c if c.isalnum() else f"\\u{ord(c):04{case}}" for c in text)


# every way a provider, a proxy or a client library may plausibly echo the key it was sent
ENCODINGS = {
    "as is": lambda k: k,
    "quote (keeps /)": quote,
    "quote safe=''": lambda k: quote(k, safe=""),
    "quote safe='+'": lambda k: quote(k, safe="+"),
    "lower-case hex": lambda k: _hex_case(quote(k, safe=""), "lower"),
    "mixed-case hex": lambda k: _hex_case(quote(k, safe=""), "mixed"),
    "quote_plus": quote_plus,
    "URL-encoded twice": lambda k: quote(quote(k, safe=""), safe=""),
    "form-decoded (+ read as space)": lambda k: k.replace("+", " "),
    "JSON-escaped": lambda k: json.dumps(k)[1:-1],
    "JSON with \\/": lambda k: k.replace("/", "\\/"),
    "JSON \\u escapes": lambda k: _u_escapes(k, "x"),
    "JSON \\u escapes upper": lambda k: _u_escapes(k, "X"),
    "JSON in JSON": lambda k: json.dumps(json.dumps(k.replace("/", "\\/")))[3:-3],
    "base64": _b64,
    "base64 unpadded": lambda k: _b64(k, pad=False),
    "urlsafe base64": lambda k: _b64(k, "urlsafe"),
    "urlsafe base64 unpadded": lambda k: _b64(k, "urlsafe", pad=False),
    "base64, URL-encoded": lambda k: quote(_b64(k), safe=""),
    "base64, JSON-escaped": lambda k: _b64(k).replace("/", "\\/"),
}


@pytest.mark.parametrize(
    "secret", [SLASHY, FAKE, "k3y/with/slashes+plus==", "pässwört-ünïcode", 'q"uote\\back-FAKE']
)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_redact_knows_every_encoding_a_server_may_echo(monkeypatch, encoding, secret):
    monkeypatch.setattr(_secrets, "_registered", set())
    monkeypatch.setenv("SOME_API_KEY", secret)
    form = ENCODINGS[encoding](secret)
    assert redact(f'400: API key "{form}" not valid.') == '400: API key "[redacted]" not valid.'
    # the same for a secret of a run's recorded settings
    monkeypatch.delenv("SOME_API_KEY")
    assert redact(form) == form
    _secrets.register(find_secrets("h", {"x-api-key": secret}))
    assert redact(f"<{form}>") == "<[redacted]>"


@pytest.mark.parametrize("prefix", ["", "u:", "ab:", "user:", "x"])
@pytest.mark.parametrize("alphabet", ["standard", "urlsafe"])
def test_a_key_inside_a_longer_base64_text_is_redacted_at_any_alignment(
    monkeypatch, prefix, alphabet
):
    """``Authorization: Basic base64(user:key)`` echoed: the characters that encode only the
    key's bits are redacted, whatever the key's offset in the encoded bytes."""
    monkeypatch.setenv("SOME_API_KEY", SLASHY)
    for suffix in ("", "!", "!?", "!?#"):
        encoded = _b64(prefix + SLASHY + suffix, alphabet)
        out = redact(f"Basic {encoded}.")
        assert out.count("[redacted]") == 1, (suffix, out)
        head, tail = out.removeprefix("Basic ").removesuffix(".").split("[redacted]")
        assert encoded.startswith(head) and encoded.endswith(tail)
        # what is left holds the prefix and suffix bytes and at most 4 bits of the key
        assert len(head) <= -(-len(prefix) * 4 // 3)
        assert len(tail) <= len(encoded) - (len(prefix) + len(SLASHY)) * 4 // 3


OTHER_KEY = "sk-proj-SECRETabcdef1234567890XYZ"  # no variable of this machine holds it


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"401: Authorization: Bearer {OTHER_KEY}", "401: Authorization: Bearer [redacted]"),
        (f"Incorrect API key provided: {OTHER_KEY}.", "Incorrect API key provided: [redacted]."),
        ("exception: api_key=abcdefgh12345", "exception: api_key=[redacted]"),
        ('{"client_secret": "abcdefghijkl"}', '{"client_secret": "[redacted]"}'),
        ("x-goog-api-key: AIzaSyA1234567890abcdefghijklmnopqrstu", "x-goog-api-key: [redacted]"),
        ("creds AKIAABCDEFGHIJKLMNOP here", "creds [redacted] here"),
        # a header in lower case, as proxies and HTTP/2 write it; HTTP Digest's answer
        ("proxy said: authorization: bearer Zq9xTT7pLmW3vR8sLOWER",
         "proxy said: authorization: bearer [redacted]"),
        ("BEARER ZQ9XTT7PLMW3VR8S1234", "BEARER [redacted]"),
        # keys by their forms: GitHub's fine-grained token, Groq's, Stripe's, a JWT
        ("github_pat_11ABCDEFG0123456789abcdefghijklmnopqrstuvwxyz", "[redacted]"),
        ("key gsk_abcdefghijklmnopqrstuvwxyz0123456789 here", "key [redacted] here"),
        ("sk_live_abcdefghijklmnopqrstuvwx and rk_test_abcdefghijklmnopqrstuvwx",
         "[redacted] and [redacted]"),
        ("jwt: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3",
         "jwt: [redacted]"),
        ('Authorization: Digest username="u", realm="r", response="6629fae49393a0539745"',
         "Authorization: Digest [redacted]"),
        # a value holding ":" was cut there, and kept whole; a short Basic after the header
        ("password=ab:cdSECRET9 next", "password=[redacted] next"),
        ("{'password': 'pa:ss9999x'}", "{'password': '[redacted]'}"),
        ("X-Api-Key: abc:defgh12345", "X-Api-Key: [redacted]"),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [redacted]"),
        ('"authorization": "basic dXNlcjpwYXNz"', '"authorization": "basic [redacted]"'),
        # a quoted passphrase of words, up to its closing quote (its first word was too short
        # to be taken, and kept the rest)
        ('{"password": "correct horse battery staple"}', '{"password": "[redacted]"}'),
        ("{'db_password': 'correct horse battery'}", "{'db_password': '[redacted]'}"),
        ('{\\"password\\": \\"correct horse battery\\", \\"user\\": \\"ann\\"}',
         '{\\"password\\": \\"[redacted]\\", \\"user\\": \\"ann\\"}'),
        ('{"password": "x", "note": "a long value here"}',
         '{"password": "x", "note": "a long value here"}'),
        ("the Basic plan, and Basic features", "the Basic plan, and Basic features"),
        # no secret: a name that does not end in a secret's word, a bare key, a count
        ("KeyError: arguments_of_the_call", "KeyError: arguments_of_the_call"),
        ("Token limitations apply", "Token limitations apply"),
        ("sort key: abcdefghijklmnop", "sort key: abcdefghijklmnop"),
        ("max_tokens=100000000, n: 1", "max_tokens=100000000, n: 1"),
        ("token_count: 123456789", "token_count: 123456789"),
        ("the bearer of good news arrives", "the bearer of good news arrives"),
        # a key of a record, not a secret: a tool's arguments keep them
        ('{"sort_key": "created_at_desc", "primary_key": "order-123456"}',
         '{"sort_key": "created_at_desc", "primary_key": "order-123456"}'),
        ("public_key=ssh-ed25519-AAAAC3NzaC1lZDI1", "public_key=ssh-ed25519-AAAAC3NzaC1lZDI1"),
        ("basic understanding of internationalization",
         "basic understanding of internationalization"),
        ("a digest of the week: everything new", "a digest of the week: everything new"),
    ],
)  # fmt: skip
def test_a_value_that_says_it_is_a_secret_is_redacted_without_the_environment(text, shown):
    """Error texts imported from elsewhere quote keys this machine does not hold (they were
    stored as they came, and printed by sql)."""
    assert redact(text, environ={}) == shown


def test_text_that_merely_resembles_a_key_is_kept(monkeypatch):
    monkeypatch.setenv("SOME_API_KEY", SLASHY)
    text = "AIzaSECRET9f8e7d/-=x AIzaSECRET9f8e7d%2F%2C%3Dx aizasecret9f8e7d/+=x QUl6YVNFQ1JF"
    assert redact(text) == text


# ---------------------------------------------------------------- not secrets (issue #26)


def test_the_working_folder_is_no_secret(tmp_path, monkeypatch):
    """PWD and OLDPWD hold folders: an error naming a path under them shows the path."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PWD", str(work))
    monkeypatch.setenv("OLDPWD", str(tmp_path))
    result = cli("score", "nope", "--store", work / "s")

    assert result.exit_code == 2
    assert f"Error: run 'nope' not found in store {work}/s" in result.output
    assert "[redacted]" not in result.output
    assert redact(f"{tmp_path} and {work}") == f"{tmp_path} and {work}"
    # nor is a setting that names a folder under it refused
    cache = f"{work}/cache"
    assert parse_model(MODEL, {"cache_dir": cache}).settings == {"cache_dir": cache}


@pytest.mark.parametrize(
    ("name", "value"),
    [("MYSQL_PWD", "hunter2-FAKE-pass"), ("DB_PWD", "/leading-slash-FAKE+pw=="),
     ("PGPASSWORD", "FAKE-pg-password"), ("AWS_SECRET_ACCESS_KEY", "wJalr/FAKE/bPxRfiCYFAKEKEY"),
     ("PWD", "FAKE-not-a-folder-at-all")],
)  # fmt: skip
def test_every_real_secret_stays_redacted(monkeypatch, tmp_path, name, value):
    """A credential's value is redacted whatever its name's other words, even one that
    begins with "/" like a path; only a value naming a file or folder that exists is not a
    secret."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, value)
    assert redact(f"denied for {quote(value)}") == "denied for [redacted]"
    with pytest.raises(ModelError, match=f"holds the value of {name}"):
        parse_model(MODEL, {"note": f"x{value}x"})


def test_secrets_in_a_recorded_runs_settings_are_redacted_too(key):
    """A run recorded by an older version may hold a secret in its settings: an error that
    quotes it is redacted once the model is built from that manifest."""
    other = "hdr-FAKE-5566778899"
    manifest = {
        "id": MODEL,
        "provider": "google_genai",
        "name": "gemini-2.5-flash",
        "settings": {"additional_headers": {"x-goog-api-key": other}},
    }
    assert other in redact(f"rejected {other}")
    build_chat_model(model_from_manifest(manifest))
    assert redact(f"rejected {other}") == "rejected [redacted]"


class _FailingAgent:
    """An agent whose model call fails with a message quoting the key."""

    def __init__(self, message: str) -> None:
        self.message = message

    async def astream(self, *args, **kwargs):
        raise RuntimeError(self.message)
        yield  # pragma: no cover  (an async generator)


def test_a_samples_error_is_redacted_before_it_is_cut(key):
    """A key straddling the 2,000 characters kept of an error leaves no part of it behind."""
    sample = Sample(id="s", index=0, input="hi", target=(GoldCall("f", {}),))
    message = "x" * 1990 + f" {key} " + "y" * 50
    record, _ = asyncio.run(run_sample(_FailingAgent(message), sample, "r", RecordOptions()))

    assert record["status"] == "error"
    assert record["error"] == "x" * 1990 + " [redacted"  # cut at 2,000 characters
    assert key[:8] not in record["error"]


def test_imported_error_texts_are_redacted(tmp_path, store, key):
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([{"id": "a", "input": "hi", "target": []}]))
    traces = tmp_path / "traces.jsonl"
    line = {"sample_id": "a", "messages": [], "status": "error", "error": f"bad key {key}"}
    traces.write_text(json.dumps(line) + "\n")
    inputs = load_inputs(None, dataset, "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS", None,
                         need_prompt=False)  # fmt: skip
    summary = import_traces(inputs, traces, store, "imp")

    (row,) = pq.read_table(store.run_dir(summary.run_id) / "samples.parquet").to_pylist()
    assert row["error"] == "bad key [redacted]"


def test_cli_error_and_warning_lines_never_show_a_key(key):
    from tcbreplay._cli import main

    @click.command("leak-for-test")
    def leak() -> None:
        warnings.warn(TcbReplayWarning(f"a proxy said {key}"), stacklevel=1)
        raise InputError(f"upstream answered: bad key {key}", hint=f"the key was {key}")

    main.add_command(leak)
    try:
        result = cli("leak-for-test")
    finally:
        main.commands.pop("leak-for-test")

    assert result.exit_code == 2
    assert "Error: upstream answered: bad key [redacted]" in result.output
    assert "Hint: the key was [redacted]" in result.output
    assert "Warning: a proxy said [redacted]" in result.output
    assert key not in result.output


def test_cli_usage_errors_never_show_a_key(key):
    result = cli("record", "--workers", key)
    assert result.exit_code == 2
    assert (
        "Error: Invalid value for '--workers': '[redacted]' is not a valid integer" in result.output
    )
    assert key not in result.output


def test_a_crash_traceback_never_shows_a_key(key, capsys):
    from tcbreplay._cli import _print_redacted

    try:
        raise RuntimeError(f"unexpected: {key}")
    except RuntimeError:
        _print_redacted(*sys.exc_info())

    err = capsys.readouterr().err
    assert "RuntimeError: unexpected: [redacted]" in err and key not in err


@pytest.mark.parametrize(
    "option",
    [
        'headers=["Authorization: Bearer abcdefgh12345"]',
        "foo=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        'extra_body={"k": "sk-proj-abcdefghijklmnopqrstuvwxyz"}',
        'model_kwargs={"user": "AKIAABCDEFGHIJKLMNOP"}',
        'extra_body={"note": "api_key=abcdefgh12345"}',
    ],
)
def test_a_model_option_holding_a_credential_by_its_form_is_refused(tmp_path, option):
    """A header line, a provider's key or a name=value inside a value: written into the
    manifest as given (the forms error texts are redacted of)."""
    result = cli("record", "--model", "sim", "--model-option", option, "--limit", "1",
                 "--store", tmp_path / "s")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "holds a credential by its form" in result.output
    secret = option.split("=", 1)[1]
    assert not any(part in result.output for part in re.findall(r"[A-Za-z0-9_-]{12,}", secret))
    assert not (tmp_path / "s").exists()


def test_option_values_with_words_like_token_or_key_hold_no_secret():
    for value in (["Token limit reached"], "keyboard shortcuts", {"max_tokens": 4096},
                  "The Bearer of news", "sk-short"):  # fmt: skip
        assert list(_model_secrets.find_secrets("stop", value, environ={})) == [], value


def test_a_run_id_holding_a_secrets_value_is_refused_unshown(tmp_path, monkeypatch):
    """It names the run's folder and every next step printed (the success path showed it)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRETVALUE1234567890abc")
    for run_id in ("sk-SECRETVALUE1234567890abc", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"):
        result = cli("record", "--model", "sim", "--limit", "1", "--run-id", run_id,
                     "--store", tmp_path / "s")  # fmt: skip
        assert result.exit_code == 2, result.output
        assert "the run id holds a secret's value" in result.output
        assert run_id not in result.output
    assert not (tmp_path / "s").exists()
