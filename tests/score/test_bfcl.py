"""BFCL in, BFCL out (library): its files imported, its results decoded, its AST checker's
verdicts reproduced. The reference is BFCL's own code (``bfcl-eval``, installed without its
dependencies by ``make install``; see ``bench/bfcl_reference.py``) on BFCL's own questions
(a subset vendored under ``tests/data/bfcl``)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from bfcl_data import ALL_ANSWERS, ALL_QUESTIONS, ANSWERS, BY_ID, QUESTIONS, joined_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.bfcl_variants import FORMS, VARIANTS, canonical, render
from tcbreplay._importers.bfcl import _renamed, load_bfcl_inputs
from tcbreplay._inputs.bfcl_calls import (
    DECODER_FAILED,
    WRONG_OUTPUT_FORMAT,
    DecodeError,
    decode_result,
    decode_text,
)
from tcbreplay._score.scorers.bfcl import GoldCall, judge
from tcbreplay.errors import DatasetError


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return load_bfcl_inputs(*joined_files(tmp_path_factory.mktemp("bfcl")))


@pytest.fixture(scope="module")
def all_inputs(tmp_path_factory):
    """The vendored questions and those derived from them."""
    return load_bfcl_inputs(*joined_files(tmp_path_factory.mktemp("bfcl"), with_derived=True))


@pytest.fixture(scope="module")
def reference():
    pytest.importorskip("bfcl_eval", reason="BFCL's checker: make install puts it in .venv")
    from bench import bfcl_reference

    return bfcl_reference


def ours(inputs, qid: str, result) -> tuple[bool, str | None]:
    """tcbreplay's verdict, as the bfcl scorer reaches it from an imported sample."""
    sample = inputs.dataset.by_id[qid]
    gold = [GoldCall(c.bfcl["answer"], c.bfcl["function"]) for c in sample.target]
    try:
        calls = decode_result(result, _renamed(result, sample))
    except DecodeError as exc:
        return False, exc.error_type
    verdict = judge(sample.category, gold, calls)
    return verdict.valid, verdict.error_type


# ------------------------------------------------------------------ against BFCL's own checker


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_variant_in_each_form_gets_bfcls_verdict(all_inputs, reference, variant):
    judged = 0
    for question in ALL_QUESTIONS:
        answer = ALL_ANSWERS[question["id"]]
        calls = VARIANTS[variant](question, answer)
        if calls is None:
            continue
        for form in FORMS:
            result = render(calls, form, question)
            expected = reference.verdict(question, answer, result)
            got = ours(all_inputs, question["id"], result)
            assert got == expected, (question["id"], form, result)
            judged += 1
    assert judged > 0


_STRINGS = sorted(
    {
        v
        for a in ANSWERS.values()
        for c in a["ground_truth"]
        for vs in next(iter(c.values())).values()
        for v in vs
        if isinstance(v, str) and v
    }
)


def _scramble(text: str, how: int) -> str:
    return [
        text,
        text.upper(),
        text.replace(" ", ""),
        text.replace(" ", "-"),
        f" {text}.",
        text + "'",
    ][how]


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2050),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([0.0, 1.0, 10.0, 0.01, 8.854e-12, -0.0]),
    st.builds(_scramble, st.sampled_from(_STRINGS), st.integers(0, 5)),
    st.text(string.ascii_letters + " ,./-_*^'", max_size=6),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abxy"), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    qid=st.sampled_from(sorted(BY_ID)),
    change=st.sampled_from(["set", "drop", "add"]),
    pick=st.integers(0, 50),
    value=_values,
    form=st.sampled_from(FORMS),
    shuffle=st.booleans(),
)
def test_random_arguments_get_bfcls_verdict(
    inputs, reference, qid, change, pick, value, form, shuffle
):
    """Any value in place of an argument (or an argument left out or added): the same
    verdict and error type as BFCL's checker, in every result form."""
    question, answer = BY_ID[qid], ANSWERS[qid]
    calls = [(n, dict(a)) for n, a in canonical(question, answer)]
    k = pick % len(calls)
    args = calls[k][1]
    params = list(question["function"][0]["parameters"]["properties"]) + list(args)
    key = params[pick % len(params)]
    if change == "set":
        args[key] = value
    elif change == "drop":
        args.pop(key, None)
    else:
        args["extra" if pick % 2 else key] = value
    if shuffle:
        calls = calls[1:] + calls[:1]
    result = render(calls, form, question)
    assert ours(inputs, qid, result) == reference.verdict(question, answer, result), result


