"""Loading and validating datasets: three gold shapes, JSON or JSONL, every problem at once."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import TEST_DATA, cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._inputs.dataset import (
    GoldCall,
    check_against_tools,
    dataset_from_entries,
    load_dataset,
)
from tcbreplay.errors import DatasetError, InputError

DATA = TEST_DATA
SHOP_PARAMS = {"list_items": set(), "add_numbers": {"a", "b"}, "multiply_numbers": {"a", "b"}}

SHAPES_EXPECTED = [
    (0, None, "What is 2 plus 3?", [("add_numbers", {"a": 3, "b": 2})]),
    (
        "catalog-then-multiply",
        "catalog",
        "How much are 3 notebooks?",
        [("list_items", {}), ("multiply_numbers", {"a": 3, "b": 2.5})],
    ),
    (7, None, "Add 1.5 and 2", [("add_numbers", {"a": 2, "b": 1.5})]),
    (3, None, "Hello!", []),
]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def summary(dataset) -> list[tuple]:
    return [
        (s.id, s.category, s.input, [(c.name, c.args) for c in s.target]) for s in dataset.samples
    ]


def problems(exc: pytest.ExceptionInfo) -> list[str]:
    return str(exc.value).splitlines()


# ---------------------------------------------------------------- the three shapes


@pytest.mark.parametrize("name", ["ds_shapes.json", "ds_shapes.jsonl"])
def test_three_gold_shapes_load_to_the_same_calls(name):
    dataset = load_dataset(DATA / name)
    assert summary(dataset) == SHAPES_EXPECTED
    assert [s.index for s in dataset.samples] == [0, 1, 2, 3]
    assert [s.sample_id for s in dataset.samples] == ["0", "catalog-then-multiply", "7", "3"]
    assert dataset.by_id["7"].target == (GoldCall("add_numbers", {"a": 2, "b": 1.5}),)
    assert dataset.source == str(DATA / name)
    assert len(dataset.sha256) == 64
    assert dataset.tool_names() == {"add_numbers", "list_items", "multiply_numbers"}
    check_against_tools(dataset, SHOP_PARAMS, name)


def test_json_and_jsonl_give_identical_entries():
    assert (
        load_dataset(DATA / "ds_shapes.json").entries()
        == load_dataset(DATA / "ds_shapes.jsonl").entries()
    )


def test_entries_are_normalised_and_round_trip_through_a_manifest():
    dataset = load_dataset(DATA / "ds_shapes.json")
    entries = dataset.entries()
    assert entries[1] == {
        "id": "catalog-then-multiply",
        "input": "How much are 3 notebooks?",
        "target": [
            {"name": "list_items", "args": {}},
            {"name": "multiply_numbers", "args": {"a": 3, "b": 2.5}},
        ],
        "category": "catalog",
    }
    again = dataset_from_entries(json.loads(json.dumps(entries)), "manifest")
    assert summary(again) == summary(dataset)
    assert again.entries() == entries


def test_numbers_keep_their_json_type(tmp_path):
    path = write(
        tmp_path,
        "ds.json",
        '[{"input": "x", "tool_call_names": ["add_numbers"], "tool_call_args": '
        '[{"a": 3, "b": 3.0}]}]',
    )
    args = load_dataset(path).samples[0].target[0].args
    assert type(args["a"]) is int
    assert type(args["b"]) is float


def test_a_utf8_bom_and_blank_lines_are_accepted(tmp_path):
    text = '\n{"input": "héllo", "target": []}\n\n{"input": "b", "target": []}\n\n'
    path = tmp_path / "ds.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    dataset = load_dataset(path)
    assert [(s.id, s.input) for s in dataset.samples] == [(0, "héllo"), (1, "b")]


def test_jsonl_lines_end_at_newline_only(tmp_path):
    """U+2028, U+2029 and U+0085 inside a JSON string are text, not line ends."""
    text = '{"input": "a\u2028b\u2029c\x85d", "target": []}\r\n{"input": "e", "target": []}\r\n'
    dataset = load_dataset(write(tmp_path, "ds.jsonl", text))
    assert [s.input for s in dataset.samples] == ["a\u2028b\u2029c\x85d", "e"]
    bad = write(tmp_path, "bad.jsonl", '{"input": "a\u2028b", "target": []}\n{"input": 1}\n{oops\n')
    with pytest.raises(DatasetError) as info:
        load_dataset(bad)
    assert problems(info) == ["bad.jsonl: line 3: not valid JSON: Expecting property name "
                              "enclosed in double quotes"]  # fmt: skip


def test_default_id_is_the_zero_based_position_among_entries(tmp_path):
    path = write(
        tmp_path, "ds.jsonl", '{"input": "a", "target": []}\n\n\n{"input": "b", "target": []}\n'
    )
    assert [s.id for s in load_dataset(path).samples] == [0, 1]


# ---------------------------------------------------------------- the reference dataset


def test_reference_dataset_loads_unchanged(reference_dir):
    path = reference_dir / "dataset.json"
    raw = json.loads(path.read_text())
    dataset = load_dataset(path)
    assert len(dataset) == 13
    assert sum(len(s.target) for s in dataset.samples) == 45
    assert [s.id for s in dataset.samples] == list(range(13))
    for sample, entry in zip(dataset.samples, raw, strict=True):
        assert sample.input == entry["input"]
        assert [c.name for c in sample.target] == entry["tool_call_names"]
        assert [c.args for c in sample.target] == entry["tool_call_args"]
        for call, args in zip(sample.target, entry["tool_call_args"], strict=True):
            assert {k: type(v) for k, v in call.args.items()} == {
                k: type(v) for k, v in args.items()
            }
        assert sample.target[0].name == "list_items"
        assert sample.category is None
    check_against_tools(dataset, SHOP_PARAMS, path.name)


def test_reference_dataset_validates_against_the_built_in_tools(reference_dir):
    inputs = load_inputs(
        None,
        reference_dir / "dataset.json",
        "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS",
        None,
        need_prompt=False,
    )
    assert len(inputs.dataset) == 13
    assert inputs.manifest_fields()["dataset"]["n_entries"] == len(inputs.dataset.entries())


def test_built_in_dataset_validates_against_its_tools():
    inputs = load_inputs("tool-call")
    assert len(inputs.dataset) == 94
    assert len({s.sample_id for s in inputs.dataset.samples}) == 94


# ---------------------------------------------------------------- structural problems


def test_every_structural_problem_is_reported_with_its_entry():
    with pytest.raises(DatasetError) as info:
        load_dataset(DATA / "ds_problems.json")
    assert problems(info) == [
        "ds_problems.json: entry 0: missing input",
        "ds_problems.json: entry 1: tool_call_args has 1 items, tool_call_names has 2",
        "ds_problems.json: entry 2: tool_call_args[0] is not an object (a list)",
        "ds_problems.json: entry 3: target[0].args is not an object (a string)",
        "ds_problems.json: entry 5: duplicate id 'ok' (also entry 4)",
    ]
    assert isinstance(info.value, InputError)
    assert info.value.exit_code == 2


def test_jsonl_problems_name_the_line():
    with pytest.raises(DatasetError) as info:
        load_dataset(DATA / "ds_problems.jsonl")
    assert problems(info) == [
        "ds_problems.jsonl: line 3: missing input",
        "ds_problems.jsonl: line 4: target.tool_call_args has 0 items, "
        "target.tool_call_names has 1",
        "ds_problems.jsonl: line 5: duplicate id 'ok' (also line 1)",
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"target": []}, "missing input"),
        ({"input": 5, "target": []}, "input must be a string"),
        ({"input": "x"}, "missing gold calls"),
        ({"input": "x", "tool_call_names": ["f"]}, "missing tool_call_args"),
        ({"input": "x", "tool_call_args": [{}]}, "missing tool_call_names"),
        ({"input": "x", "tool_call_names": ["f", "g"], "tool_call_args": [{}]}, "has 1 items"),
        ({"input": "x", "tool_call_names": ["f"], "tool_call_args": [None]}, "is not an object"),
        ({"input": "x", "tool_call_names": ["f"], "tool_call_args": ["{}"]}, "is not an object"),
        ({"input": "x", "target": [{"name": "f", "args": []}]}, "target[0].args is not an object"),
        ({"input": "x", "target": [{"args": {}}]}, "target[0].name"),
        ({"input": "x", "target": ["f"]}, "target[0] must be an object"),
        (
            {"input": "x", "target": {"tool_call_names": ["f"], "tool_call_args": [{}, {}]}},
            "target.tool_call_args has 2 items, target.tool_call_names has 1",
        ),
        (
            {"input": "x", "target": {"tool_call_names": ["f"], "tool_call_args": [3]}},
            "target.tool_call_args[0] is not an object",
        ),
        ({"input": "x", "target": "f"}, "target must be a list of calls or an object"),
        ({"input": "x", "target": [], "id": 1.5}, "id must be a string or an integer"),
        ({"input": "x", "target": [], "id": True}, "id must be a string or an integer"),
        ({"input": "x", "target": [], "category": 3}, "category must be a string"),
        (
            {"input": "x \ud800", "target": []},
            "holds a lone surrogate \\ud800, which is not valid Unicode",
        ),
        ({"input": "x", "target": [{"name": "f", "args": {"\udfff": 1}}]}, "surrogate \\udfff"),
        (
            {"input": "x", "target": [], "tool_call_names": [], "tool_call_args": []},
            "gives both target and tool_call_names and tool_call_args: give the gold calls one way",
        ),
        (
            {"input": "x", "target": [{"name": "f"}], "tool_call_names": ["f"]},
            "gives both target and tool_call_names:",
        ),
        # unknown keys are refused, never read as absent (#20): kwargs made ahr 1.0
        (
            {"input": "x", "target": [{"name": "f", "kwargs": {"a": 1}}]},
            "unknown key 'kwargs' in target[0] (did you mean args?)",
        ),
        (
            {"input": "x", "target": [{"name": "f", "arguments": {}}]},
            "unknown key 'arguments' in target[0] (did you mean args?)",
        ),
        (
            {"input": "x", "target": [{"name": "f", "args": {}, "id": "c1"}]},
            "unknown key 'id' in target[0] (a gold call has name, args, accept, optional, "
            "group, compare and side)",
        ),
        (
            {"input": "x", "target": [], "prompt": "y"},
            "unknown key 'prompt' in the entry (did you mean input?)",
        ),
        # an entry's unknown key and its gold call's: said together (the call's, with its
        # hint, was not said until the entry's was fixed)
        (
            {"input": "x", "extra": 1, "target": [{"name": "f", "kwargs": {}}]},
            "unknown key 'extra' in the entry (an entry has id, input, its gold calls, "
            "category, metadata, order and tools; put other fields in metadata); unknown key "
            "'kwargs' in target[0] (did you mean args?)",
        ),
        ({"input": "x", "target": [], "categry": "y"}, "(did you mean category?)"),
        (
            {"input": "x", "target": [], "reward": 1.0},
            "unknown key 'reward' in the entry (an entry has id, input, its gold calls, "
            "category, metadata, order and tools; put other fields in metadata)",
        ),
        (
            {"input": "x", "target": {"tool_call_names": [], "tool_call_args": [], "n": 0}},
            "unknown key 'n' in target",
        ),
        ({"input": "x", "target": [], "metadata": [1]}, "metadata must be an object, got a list"),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_each_problem_names_its_place(tmp_path, entry, message, fmt):
    good = {"input": "fine", "target": []}
    if fmt == "json":
        path = write(tmp_path, "ds.json", json.dumps([good, entry]))
        place = "ds.json: entry 1: "
    else:
        path = write(tmp_path, "ds.jsonl", json.dumps(good) + "\n" + json.dumps(entry) + "\n")
        place = "ds.jsonl: line 2: "
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    (line,) = problems(info)
    assert line.startswith(place)
    assert message in line


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([{"id": 1}, {"id": "1"}], "entry 1: duplicate id '1' (also entry 0)"),
        ([{}, {"id": 0}], "entry 1: duplicate id 0 (also entry 0)"),
        ([{"id": 1}, {}], "entry 1: duplicate id 1 (also entry 0)"),
        ([{"id": "a"}, {"id": "b"}, {"id": "a"}], "entry 2: duplicate id 'a' (also entry 0)"),
    ],
)
def test_duplicate_ids_compare_as_strings(tmp_path, entries, expected):
    data = [{**e, "input": "x", "target": []} for e in entries]
    path = write(tmp_path, "ds.json", json.dumps(data))
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert problems(info) == [f"ds.json: {expected}"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("ds.json", "", "ds.json: the file is empty"),
        ("ds.json", "  \n\t\n", "ds.json: the file is empty"),
        ("ds.jsonl", "\n\n", "ds.jsonl: the file is empty"),
        ("ds.json", "[]", "ds.json: the dataset has no entries"),
        ("ds.json", '[{"input": "x", "target": []},', "ds.json: line 1: not valid JSON"),
        ("ds.json", '[\n  {"input": "x",\n   "target": [}\n]', "ds.json: line 3: not valid JSON"),
        (
            "ds.jsonl",
            '{"input": "x", "target": []}\n{"input": "y", target: []}\n',
            "ds.jsonl: line 2: not valid JSON",
        ),
        ("ds.json", '[1, "x"]', "ds.json: entry 0: expected an object, got a number"),
    ],
)
def test_malformed_and_empty_files(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert problems(info)[0].startswith(message)


def test_missing_or_binary_file(tmp_path):
    with pytest.raises(DatasetError, match="cannot read dataset"):
        load_dataset(tmp_path / "absent.json")
    path = tmp_path / "ds.json"
    path.write_bytes(b"\xff\xfe[]")
    with pytest.raises(DatasetError, match=r"ds\.json: not UTF-8"):
        load_dataset(path)


# ---------------------------------------------------------------- against the tool set


def test_gold_tool_the_tool_set_lacks_and_argument_a_tool_does_not_take():
    dataset = dataset_from_entries(
        [
            {"input": "a", "target": [{"name": "list_items", "args": {}}]},
            {"input": "b", "target": [{"name": "subtract", "args": {"a": 1}}]},
            {
                "input": "c",
                "target": [
                    {"name": "add_numbers", "args": {"a": 1, "b": 2}},
                    {"name": "add_numbers", "args": {"a": 1, "c": 2, "d": 0}},
                ],
            },
        ]
    )
    with pytest.raises(DatasetError) as info:
        check_against_tools(dataset, SHOP_PARAMS, "ds.json")
    assert problems(info) == [
        "ds.json: entry 1: gold call 0 uses tool 'subtract', which the tool set lacks "
        "(tools: add_numbers, list_items, multiply_numbers)",
        "ds.json: entry 2: gold call 1 (add_numbers) passes 'c', 'd', which add_numbers "
        "does not take",
    ]


def test_tool_problems_are_found_when_loading_inputs(tmp_path):
    path = write(
        tmp_path,
        "ds.json",
        json.dumps(
            [
                {"input": "a", "tool_call_names": ["divide"], "tool_call_args": [{}]},
                {"input": "b", "tool_call_names": ["list_items"], "tool_call_args": [{"page": 2}]},
            ]
        ),
    )
    with pytest.raises(DatasetError) as info:
        load_inputs(None, path, str(DATA / "tools_shop.json"), None, need_prompt=False)
    lines = problems(info)
    assert len(lines) == 2
    assert lines[0].startswith("ds.json: entry 0: gold call 0 uses tool 'divide'")
    assert lines[1].startswith("ds.json: entry 1: gold call 0 (list_items) passes 'page'")


def test_tool_problems_in_jsonl_name_the_line(tmp_path):
    path = write(
        tmp_path,
        "ds.jsonl",
        '{"input": "a", "target": []}\n\n'
        '{"input": "b", "target": [{"name": "divide", "args": {}}]}\n',
    )
    with pytest.raises(DatasetError) as info:
        load_inputs(None, path, str(DATA / "tools_shop.json"), None, need_prompt=False)
    (line,) = problems(info)
    assert line.startswith("ds.jsonl: line 3: gold call 0 uses tool 'divide'")


def test_structural_and_tool_problems_are_reported_together(tmp_path):
    path = write(
        tmp_path,
        "ds.json",
        json.dumps(
            [
                {"target": []},
                {"input": "b", "target": [{"name": "divide", "args": {}}]},
            ]
        ),
    )
    with pytest.raises(DatasetError) as info:
        load_inputs(None, path, str(DATA / "tools_shop.json"), None, need_prompt=False)
    lines = problems(info)
    assert lines[0] == "ds.json: entry 0: missing input"
    assert lines[1].startswith("ds.json: entry 1: gold call 0 uses tool 'divide'")


def test_duplicate_of_an_invalid_entry_is_reported(tmp_path):
    path = write(
        tmp_path,
        "ds.json",
        json.dumps([{"id": "a", "target": []}, {"id": "a", "input": "x", "target": []}]),
    )
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    assert problems(info) == [
        "ds.json: entry 0: missing input",
        "ds.json: entry 1: duplicate id 'a' (also entry 0)",
    ]


# ---------------------------------------------------------------- property: shapes agree

names = st.sampled_from(["list_items", "add_numbers", "multiply_numbers", "f"])
values = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
)
calls = st.lists(
    st.tuples(names, st.dictionaries(st.sampled_from("abc"), values, max_size=3)), max_size=4
)


@pytest.mark.slow
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(calls, min_size=1, max_size=5), st.integers(0, 2))
def test_any_shape_gives_the_same_normalised_entries(tmp_path, golds, shape):
    def entry(i, gold):
        names_, args_ = [n for n, _ in gold], [a for _, a in gold]
        if shape == 0:
            return {"input": f"q{i}", "tool_call_names": names_, "tool_call_args": args_}
        if shape == 1:
            return {"input": f"q{i}", "target": [{"name": n, "args": a} for n, a in gold]}
        return {"input": f"q{i}", "target": {"tool_call_names": names_, "tool_call_args": args_}}

    path = tmp_path / f"ds{shape}.json"
    path.write_text(json.dumps([entry(i, g) for i, g in enumerate(golds)]))
    dataset = load_dataset(path)
    assert dataset.entries() == [
        {"id": i, "input": f"q{i}", "target": [{"name": n, "args": a} for n, a in g]}
        for i, g in enumerate(golds)
    ]


def test_metadata_is_kept_with_the_sample_and_in_the_normalised_entries(tmp_path):
    meta = {"reward": 1.0, "tags": ["a"], "info": {"n": 2}}
    path = write(tmp_path, "ds.json", json.dumps([
        {"input": "x", "target": [], "metadata": meta},
        {"input": "y", "target": [], "metadata": {}},
    ]))  # fmt: skip
    dataset = load_dataset(path)
    assert [s.metadata for s in dataset.samples] == [meta, None]
    assert dataset.entries()[0]["metadata"] == meta
    assert "metadata" not in dataset.entries()[1]
    assert dataset_from_entries(dataset.entries()).samples == dataset.samples


# ---------------------------------------------------------------- through the CLI


def test_an_unknown_key_is_refused_before_anything_is_written(tmp_path):
    """The τ-bench gold shape {"name", "kwargs"} was read as a call without arguments."""
    dataset = write(
        tmp_path, "ds.jsonl",
        '{"input": "a", "target": []}\n'
        '{"input": "b", "target": [{"name": "add_numbers", "kwargs": {"a": 1, "b": 2}}]}\n',
    )  # fmt: skip
    traces = write(tmp_path, "traces.jsonl", '{"sample_id": 0, "messages": []}\n')
    root = tmp_path / "traces"
    for args in (
        ["record", "--model", "sim:seed=1"],
        ["import", "--tools", DATA / "tools_shop.json", "--traces", traces],
    ):
        result = cli(*args, "--dataset", dataset, "--run-id", "r", "--store", root)
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            "Error: ds.jsonl: line 2: unknown key 'kwargs' in target[0] (did you mean args?)"
        ]
        assert not root.exists()


@pytest.mark.parametrize("command", ["record", "import"])
def test_a_lone_surrogate_is_refused_before_anything_is_written(tmp_path, command):
    dataset = write(
        tmp_path, "ds.jsonl", '{"input": "a", "target": []}\n{"input": "b \\ud800", "target": []}\n'
    )
    root = tmp_path / "traces"
    if command == "record":
        args = ["record", "--model", "sim:seed=1", "--dataset", dataset, "--run-id", "r"]
    else:
        traces = write(tmp_path, "traces.jsonl", '{"sample_id": 0, "messages": []}\n')
        args = ["import", "--dataset", dataset, "--tools", DATA / "tools_shop.json",
                "--traces", traces, "--run-id", "r"]  # fmt: skip
    result = cli(*args, "--store", root)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "Error: ds.jsonl: line 2: holds a lone surrogate \\ud800, which is not valid Unicode"
    ]
    assert not root.exists()


# ---------------------------------------------------------------- deep or huge values (#18)


def nested(levels: int, leaf: str = "1") -> str:
    """JSON text of ``leaf`` inside ``levels`` arrays."""
    return "[" * levels + leaf + "]" * levels


def _entries_text(fmt: str, value: str) -> str:
    """Two entries, the second with gold argument ``a`` = ``value``: on line 3 of a JSON array
    file, on line 2 of a JSONL file."""
    entries = [
        '{"input": "a", "target": []}',
        '{"input": "b", "target": [{"name": "add_numbers", "args": {"a": ' + value + ', "b": 1}}]}',
    ]
    return "[\n" + ",\n".join(entries) + "\n]\n" if fmt == "json" else "\n".join(entries) + "\n"


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (nested(600), "a value nested deeper than 100 levels of arrays and objects"),
        (nested(1000), "a value nested deeper than 100 levels of arrays and objects"),
        (nested(20_000), "a value nested deeper than 100 levels of arrays and objects"),
        ("9" * 4301, "an integer of 4,301 digits (at most 640)"),
        ("-" + "9" * 641, "an integer of 641 digits (at most 640)"),
    ],
    ids=["600-deep", "1000-deep", "20000-deep", "4301-digits", "641-digits"],
)
def test_deep_or_huge_values_are_refused_with_their_line(tmp_path, fmt, value, problem):
    """Nesting 600 deep loaded and crashed score; 1,000 deep or 4,301 digits gave a traceback."""
    path = write(tmp_path, f"ds.{fmt}", _entries_text(fmt, value))
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    line = 3 if fmt == "json" else 2
    assert str(info.value) == f"ds.{fmt}: line {line}: {problem}"
    assert "at most 100 levels" in info.value.hint and "640 digits" in info.value.hint


def test_values_within_the_limits_load(tmp_path):
    # a JSONL line's object is level 1, target 2, the call 3, args 4: "a" may nest 96 levels
    text = json.dumps(
        {"input": "9" * 5000, "target": [{"name": "f", "args": {"a": "A", "b": "B", "c": "C"}}]}
    )
    for key, value in {"A": nested(96), "B": "9" * 640, "C": "0." + "9" * 5000}.items():
        text = text.replace(f'"{key}"', value)
    (sample,) = load_dataset(write(tmp_path, "ds.jsonl", text + "\n")).samples
    assert sample.target[0].args["b"] == int("9" * 640)  # digits in a string or a float: no limit
    deeper = text.replace(nested(96), nested(97))
    with pytest.raises(DatasetError, match="line 1: a value nested deeper than 100 levels"):
        load_dataset(write(tmp_path, "deeper.jsonl", deeper + "\n"))


@pytest.mark.parametrize("command", ["record", "import"])
def test_a_deep_dataset_is_refused_before_anything_is_written(tmp_path, command):
    dataset = write(tmp_path, "ds.jsonl", _entries_text("jsonl", nested(1000)))
    root = tmp_path / "traces"
    if command == "record":
        args = ["record", "--model", "sim:seed=1", "--dataset", dataset, "--run-id", "r"]
    else:
        traces = write(tmp_path, "traces.jsonl", '{"sample_id": 0, "messages": []}\n')
        args = ["import", "--dataset", dataset, "--tools", DATA / "tools_shop.json",
                "--traces", traces, "--run-id", "r"]  # fmt: skip
    result = cli(*args, "--store", root)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (
        "Error: ds.jsonl: line 2: a value nested deeper than 100 levels of arrays and objects"
    )
    assert result.stderr.splitlines()[1].startswith("Hint: tcbreplay reads JSON nested")
    assert not root.exists()


# ---------------------------------------------------------------- gold rules (#19)

TOOL_F = {"name": "f", "parameters": {"properties": {"u": {}, "v": {"default": 3}}}}


def test_gold_rules_load_and_round_trip():
    """accept, optional and group on gold calls, an entry's order and its own tools: kept in
    the normalised entries, and stored with "order": "any" as a group on every call."""
    entries = [
        {"input": "a", "target": [
            {"name": "f", "args": {"u": "in"}, "accept": {"u": ["in", "inches"]},
             "optional": ["v"], "group": 1},
            {"name": "f", "args": {}, "group": 1},
        ], "tools": [TOOL_F]},
        {"input": "b", "order": "any", "target": [{"name": "g", "args": {}},
                                                  {"name": "g", "args": {}}]},
    ]  # fmt: skip
    dataset = dataset_from_entries(entries)
    first, second = dataset.samples
    assert first.target[0] == GoldCall(
        "f", {"u": "in"}, accept={"u": ["in", "inches"]}, optional=("v",), group=1
    )
    assert first.tool_schemas() == [{"name": "f", "description": "", "parameters": TOOL_F[
        "parameters"]}]  # fmt: skip
    assert second.gold_calls() == [
        {"name": "g", "args": {}, "group": "any"},
        {"name": "g", "args": {}, "group": "any"},
    ]
    again = dataset_from_entries(dataset.entries())
    assert again.entries() == dataset.entries()
    assert again.samples[1].order == "any" and "order" not in dataset.entries()[0]


@pytest.mark.parametrize(
    ("target", "extra", "message"),
    [
        ([{"name": "f", "args": {"u": 1}, "accept": {"u": 1}}], {},
         "target[0].accept.u must be a non-empty list of acceptable values"),
        ([{"name": "f", "args": {"u": 1}, "accept": {"u": []}}], {},
         "target[0].accept.u must be a non-empty list"),
        ([{"name": "f", "args": {"u": 1}, "accept": ["u"]}], {},
         "target[0].accept must be an object of lists of acceptable values"),
        ([{"name": "f", "args": {"u": 1}, "accept": {"u": [1.0, True]}}], {},
         "target[0].accept.u does not list args.u (1): accept lists every acceptable value"),
        ([{"name": "f", "args": {}, "accept": {"u": [1]}}], {},
         "target[0].accept.u: 'u' is neither in args nor optional"),
        ([{"name": "f", "args": {}, "optional": "u"}], {},
         "target[0].optional must be a list of argument names"),
        ([{"name": "f", "args": {}, "optional": ["u", "u"]}], {},
         "target[0].optional names 'u' twice"),
        ([{"name": "f", "args": {}, "group": True}], {},
         "target[0].group must be an integer or a string"),
        ([{"name": "f", "args": {}, "group": [1]}], {},
         "target[0].group must be an integer or a string"),
        ([{"name": "f", "args": {}, "group": 1}, {"name": "f", "args": {}},
          {"name": "f", "args": {}, "group": 1}], {},
         "target[2].group 1 is also the group of target[0], with other calls between"),
        ([{"name": "f", "args": {}, "group": 2}], {"order": "any"},
         'gives "order": "any" and target[0].group: give the order one way'),
        ([], {"order": "all"}, "order must be 'any', got \"all\""),
        ([], {"tools": {"name": "f"}}, "tools: expected a JSON array of function schemas"),
        ([], {"tools": [{"name": "f"}, {"name": "f", "description": "other"}]},
         "tools: two tools are named 'f', with different descriptions"),
        ([{"name": "f", "args": {}, "optional": ["w"]}], {"tools": [TOOL_F]},
         "gold call 0 (f) makes optional 'w', which f does not take"),
        ([{"name": "f", "args": {}, "optional": ["w"], "accept": {"w": [1]}}], {"tools": [TOOL_F]},
         "gold call 0 (f) accepts values of 'w', which f does not take"),
        ([{"name": "g", "args": {}}], {"tools": [TOOL_F]},
         "gold call 0 uses tool 'g', which its own tools lack (tools: f)"),
        ([{"name": "f", "args": {}, "compare": "u"}], {},
         "target[0].compare must be a list of argument names ([]: compare none)"),
        ([{"name": "f", "args": {}, "compare": ["u", "u"]}], {},
         "target[0].compare names 'u' twice"),
        ([{"name": "f", "args": {"u": 1, "v": 2}, "accept": {"u": [1, 2]}, "compare": ["v"]}],
         {}, "target[0].accept.u: 'u' is not compared (it is not in compare)"),
        ([{"name": "f", "args": {}, "compare": ["w"]}], {"tools": [TOOL_F]},
         "gold call 0 (f) compares 'w', which f does not take"),
        ([{"name": "f", "args": {}, "side": "assistant"}], {},
         "target[0].side must be 'agent' or 'user'"),
    ],
)  # fmt: skip
def test_each_rule_problem_names_its_place(tmp_path, target, extra, message):
    entry = {"input": "x", "target": target, **extra}
    path = write(tmp_path, "ds.json", json.dumps([{"input": "fine", "target": []}, entry]))
    with pytest.raises(DatasetError) as info:
        load_dataset(path, {"f": {"u", "v"}})
    assert any(line.startswith(f"ds.json: entry 1: {message}") for line in problems(info))


def test_compare_and_side_are_kept_and_taus_names_get_a_hint(tmp_path):
    target = [
        {"name": "f", "args": {"u": "a note"}, "compare": []},
        {"name": "f", "args": {"u": 1, "v": 2}, "compare": ["v"], "side": "user"},
        {"name": "f", "args": {}, "side": "agent"},  # the default: stored without a side
    ]
    path = write(tmp_path, "ds.json", json.dumps([{"input": "x", "target": target}]))
    dataset = load_dataset(path, {"f": {"u", "v"}})
    assert dataset.samples[0].gold_calls() == [
        {"name": "f", "args": {"u": "a note"}, "compare": []},
        {"name": "f", "args": {"u": 1, "v": 2}, "compare": ["v"], "side": "user"},
        {"name": "f", "args": {}},
    ]
    assert dataset_from_entries(dataset.entries()).entries() == dataset.entries()
    for key, value, ours in (("compare_args", [], "compare"), ("requestor", "user", "side")):
        taus = [{"name": "f", "args": {}, key: value}]
        path = write(tmp_path, "tau.json", json.dumps([{"input": "x", "target": taus}]))
        with pytest.raises(DatasetError) as info:
            load_dataset(path, {"f": {"u", "v"}})
        assert f"unknown key '{key}' in target[0] (did you mean {ours}?)" in str(info.value)


def test_a_samples_own_tools_replace_the_runs_for_its_checks(tmp_path):
    """Gold calls of an entry with tools are checked against them, even where the run's
    tools lack the tool or take other parameters."""
    entry = {"input": "x", "target": [{"name": "h", "args": {"z": 1}}],
             "tools": [{"name": "h", "parameters": {"properties": {"z": {}}}}]}  # fmt: skip
    path = write(tmp_path, "ds.json", json.dumps([entry]))
    assert load_dataset(path, {"f": {"u"}}).samples[0].tools[0].name == "h"


def write_import(tmp_path, entries, lines, *extra):
    dataset = write(tmp_path, "ds.json", json.dumps(entries))
    traces = write(tmp_path, "traces.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    return cli("import", "--dataset", dataset, "--traces", traces, "--run-id", "r",
               "--store", tmp_path / "traces", *extra)  # fmt: skip


def test_import_without_tools_takes_each_entrys_own(tmp_path):
    from traces import ai_message, human_message

    entries = [
        {
            "id": "q",
            "input": "x",
            "tools": [TOOL_F],
            "target": [{"name": "f", "args": {"u": "in"}, "accept": {"u": ["in", "inch"]}}],
        }
    ]
    messages = [
        {"type": "human", "data": json.loads(human_message("x"))["data"]},
        {"type": "ai", "data": json.loads(ai_message([("f", {"u": "inch"})]))["data"]},
    ]
    result = write_import(tmp_path, entries, [{"sample_id": "q", "messages": messages}])
    assert result.exit_code == 0, result.output
    scored = cli("score", "r", "--store", tmp_path / "traces", "--format", "json")
    assert json.loads(scored.stdout)["args_invalid"] == 0
    assert json.loads(scored.stdout)["args_total"] == 1
    stored = cli("sql", "select tools from samples", "--format", "json",
                 "--store", tmp_path / "traces")  # fmt: skip
    assert json.loads(json.loads(stored.stdout)[0]["tools"])[0]["name"] == "f"


def test_import_without_tools_names_an_entry_that_has_none(tmp_path):
    entries = [{"input": "x", "tools": [TOOL_F], "target": []}, {"input": "y", "target": []}]
    result = write_import(tmp_path, entries, [])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Error: --tools is needed: ds.json: entry 1 has no tools of its own",
        'Hint: give --tools, or a "tools" list in every dataset entry',
    ]
    assert not (tmp_path / "traces").exists()


def test_record_refuses_a_dataset_with_its_own_tools(tmp_path):
    entries = [{"input": "x", "target": [], "tools": [TOOL_F]}]
    path = write(tmp_path, "ds.json", json.dumps(entries))
    result = cli("record", "--model", "sim:seed=1", "--dataset", path, "--run-id", "r",
                 "--store", tmp_path / "traces")  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (
        "Error: ds.json: entry 0: has tools of its own, which have no code to run"
    )
    assert not (tmp_path / "traces").exists()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        # the first input was dropped: the sample was recorded with "hello"
        ('{"id": "a", "input": "Add 3 and 4", "target": [], "input": "hello"}\n',
         "d.jsonl: line 1: an object repeats the key 'input'"),
        # a gold argument given twice: scored against its last value
        ('{"id": "a", "input": "x", "target": []}\n{"id": "b", "input": "x", "target": '
         '[{"name": "f", "args": {"a": 1, "a": 9}}]}\n',
         "d.jsonl: line 2: an object repeats the key 'a'"),
        ('[{"id": "a", "input": "x", "target": []}, {"id": "b", "input": "y", "id": "c", '
         '"target": []}]', "d.jsonl: entry 1: an object repeats the key 'id'"),
    ],
)  # fmt: skip
def test_an_entry_that_repeats_a_key_is_refused(tmp_path, text, error):
    path = tmp_path / "d.jsonl"
    path.write_text(text)
    with pytest.raises(DatasetError) as caught:
        load_dataset(path)
    assert str(caught.value) == error


def test_a_system_prompt_file_s_utf8_bom_is_no_part_of_the_prompt(tmp_path):
    """A prompt written by an editor that begins files with a byte order mark was sent to the
    model with it ("\\ufeffYou are..."), where a dataset's is dropped."""
    path = tmp_path / "prompt.txt"
    raw = "\ufeffYou are a helper.\r\nBe brief.".encode()
    path.write_bytes(raw)
    inputs = load_inputs(system_prompt=path)
    assert inputs.system_prompt == "You are a helper.\r\nBe brief."
    assert inputs.system_prompt_sha256 == hashlib.sha256(raw).hexdigest()  # the file's bytes


