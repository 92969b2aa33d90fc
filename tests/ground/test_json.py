"""How deep and how large JSON values may be (issue #18): one limit, checked on the way in, and
values already in a store beyond it give a one-line error naming the sample, never a traceback.

The input paths (dataset, traces, tools, --model-option, a model's answer) are tested with
their modules; here: the limits themselves, the record path's serialization, and stores."""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import TEST_DATA, as_the_run_wrote, cli, with_messages
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from tcbreplay import _json
from tcbreplay._importers import archives
from tcbreplay._record.messages import serialize_messages
from tcbreplay._record.models import parse_model
from tcbreplay.errors import ModelError


def nested(levels: int, leaf: str = "1") -> str:
    return "[" * levels + leaf + "]" * levels


def deep_value(levels: int, leaf: object = 1) -> object:
    for _ in range(levels):
        leaf = [leaf]
    return leaf


# ---------------------------------------------------------------- the limits


def test_the_limits_sit_below_where_python_breaks():
    # Python's readers stop near the recursion limit, the spec's comparison at half of it;
    # Python converts at least 640 digits under any int_max_str_digits setting
    assert sys.getrecursionlimit() >= _json.MAX_DEPTH * 4
    assert _json.MAX_INT_DIGITS <= 640


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (nested(101), 1, "a value nested deeper than 100 levels of arrays and objects"),
        ("{\n\n" + '"a": ' + nested(5000) + "}", 3, "a value nested deeper than 100 levels"),
        ('[1,\n"x",\n' + "9" * 641 + "]", 3, "an integer of 641 digits (at most 640)"),
        ("[1,\n" + "-" + "9" * 5000 + "]", 2, "an integer of 5,000 digits (at most 640)"),
        ('{"a": [' + nested(99, "{}") + "]}", 1, "a value nested deeper than 100 levels"),
    ],
)
def test_loads_refuses_what_is_beyond_the_limits_with_its_line(text, line, problem):
    with pytest.raises(_json.LimitError) as info:
        _json.loads(text)
    assert info.value.line == line
    assert info.value.problem.startswith(problem)
    assert str(info.value) == f"line {line}: {info.value.problem}"
    with pytest.raises(_json.LimitError) as info:
        _json.loads(text, first_line=10)
    assert info.value.line == line + 9


@pytest.mark.parametrize(
    "text",
    [
        nested(100),
        "9" * 640,
        "-" + "9" * 640,
        "9" * 5000 + ".5",  # floats are read by Python's float(), any length
        "1e" + "0" * 700,
        json.dumps(["[" * 500, "9" * 5000, "{" * 200]),  # inside strings: text
        json.dumps([[i, {"x": [i]}] for i in range(200)]),  # many, but shallow
    ],
)
def test_loads_reads_what_is_within_the_limits(text):
    assert _json.loads(text) == json.loads(text)


def test_loads_leaves_text_that_is_not_json_to_json():
    with pytest.raises(json.JSONDecodeError):
        _json.loads("[1, 2")


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()  # NaN and the infinities too, which Python's writer writes
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _same(a: object, b: object) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN, 1 not 1.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))  # type: ignore[arg-type]
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


@pytest.mark.slow  # (a property test: 3-4 s)
@settings(max_examples=150)
@given(JSON_VALUES, st.booleans(), st.booleans())
def test_parse_reads_what_json_loads_reads(value, ascii_only, as_bytes):
    """orjson reads where it reads the same: long integers, NaN, lone surrogates and the
    rest it reads otherwise or refuses go to Python's reader."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    data = text.encode("utf-8", "surrogatepass") if as_bytes else text
    try:
        expected = json.loads(data)
    except ValueError as exc:  # bytes that are not UTF-8 (a lone surrogate written raw)
        with pytest.raises(type(exc)):
            _json.parse(data)
        return
    assert _same(_json.parse(data), expected)


@pytest.mark.parametrize(
    "text",
    [
        "12345678901234567890123",
        "-9300000000000000000",
        "18446744073709551616",
        '{"n": [1, 99999999999999999999]}',
        '["12345678901234567890", 12345678901234567890]',
        "1e400",
        "[NaN, -Infinity]",
        '"\\ud800"',
        "0.1000000000000000055511151231257827",
    ],
)
def test_parse_reads_what_orjson_would_read_otherwise_as_python_does(text):
    assert _same(_json.parse(text), json.loads(text))
    assert _same(_json.parse(text.encode()), json.loads(text))


@pytest.mark.slow  # (a property test: 3 s)
@settings(max_examples=150)
@given(JSON_VALUES, st.booleans())
def test_a_value_parse_plain_read_is_written_back_as_the_same_value(value, ascii_only):
    """What export writes: the value read, written by orjson where orjson read it, else by
    Python's writer; read again, it is the value Python's reader reads (NaN, infinities,
    long integers and lone surrogates included)."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    read, plain = _json.parse_plain(text)
    written = _json.dumps_plain({"v": read, "n": 2**63 - 1, "s": "é"}, plain)
    assert _same(json.loads(written), {"v": json.loads(text), "n": 2**63 - 1, "s": "é"})