_atoms = st.sampled_from(
    ["1", "-2", "+5", "~5", "not 1", "-1.5", "2.0", "1e-3", "'a b'", '"x"', "True", "None",
     "-True", "-'a'", "-x", "inches", "...", "b'xy'", "3j", "f(1)", "g(a=1)", "a.b(c=2)",
     "x[0]", "x[1:2]", "f'{1}'", "{1, 2}", "1 < 2", "a.b", "*x"]
)  # fmt: skip
_ops = st.sampled_from([" + ", " - ", " * ", " / ", " // ", " % ", " ** ", " | ", " @ "])


_EXPRESSIONS = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        st.builds(lambda a, op, b: a + op + b, inner, _ops, inner),
        st.builds(lambda xs: "[" + ", ".join(xs) + "]", st.lists(inner, max_size=3)),
        st.builds(lambda xs: "(" + ", ".join(xs) + ",)", st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda k, v: "{" + k + ": " + v + "}", inner, inner),
        st.builds(lambda x: "(" + x + ")", inner),
        st.builds(lambda a, b: f"{a}[{b}]", inner, inner),
        st.builds(lambda a, b, c: f"({a} if {b} else {c})", inner, inner, inner),
        st.builds(lambda a, b: f"({a} and {b})", inner, inner),
        st.builds(lambda a, b: f"({a} < {b} <= {a})", inner, inner),
        st.builds(lambda a: f"f'<{{{a}!r:>6}}>'", inner),
    ),
    max_leaves=5,
)


@st.composite
def _call_strings(draw):
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["f", "spotify.play", "a.b.c", "x()", "g"]))
        parts = [draw(_EXPRESSIONS) for _ in range(draw(st.integers(0, 1)))]
        keys = draw(st.lists(st.sampled_from(["a", "b", "unit", "**"]), max_size=3, unique=True))
        parts += [("**" + draw(_EXPRESSIONS)) if k == "**" else f"{k}={draw(_EXPRESSIONS)}"
                  for k in keys]  # fmt: skip
        calls.append(f"{name}({', '.join(parts)})")
    text = ", ".join(calls)
    wrap = draw(
        st.sampled_from(["[{}]", "{}", "```\n[{}]\n```", "'[{}]'", " [{}] ", "[{}", "({})"])
    )
    return wrap.format(text)


@pytest.mark.slow  # brute force over hundreds of examples: make test-slow
@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # from BFCL's eval of the strings
@settings(max_examples=600, deadline=None)
@given(text=_call_strings())
def test_call_strings_decode_as_bfcl_decodes_them(reference, text):
    """The same calls, value for value and type for type (a tuple is not a list, 1 not 1.0),
    or both refuse the string."""
    try:
        expected = repr(reference.decode(text))
    except Exception:
        expected = None
    try:
        got = repr(decode_text(text))
    except DecodeError:
        got = None
    assert got == expected, text


# ------------------------------------------------------------------------- BFCL's quirks


def test_the_greedy_parallel_matcher_refuses_a_valid_permutation(inputs):
    """Gold call 0 of parallel_178 takes the first agent call it accepts; reversed, that is
    the one gold call 2 needed, so BFCL finds no match for it."""
    calls = canonical(BY_ID["parallel_178"], ANSWERS["parallel_178"])
    assert ours(inputs, "parallel_178", render(calls, "text", BY_ID["parallel_178"])) == (
        True,
        None,
    )
    reversed_ = render(calls[::-1], "text", BY_ID["parallel_178"])
    assert ours(inputs, "parallel_178", reversed_) == (
        False,
        "parallel_function_checker_no_order:cannot_find_match",
    )


def test_a_unary_operator_always_negates():
    assert decode_text("f(a=+5, b=~5, c=-5, d=-True)") == [
        {"f": {"a": -5, "b": -5, "c": -5, "d": -1}}
    ]


def test_positional_arguments_are_dropped_and_names_read_as_strings():
    assert decode_text("[f(1, unit=inches), g.h(x=k(1), y=k(z=2), s=a[0])]") == [
        {"f": {"unit": "inches"}},
        {"g.h": {"x": "k(1)", "y": {"k": {"z": 2}}, "s": "a[0]"}},
    ]