# ---------------------------------------------------------------- numbers JSON has not


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
@pytest.mark.parametrize(
    ("value", "said"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", "1e999"),
     ("9" * 400 + ".5", "9" * 400 + ".5")],
    ids=["nan", "infinity", "-infinity", "1e999", "400-digits"],
)  # fmt: skip
def test_a_gold_value_that_is_no_finite_number_is_refused_with_its_line_and_field(
    tmp_path, fmt, value, said
):
    """A gold argument NaN (or Infinity, or 1e999: infinity as a float) was taken: Python's
    reader accepts them, and a NaN equals nothing, so the gold call could never be matched."""
    path = write(tmp_path, f"ds.{fmt}", _entries_text(fmt, value))
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    place = "line 3: entry 1" if fmt == "json" else "line 2"
    assert str(info.value) == (
        f"ds.{fmt}: {place}: target[0].args.a is {said}, which is no finite number "
        "(JSON has none): give a number, or a string"
    )


def test_a_value_that_is_no_finite_number_is_refused_anywhere_with_its_path(tmp_path):
    text = (
        '[{"input": "NaN in a string is text", "target": []},\n'
        ' {"input": "b", "tool_call_names": ["add_numbers"],\n'
        '  "tool_call_args": [{"a": 1, "b": [2, {"c": NaN}]}]}]\n'
    )
    with pytest.raises(DatasetError) as info:
        load_dataset(write(tmp_path, "ds.json", text))
    assert str(info.value).startswith("ds.json: line 3: entry 1: tool_call_args[0].b[1].c is NaN")
    with pytest.raises(DatasetError, match=r"^ds.jsonl: line 1: metadata\.score is Infinity"):
        load_dataset(
            write(
                tmp_path,
                "ds.jsonl",
                '{"input": "a", "target": [], "metadata": {"score": Infinity}}',
            )
        )