@pytest.mark.parametrize(
    "text", ["[NaN, -Infinity]", "1e400", "18446744073709551616", '"\\ud800"', '{"a": NaN}']
)
def test_what_orjson_would_write_otherwise_is_not_plain(text):
    read, plain = _json.parse_plain(text)
    assert not plain
    assert _same(json.loads(_json.dumps_plain(read, plain)), json.loads(text))
    # (orjson itself writes NaN as null: the flag is what keeps it from doing so here)
    if read != read or read in (float("inf"), float("-inf")):
        assert json.loads(_json.dumps_plain(read, True)) is None


def test_a_value_orjson_refuses_to_write_is_written_by_python_even_when_called_plain():
    assert json.loads(_json.dumps_plain([2**70, "\ud800"], True)) == [2**70, "\ud800"]


@pytest.mark.parametrize("text", ["", "[1,", "{'a': 1}", "nul", "[1] x"])
def test_parse_refuses_what_json_loads_refuses(text):
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        _json.parse(text)
    assert str(got.value) == str(expected.value)


def test_bounded_replaces_only_what_is_beyond_the_limits():
    value = {"ok": [1, "a", {"b": None}], "n": 10**700, "deep": deep_value(3000), "m": -(10**640)}
    out = _json.bounded(value)
    assert _json.value_problem(out) is None
    assert out["ok"] == value["ok"] and out["n"] == out["m"] == _json.OVER_DIGITS
    inner, lists = out["deep"], 0
    while isinstance(inner, list):
        inner, lists = inner[0], lists + 1
    # the object is level 1, its lists levels 2 to 100; what was deeper is the string
    assert (lists, inner) == (_json.MAX_DEPTH - 1, _json.OVER_DEPTH)
    same = {"a": [1, 2]}
    assert _json.bounded(same) is same


# ---------------------------------------------------------------- archives (#27)


def zip_of(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def declaring(data: bytes, size: int) -> bytes:
    """The zip ``data`` with every member's unpacked size declared as ``size``, in its local
    header and in the central directory (a bomb may declare anything)."""
    out = bytearray(data)
    for signature, field in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = out.find(signature)
        while at >= 0:
            struct.pack_into("<I", out, at + field, size)
            at = out.find(signature, at + 4)
    return bytes(out)


BOMB = zip_of({"header.json": b"{}", "samples/s.json": b"a" * 2**23})


def test_an_archive_within_the_limits_passes():
    assert archives.zip_problem(zip_of({"a.json": b'{"a": 1}' * 10_000, "b": b""})) is None
    assert archives.zip_problem(zip_of({"a": os.urandom(2**16)}, zipfile.ZIP_STORED)) is None


@pytest.mark.parametrize("declared", [None, 100], ids=["as-declared", "declared-small"])
def test_a_member_that_unpacks_to_far_more_than_its_size_is_refused_early(declared):
    data = BOMB if declared is None else declaring(BOMB, declared)
    (member,) = [i for i in zipfile.ZipFile(io.BytesIO(BOMB)).infolist() if i.filename[0] == "s"]
    assert archives.zip_problem(data) == (
        f"member 'samples/s.json' unpacks to more than 100 times its {member.compress_size:,} "
        "compressed bytes"
    )


def test_the_size_of_a_member_and_of_all_members_is_capped(monkeypatch):
    monkeypatch.setattr(archives, "MAX_MEMBER_BYTES", 2**16)
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 2**17)
    noise = os.urandom(2**16 + 1)  # unpacks to about its size: no ratio to speak of
    assert archives.zip_problem(zip_of({"a": noise[:-1], "b": noise})) == (
        "member 'b' unpacks to more than 64 KiB"
    )
    many = {name: noise[:-1] for name in "abc"}
    assert archives.zip_problem(zip_of(many)) == "its members unpack to more than 128 KiB in all"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"PK\x03\x04 not a zip", "not a zip file (BadZipFile: File is not a zip file)"),
        (zip_of({"a": b"x" * 100}, zipfile.ZIP_BZIP2),
         "member 'a' is compressed with method 12, which tcbreplay does not unpack"),
    ],
    ids=["not-a-zip", "bzip2"],
)  # fmt: skip
def test_an_archive_that_cannot_be_unpacked_is_refused(data, problem):
    assert archives.zip_problem(data) == problem


def test_a_member_whose_compressed_bytes_are_garbage_is_refused():
    data = bytearray(zip_of({"a.json": b'{"a": 1}' * 100}))
    start = 30 + len("a.json")  # the member's compressed bytes follow its local header
    data[start : start + 4] = b"\xff\xff\xff\xff"
    assert archives.zip_problem(bytes(data)).startswith("member 'a.json' cannot be unpacked (")