def test_arithmetic_of_literals_is_evaluated_and_names_in_it_are_not():
    """BFCL evaluates an argument that is an operation with Python's eval (names, calls and
    lambdas included); tcbreplay evaluates literals only, and refuses a lambda anywhere."""
    assert decode_text("f(a=2*3, b=[1]+[2], c=7/2)") == [{"f": {"a": 6, "b": [1, 2], "c": 3.5}}]
    for text in ("f(a=2*pi)", "f(a=len('ab')+1)", "f(a=1/0)", "f(a=9**9**9)", "f(a='x'*10**9)",
                 "f(a=lambda: 1)", "f(a=[1] + [lambda: 1])", "f(a=1 + (2 is 2))"):  # fmt: skip
        with pytest.raises(DecodeError) as caught:
            decode_text(text)
        assert caught.value.error_type == DECODER_FAILED


def test_a_tuple_is_not_a_list_for_an_array_parameter(inputs):
    """simple_python_72's trait_values is an array of floats: a tuple is a type error, but a
    tuple parameter (simple_python_83's coord1) takes one."""
    good = "calculate_fitness(trait_values=[0.8, 0.7], trait_contributions=[0.4, 0.6])"
    assert ours(inputs, "simple_python_72", good) == (True, None)
    as_tuple = good.replace("[0.8, 0.7]", "(0.8, 0.7)")
    assert ours(inputs, "simple_python_72", as_tuple) == (False, "type_error:simple")
    coords = "coord1=(33.4484, -112.074), coord2=(34.0522, -118.2437), unit='miles'"
    assert ours(inputs, "simple_python_83", f"calculate_distance({coords})") == (True, None)


def test_an_empty_string_fills_an_optional_string(inputs):
    """simple_python_13's method may be left out ("" among its values): BFCL's string folding
    then takes any string of spaces and ,./-_*^ for the mark."""
    base = "calculate_area_under_curve(function='x**2', interval=[1.0, 3.0]{})"
    for extra in (
        "",
        ", method='trapezoidal'",
        ", method='Trape-zoidal'",
        ", method=''",
        ", method=' ./'",
    ):
        assert ours(inputs, "simple_python_13", base.format(extra)) == (True, None), extra
    assert ours(inputs, "simple_python_13", base.format(", method='simpson'")) == (
        False, "value_error:string",
    )  # fmt: skip


def test_a_float_with_no_fraction_is_refused_for_an_integer(inputs):
    assert ours(inputs, "simple_python_0", "calculate_triangle_area(base=10, height=5)") == (
        True,
        None,
    )
    assert ours(inputs, "simple_python_0", "calculate_triangle_area(base=10.0, height=5)") == (
        False, "type_error:simple",
    )  # fmt: skip


def test_a_parameter_both_required_and_optional_must_be_given(inputs):
    assert ours(inputs, "simple_python_17", "get_prime_factors(number=450)") == (
        False, "simple_function_checker:missing_required",
    )  # fmt: skip


def test_a_dotted_name_a_provider_rewrote_is_mapped_back(inputs):
    call = {"spotify_play": json.dumps({"artist": "Taylor Swift", "duration": 20})}
    other = {"spotify_play": json.dumps({"artist": "Maroon 5", "duration": 15})}
    assert ours(inputs, "parallel_0", [call, other]) == (True, None)
    text = "[{0}(artist='Taylor Swift', duration=20), {0}(artist='Maroon 5', duration=15)]"
    assert ours(inputs, "parallel_0", text.format("spotify.play")) == (True, None)
    # a call string names functions as written: no provider rewrote them
    assert ours(inputs, "parallel_0", text.format("spotify_play"))[0] is False


@pytest.mark.parametrize(
    ("result", "error_type"),
    [
        ([{"f": "{not json"}], DECODER_FAILED),
        ([{"f": 5}], DECODER_FAILED),
        (["f"], DECODER_FAILED),
        ([{}], DECODER_FAILED),
        ([{"f": "[1, 2]"}], WRONG_OUTPUT_FORMAT),
        ("I cannot help with that.", DECODER_FAILED),
        ("[f(a=1), 3]", DECODER_FAILED),
    ],
)
def test_answers_bfcl_cannot_decode(result, error_type):
    with pytest.raises(DecodeError) as caught:
        decode_result(result)
    assert caught.value.error_type == error_type


# ------------------------------------------------------------------------------ the import