def test_record_refuses_a_nan_gold_value_in_one_line_before_anything_is_written(tmp_path):
    dataset = write(tmp_path, "ds.jsonl", _entries_text("jsonl", "NaN"))
    root = tmp_path / "traces"
    result = cli("record", "--model", "sim:seed=1", "--dataset", dataset, "--run-id", "r",
                 "--store", root)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "Error: ds.jsonl: line 2: target[0].args.a is NaN, which is no finite number (JSON has "
        "none): give a number, or a string"
    ]
    assert not root.exists()


# ---------------------------------------------------------------- JSON spread over lines


PRETTY = json.dumps({"id": "a", "input": "x", "target": []}, indent=2)  # 5 lines


@pytest.mark.parametrize("name", ["ds.json", "ds.jsonl"])
def test_one_pretty_printed_object_is_said_to_be_no_json_lines(tmp_path, name):
    """It was "line 1: not valid JSON: Expecting property name enclosed in double quotes",
    of a file that is valid JSON."""
    with pytest.raises(DatasetError) as info:
        load_dataset(write(tmp_path, name, PRETTY + "\n"))
    assert problems(info) == [
        f"{name}: lines 1-5: one JSON object spread over lines, not JSON Lines (one entry a "
        "line): put the entries in a JSON array, or each on a line of its own"
    ]


def test_an_entry_of_json_lines_broken_over_lines_is_named_by_its_lines(tmp_path):
    one = '{"input": "y", "target": []}'
    text = one + "\n" + one + "\n" + PRETTY + "\n" + one + "\n"
    with pytest.raises(DatasetError) as info:
        load_dataset(write(tmp_path, "ds.jsonl", text))
    assert problems(info) == [
        "ds.jsonl: lines 3-7: one JSON object spread over lines, not JSON Lines (one entry a "
        "line): put the entries in a JSON array, or each on a line of its own"
    ]


def test_an_error_inside_an_object_spread_over_lines_names_its_own_line(tmp_path):
    text = '{"input": "y", "target": []}\n{\n  "input": "x",\n  "target": [}\n}\n'
    with pytest.raises(DatasetError) as info:
        load_dataset(write(tmp_path, "ds.jsonl", text))
    assert problems(info)[0].startswith("ds.jsonl: line 4: not valid JSON: ")