def test_a_model_option_beyond_the_limits_is_refused():
    with pytest.raises(ModelError, match="--model-option x: a value nested deeper than 100"):
        parse_model("google_genai:gemini-2.5-flash", {"x": nested(1000)})
    with pytest.raises(ModelError, match="--model-option x: an integer of 4,301 digits"):
        parse_model("google_genai:gemini-2.5-flash", {"x": "9" * 4301})


# ---------------------------------------------------------------- the record path


@pytest.mark.parametrize(
    ("args", "stored"),
    [
        ({"a": deep_value(3000), "b": 1}, None),  # too deep for Python's JSON writer
        ({"a": 10**5000, "b": 1}, {"a": _json.OVER_DIGITS, "b": 1}),  # Python will not write it
        ({"a": 10**700, "b": [1, 2]}, {"a": _json.OVER_DIGITS, "b": [1, 2]}),
    ],
    ids=["3000-deep", "5000-digits", "701-digits"],
)
def test_a_models_arguments_beyond_the_limits_are_stored_bounded(args, stored):
    """serialize_messages raised (RecursionError, ValueError) out of the sample, ending the
    whole recording, or stored values that crashed score later."""
    message = AIMessage("", tool_calls=[{"name": "f", "args": args, "id": "c1"}], id="m1")
    (row,) = serialize_messages([message], {})
    data = _json.loads(row["message"])["data"]
    (call,) = data["tool_calls"]
    if stored is not None:
        assert call["args"] == stored
    else:
        assert call["args"]["b"] == 1 and _json.OVER_DEPTH in row["message"]


# ---------------------------------------------------------------- what a store already holds


@pytest.fixture
def hand_made(tmp_path):
    """A run imported within the limits, whose stored texts a test then rewrites by hand (as
    an older version, or a person, could have written them): (store root, rewrite)."""
    dataset = tmp_path / "ds.json"
    dataset.write_text(
        json.dumps(
            [
                {"id": "a", "input": "x", "target": [{"name": "add_numbers", "args": {"a": 1}}]},
                {
                    "id": "b",
                    "input": "y",
                    "target": [{"name": "add_numbers", "args": {"a": [[1]]}}],
                },
            ]
        )
    )
    call = {"name": "add_numbers", "args": {"a": [[7]], "b": 2}, "id": "c1"}
    lines = [
        {
            "sample_id": sid,
            "messages": [{"type": "ai", "data": {"content": "", "tool_calls": [call]}}],
        }
        for sid in ("a", "b")
    ]
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps(line) + "\n" for line in lines))
    root = tmp_path / "traces"
    tools = str(TEST_DATA / "tools_shop.json")
    result = cli("import", "--dataset", dataset, "--tools", tools, "--traces", traces,
                 "--run-id", "r", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output

    def rewrite(agent: str | None = None, gold: str | None = None) -> None:
        """Sample b's agent argument ``a`` and/or gold argument ``a`` become these texts."""
        for name, column, old, new in (
            ("messages.parquet", "message", "[[7]]", agent),
            ("samples.parquet", "gold", "[[1]]", gold),
        ):
            if new is None:
                continue
            path = root / "r" / name
            table = pq.read_table(path)
            ids = table["sample_id"].to_pylist()
            texts = [
                t.replace(old, new) if sid == "b" else t
                for sid, t in zip(ids, table[column].to_pylist(), strict=True)
            ]
            if column == "message":
                pq.write_table(with_messages(table, texts), path)
            else:
                at = table.schema.get_field_index(column)
                pq.write_table(table.set_column(at, column, pa.array(texts, pa.string())), path)
            as_the_run_wrote(path)

    return root, rewrite


STORED = {
    "600-deep-both": {"agent": nested(600, "7"), "gold": nested(600)},  # crashed score and report
    "2000-deep": {"agent": nested(2000, "7")},  # crashed score, abet, report
    "2000-deep-gold": {"gold": nested(2000)},
    "5000-digits": {"agent": "9" * 5000, "gold": "8" * 5000},  # abet: an error naming no sample
    "150-deep": {"agent": nested(150, "7")},
}


@pytest.mark.parametrize("case", STORED)
@pytest.mark.parametrize("command", ["score", "score-abet", "report", "diff"])
def test_values_beyond_the_limits_in_a_store_give_one_line_naming_the_sample(
    hand_made, tmp_path, case, command
):
    root, rewrite = hand_made
    rewrite(**STORED[case])
    args = {
        "score": ["score", "r"],
        "score-abet": ["score", "r", "--scorer", "abet"],
        "report": ["report", "r", "-o", tmp_path / "r.html"],
        "diff": ["diff", "r", "r"],
    }[command]
    result = cli(*args, "--store", root)

    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    if result.exit_code == 0:  # the compiled scorer judged it without reading it in Python
        assert case == "5000-digits" and command != "score-abet"
        return
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stderr
    side = "gold call 0" if "gold" in case else "call 0"
    assert errors[0].startswith(f"Error: sample 'b': {side}: tool-call arguments hold "), errors
    assert "Hint: tcbreplay reads JSON nested at most 100 levels deep" in result.stderr