def test_each_question_becomes_a_sample_with_its_functions_and_every_acceptable_value(inputs):
    assert [s.sample_id for s in inputs.dataset.samples] == [q["id"] for q in QUESTIONS]
    entry = inputs.dataset.by_id["simple_python_89"].to_dict()
    assert entry["category"] == "simple_python"
    assert entry["tools"] == BY_ID["simple_python_89"]["function"]
    [gold] = entry["target"]
    name, answer = next(iter(ANSWERS["simple_python_89"]["ground_truth"][0].items()))
    assert gold["name"] == name
    assert gold["bfcl"] == {"answer": answer, "function": BY_ID["simple_python_89"]["function"][0]}
    # a dict parameter: BFCL lists values per key; here every combination is a value
    assert gold["accept"]["conditions"] == [
        {"department": "Science", "school": "Bluebird High School"},
        {"department": "Science", "school": "Bluebird HS"},
    ]
    assert gold["args"]["conditions"] == gold["accept"]["conditions"][0]
    assert "group" not in gold


def test_optional_parameters_and_parallel_groups_are_kept(inputs):
    [gold] = inputs.dataset.by_id["simple_python_2"].to_dict()["target"]
    assert gold["optional"] == ["z"]  # BFCL's list for z is ["", 0]
    assert gold["args"]["z"] == 0 and "z" not in gold.get("accept", {})
    deck = inputs.dataset.by_id["simple_python_335"].to_dict()["target"][0]
    assert "deck" in deck["optional"] and "deck" not in deck["args"]  # [""]: no value but none
    # the empty value BFCL's checker takes for its mark "": "" for a string, [] for an array
    assert deck["accept"]["deck"] == [[]]
    [unit] = inputs.dataset.by_id["simple_python_0"].to_dict()["target"]
    assert unit["args"]["unit"] == "units" and unit["accept"]["unit"] == ["units", ""]
    calls = inputs.dataset.by_id["parallel_0"].to_dict()["target"]
    assert [(c["name"], c["group"]) for c in calls] == [("spotify.play", 0), ("spotify.play", 0)]
    assert [c["args"] for c in calls] == [
        {"artist": "Taylor Swift", "duration": 20},
        {"artist": "Maroon 5", "duration": 15},
    ]


def test_the_manifest_names_both_files_and_every_distinct_function(inputs, tmp_path):
    fields = inputs.manifest_fields()
    assert fields["dataset"]["answers"]["sha256"] == inputs.answers_sha256
    names = [s["name"] for s in fields["tools"]["specs"]]
    distinct = {json.dumps(f, sort_keys=True) for q in QUESTIONS for f in q["function"]}
    assert len(names) == len(distinct)


def _write(path: Path, entries: list) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


@pytest.mark.parametrize(
    ("questions", "answers", "message"),
    [
        ([dict(QUESTIONS[0], id="simple_java_0")],
         [dict(ANSWERS["simple_python_0"], id="simple_java_0")],
         "category 'simple_java' is not one"),
        (QUESTIONS[:2], [ANSWERS["simple_python_0"]], "has no possible answer"),
        (QUESTIONS[:1], [ANSWERS["simple_python_0"], ANSWERS["simple_python_2"]],
         "answers no question"),
        (QUESTIONS[:1], [ANSWERS["simple_python_0"]] * 2,
         r"a.json: line 2: .* given twice \(also line 1\)"),
        ([dict(QUESTIONS[0], question=[[], []])], [ANSWERS["simple_python_0"]], "one turn"),
    ],
)  # fmt: skip
def test_files_that_are_not_bfcls_are_refused_with_their_line(
    tmp_path, questions, answers, message
):
    q = _write(tmp_path / "q.json", questions)
    a = _write(tmp_path / "a.json", answers)
    with pytest.raises(DatasetError, match=message):
        load_bfcl_inputs(q, a)


def test_a_gold_call_of_a_function_the_question_lacks_is_refused(tmp_path):
    question = BY_ID["parallel_0"]
    answer = {"id": "parallel_0", "ground_truth": [{"spotify.pause": {}}]}
    with pytest.raises(
        DatasetError, match=r"a.json: line 1: ground_truth\[0\] calls 'spotify.pause'"
    ):
        load_bfcl_inputs(
            _write(tmp_path / "q.json", [question]), _write(tmp_path / "a.json", [answer])
        )
