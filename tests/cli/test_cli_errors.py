"""Bad inputs to `record` and `import`: exit code 2, one `Error:` line per problem, no traceback,
and nothing written to the store."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import TEST_DATA, cli, snapshot

from tcbreplay._cli import main
from tcbreplay._store.runs import Store

DATA = TEST_DATA
SHOP_JSON = str(DATA / "tools_shop.json")
EXISTING = "existing-run"


@pytest.fixture
def store_dir(tmp_path) -> Path:
    """A store that already holds one run, to prove an error leaves it alone."""
    root = tmp_path / "traces"
    Store(root).create_run({"run_id": EXISTING, "created_at": "2024-01-01T00:00:00+00:00"}).close()
    return root


@pytest.fixture
def traces_file(tmp_path) -> Path:
    """A readable traces file for ds_shapes.json: one sample with no messages."""
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps({"sample_id": "0", "messages": []}) + "\n")
    return path


@pytest.fixture
def tool_module(tmp_path, monkeypatch):
    """Write a uniquely named tools module into tmp_path/mods and make it importable."""
    mods = tmp_path / "mods"
    mods.mkdir()
    monkeypatch.syspath_prepend(str(mods))
    names = []

    def make(source: str) -> str:
        name = f"tools_{uuid.uuid4().hex[:12]}"
        (mods / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    yield make
    for name in names:
        sys.modules.pop(name, None)


def run_cli(args: list[str], store_dir: Path):
    before = snapshot(store_dir)
    result = CliRunner().invoke(main, [*args, "--store", str(store_dir)])
    assert snapshot(store_dir) == before, "the store changed after an error"
    assert sorted(p.name for p in store_dir.iterdir()) == [EXISTING]
    return result


def assert_input_error(result, *fragments: str) -> list[str]:
    """Exit 2, only `Error:`/`Hint:` lines on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines, "no error message"
    assert all(line.startswith(("Error: ", "Hint: ")) for line in lines), lines
    errors = [line.removeprefix("Error: ") for line in lines if line.startswith("Error: ")]
    assert errors
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    return errors


def record_args(*extra: str) -> list[str]:
    return ["record", "--model", "sim:seed=1", "--run-id", "new-run", "--quiet", *extra]


def import_args(dataset: str | Path, tools: str, traces: Path, *extra: str) -> list[str]:
    return [
        "import", "--dataset", str(dataset), "--tools", tools, "--traces", str(traces),
        "--run-id", "new-run", *extra,
    ]  # fmt: skip


# ---------------------------------------------------------------- datasets

DATASET_CASES = {
    "problems-json": (
        None,
        [
            "ds_problems.json: entry 0: missing input",
            "ds_problems.json: entry 1: tool_call_args has 1 items, tool_call_names has 2",
            "ds_problems.json: entry 2: tool_call_args[0] is not an object (a list)",
            "ds_problems.json: entry 3: target[0].args is not an object (a string)",
            "ds_problems.json: entry 5: duplicate id 'ok' (also entry 4)",
        ],
    ),
    "problems-jsonl": (
        None,
        [
            "ds_problems.jsonl: line 3: missing input",
            "ds_problems.jsonl: line 4: target.tool_call_args has 0 items, "
            "target.tool_call_names has 1",
            "ds_problems.jsonl: line 5: duplicate id 'ok' (also line 1)",
        ],
    ),
    "empty": ("", ["ds.json: the file is empty"]),
    "empty-array": ("[]", ["ds.json: the dataset has no entries"]),
    "malformed": (
        '[\n  {"input": "x", "target": []},\n  {"input": "y" "target": []}\n]',
        ["ds.json: line 3: not valid JSON: Expecting ',' delimiter"],
    ),
    "unknown-tool": (
        json.dumps(
            [
                {"input": "a", "target": [{"name": "list_items", "args": {}}]},
                {"input": "b", "target": [{"name": "subtract_numbers", "args": {"a": 1, "b": 2}}]},
            ]
        ),
        ["ds.json: entry 1: gold call 0 uses tool 'subtract_numbers', which the tool set lacks"],
    ),
    "unknown-argument": (
        json.dumps(
            [
                {
                    "input": "a",
                    "tool_call_names": ["list_items", "add_numbers"],
                    "tool_call_args": [{}, {"a": 1, "b": 2, "c": 3}],
                }
            ]
        ),
        ["ds.json: entry 0: gold call 1 (add_numbers) passes 'c', which add_numbers does not take"],
    ),
}


def dataset_path(tmp_path: Path, case: str) -> Path:
    text, _ = DATASET_CASES[case]
    if text is None:
        return DATA / ("ds_problems.jsonl" if case.endswith("jsonl") else "ds_problems.json")
    path = tmp_path / "ds.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", DATASET_CASES)
def test_record_refuses_a_bad_dataset(tmp_path, store_dir, case):
    result = run_cli(record_args("--dataset", str(dataset_path(tmp_path, case))), store_dir)
    errors = assert_input_error(result)
    expected = DATASET_CASES[case][1]
    assert len(errors) == len(expected)
    for error, start in zip(errors, expected, strict=True):
        assert error.startswith(start), (error, start)


@pytest.mark.parametrize("case", DATASET_CASES)
def test_import_refuses_a_bad_dataset(tmp_path, store_dir, traces_file, case):
    args = import_args(dataset_path(tmp_path, case), SHOP_JSON, traces_file)
    errors = assert_input_error(run_cli(args, store_dir))
    expected = DATASET_CASES[case][1]
    assert len(errors) == len(expected)
    for error, start in zip(errors, expected, strict=True):
        assert error.startswith(start), (error, start)


@pytest.mark.parametrize("command", ["record", "import"])
def test_a_new_store_is_not_even_created(tmp_path, traces_file, command):
    root = tmp_path / "fresh-store"
    dataset = DATA / "ds_problems.json"
    if command == "record":
        args = record_args("--dataset", str(dataset))
    else:
        args = import_args(dataset, SHOP_JSON, traces_file)
    result = CliRunner().invoke(main, [*args, "--store", str(root)])
    assert_input_error(result, "entry 0: missing input")
    assert not root.exists()


def test_missing_dataset_file(tmp_path, store_dir, traces_file):
    absent = tmp_path / "absent.json"
    assert_input_error(run_cli(record_args("--dataset", str(absent)), store_dir), "absent.json")
    args = import_args(absent, SHOP_JSON, traces_file)
    assert_input_error(run_cli(args, store_dir), "cannot read dataset")


@pytest.mark.parametrize(
    "option", ["--dataset", "--system-prompt", "--tools", "--traces", "import --dataset"]
)
def test_an_input_given_as_a_url_is_refused_in_one_line(store_dir, traces_file, option):
    """Before, s3://b/x.json was read as the path s3:/b/x.json, not found."""
    url = "s3://bucket/team/input.json"
    if option == "--traces":
        args = import_args(DATA / "ds_problems.json", SHOP_JSON, traces_file)
        args[args.index("--traces") + 1] = url
    elif option == "import --dataset":
        args = import_args(url, SHOP_JSON, traces_file)
    else:
        args = record_args(option, url)
    assert_input_error(run_cli(args, store_dir), f"{url}: a URL; give a file of this machine")


# ---------------------------------------------------------------- Python tool specs

GOOD_TOOLS = '''
def list_items() -> dict:
    """List the catalog."""
    return {"items": []}


def add_numbers(a: float, b: float) -> dict:
    """Add."""
    return {"result": a + b}


def multiply_numbers(a: float, b: float) -> dict:
    """Multiply."""
    return {"result": a * b}


TOOLS = [list_items, add_numbers, multiply_numbers]
NOT_A_LIST = add_numbers
DUPLICATES = [list_items, add_numbers, add_numbers, multiply_numbers]
MISSING_ONE = [list_items, add_numbers]
'''


def module_case(tool_module, case: str) -> tuple[str, str]:
    """(spec, the start of the one error line) of each bad Python tool spec."""
    if case == "missing-module":
        return "no_such_tools_xyz:TOOLS", "no_such_tools_xyz:TOOLS: cannot import module"
    if case == "raising-module":
        name = tool_module("raise RuntimeError('cannot reach the catalog')\n")
        return f"{name}:TOOLS", f"{name}:TOOLS: importing {name!r} failed: RuntimeError"
    name = tool_module(GOOD_TOOLS)
    return {
        "missing-attr": (f"{name}:NOPE", f"{name}:NOPE: module {name!r} has no attribute 'NOPE'"),
        "not-a-list": (f"{name}:NOT_A_LIST", f"{name}:NOT_A_LIST: expected a non-empty list"),
        "duplicates": (f"{name}:DUPLICATES", f"{name}:DUPLICATES: two tools are named"),
        "lacks-gold-tool": (f"{name}:MISSING_ONE", "uses tool 'multiply_numbers', which the tool"),
    }[case]


MODULE_CASES = [
    "missing-module",
    "raising-module",
    "missing-attr",
    "not-a-list",
    "duplicates",
    "lacks-gold-tool",
]


@pytest.mark.parametrize("case", MODULE_CASES)
def test_record_refuses_bad_tools(store_dir, tool_module, case):
    spec, start = module_case(tool_module, case)
    errors = assert_input_error(run_cli(record_args("--tools", spec), store_dir))
    if case == "lacks-gold-tool":  # the built-in dataset uses multiply_numbers many times
        assert len(errors) > 1
        assert all("multiply_numbers" in e for e in errors)
    else:
        assert len(errors) == 1
    assert start in errors[0], (errors[0], start)


@pytest.mark.parametrize("case", MODULE_CASES)
def test_import_refuses_bad_tools(store_dir, tool_module, traces_file, case):
    spec, start = module_case(tool_module, case)
    errors = assert_input_error(
        run_cli(import_args(DATA / "ds_shapes.json", spec, traces_file), store_dir)
    )
    if case == "lacks-gold-tool":
        assert errors == [
            "ds_shapes.json: entry 1: gold call 1 uses tool 'multiply_numbers', which the tool "
            "set lacks (tools: add_numbers, list_items)"
        ]
    else:
        assert len(errors) == 1
        assert errors[0].startswith(start), (errors[0], start)


@pytest.mark.parametrize(
    ("content", "start"),
    [
        ({"name": "list_items"}, "tools.json: expected a JSON array of function schemas"),
        ("[{]", "tools.json: not valid JSON"),
        (
            [{"name": "list_items", "parameters": ["a", "b"]}],
            "tools.json: tool 0 (list_items): parameters must be a JSON-schema object",
        ),
        (
            [{"name": "add_numbers"}, {"name": "add_numbers", "description": "other"}],
            "tools.json: two tools are named 'add_numbers', with different descriptions",
        ),
    ],
)
def test_import_refuses_bad_json_tools(tmp_path, store_dir, traces_file, content, start):
    tools = tmp_path / "tools.json"
    tools.write_text(content if isinstance(content, str) else json.dumps(content))
    result = run_cli(import_args(DATA / "ds_shapes.json", str(tools), traces_file), store_dir)
    errors = assert_input_error(result)
    assert len(errors) == 1
    assert errors[0].startswith(start), errors


def test_record_refuses_json_tools(store_dir):
    result = run_cli(record_args("--tools", SHOP_JSON), store_dir)
    assert_input_error(result, "JSON tool schemas have no code to run")


# ---------------------------------------------------------------- other inputs


def test_record_with_custom_dataset_and_tools_needs_a_system_prompt(store_dir, tool_module):
    spec, _ = module_case(tool_module, "missing-attr")
    spec = spec.replace(":NOPE", ":TOOLS")
    args = record_args("--dataset", str(DATA / "ds_shapes.json"), "--tools", spec)
    assert_input_error(run_cli(args, store_dir), "--system-prompt")


def test_record_without_an_api_key(store_dir, monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    args = ["record", "--model", "google_genai:gemini-2.5-flash", "--run-id", "r", "--quiet"]
    assert_input_error(run_cli(args, store_dir), "GOOGLE_API_KEY is not set", "--model sim")


TWICE = "--model-option 'error_rate=0.2': error_rate is given twice (error_rate=0.1 too)"


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--benchmark", "nope"], "unknown benchmark 'nope'"),
        (["--model-option", "api_key=abc"], "secrets are not accepted"),
        (["--model-option", "novalue"], "expected KEY=VALUE"),
        # (the last value won, in silence)
        (["--model-option", "error_rate=0.1", "--model-option", "error_rate=0.2"], TWICE),
    ],
)
def test_record_refuses_other_bad_options(store_dir, extra, fragment):
    assert_input_error(run_cli(record_args(*extra), store_dir), fragment)


def test_a_sim_setting_given_twice_is_refused(store_dir):
    args = ["record", "--model", "sim:seed=3,seed=4", "--run-id", "twice", "--quiet"]
    assert_input_error(run_cli(args, store_dir), "seed is given twice in sim:seed=3,seed=4")


# a key is the value of this variable in the last case (its name, a secret's)
KEY = "sk-proj-0123456789abcdefSECRET"


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        (f"openai:gpt-4o?api_key={KEY}", "has a setting 'api_key', whose name is a secret's"),
        (f"sim:seed=4,token={KEY}", "has a setting 'token'"),
        (f"openai:gpt-4o?x=https://user:{KEY}@proxy.example", "holds a URL with a user name"),
        (f"openai:{KEY}", "holds the value of OPENAI_API_KEY"),
    ],
)
def test_a_secret_in_a_model_string_is_refused_and_never_shown(store_dir, monkeypatch, model,
                                                                 fragment):  # fmt: skip
    """The model string names the run and is written into its manifest: a secret in it is
    refused, without the string in the error."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    before = snapshot(store_dir)
    args = ["record", "--model", model, "--run-id", "r", "--quiet"]
    result = run_cli(args, store_dir)
    assert_input_error(result, f"--model: the model string {fragment}", "secrets are not accepted")
    assert KEY not in result.output
    assert snapshot(store_dir) == before


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        ("sim:seed=x", "sim option seed='x': must be an integer"),
        ("sim:latency=slow", "sim option latency='slow': must be a number"),
        ("sim:error_rate=2", "must be between 0 and 1"),
        ("sim:mistakes=skip+oops", "unknown mistake 'oops'"),
        ("sim:colour=red", "sim option 'colour=red': expected one of"),
    ],
)
def test_record_refuses_a_bad_sim_option(store_dir, model, fragment):
    args = ["record", "--model", model, "--run-id", "r", "--quiet"]
    assert_input_error(run_cli(args, store_dir), fragment)


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "has space", "..", "", "zz*", "q[1]"])
def test_bad_run_ids_write_nothing_anywhere(tmp_path, store_dir, traces_file, run_id):
    outside = snapshot(tmp_path)
    args = import_args(DATA / "ds_shapes.json", SHOP_JSON, traces_file)
    args[args.index("new-run")] = run_id
    assert_input_error(run_cli(args, store_dir), "run id")
    args = ["record", "--model", "sim", "--run-id", run_id, "--quiet"]
    assert_input_error(run_cli(args, store_dir), "run id")
    assert snapshot(tmp_path) == outside


def test_import_into_an_existing_run_is_refused(store_dir, traces_file):
    args = import_args(DATA / "ds_shapes.json", SHOP_JSON, traces_file)
    args[args.index("new-run")] = EXISTING
    assert_input_error(run_cli(args, store_dir), "already exists")


def test_tools_module_in_the_current_directory(tmp_path, monkeypatch, store_dir, traces_file):
    """The positive control of the cases above: the same command succeeds with good inputs."""
    name = f"tools_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(GOOD_TOOLS)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    try:
        result = CliRunner().invoke(
            main,
            [*import_args(DATA / "ds_shapes.json", f"{name}:TOOLS", traces_file),
             "--store", str(store_dir)],
        )  # fmt: skip
    finally:
        sys.modules.pop(name, None)
    assert result.exit_code == 0, result.output
    assert "1/4 samples imported" in result.stdout
    assert sorted(p.name for p in store_dir.iterdir()) == [EXISTING, "new-run"]


@pytest.mark.parametrize(
    ("args", "fragment", "command"),
    [
        (["score", "some-run", "--bogus"], "No such option '--bogus'", "tcbreplay score"),
        (["score", "r", "--rel-tol", "abc"], "'abc' is not a valid float", "tcbreplay score"),
        (["score"], "Missing argument 'RUN_ID'", "tcbreplay score"),
        (["score", "r", "--rel-tol"], "'--rel-tol' requires an argument", "tcbreplay score"),
        (["score", "r", "--allow-incomplete=1"], "does not take a value", "tcbreplay score"),
        (["sql", "select 1", "--format", "xml"], "'xml' is not one of", "tcbreplay sql"),
        (["nosuch"], "No such command 'nosuch'", "tcbreplay"),
        (["--bogus"], "No such option '--bogus'", "tcbreplay"),
    ],
    ids=["unknown-option", "bad-value", "missing-argument", "missing-value", "flag-value",
         "bad-choice", "unknown-command", "unknown-group-option"],
)  # fmt: skip
def test_usage_errors_are_one_line(store_dir, args, fragment, command):
    """A mistyped command line is an `Error:` line naming what is wrong and a `Hint:` line
    naming the help to read, exit code 2, like every other input error."""
    before = snapshot(store_dir)
    args = [args[0], "--store", str(store_dir), *args[1:]]  # an option left last stays last
    result = CliRunner().invoke(main, args, prog_name="tcbreplay")
    assert snapshot(store_dir) == before
    errors = assert_input_error(result, fragment)
    assert len(errors) == 1
    assert result.stderr.splitlines()[-1] == f"Hint: see {command} --help"


def test_bare_command_prints_its_help():
    result = CliRunner().invoke(main, [])
    assert result.exit_code == 2
    assert "Commands:" in result.output


@pytest.mark.parametrize("from_env", [True, False])
def test_a_bad_store_is_blamed_on_where_it_came_from(tmp_path, from_env):
    """A store path that is a file is blamed on TCBREPLAY_STORE when the variable gave it,
    and on --store otherwise; the help names the variable."""
    not_a_dir = tmp_path / "traces"
    not_a_dir.write_text("a file, not a store")
    args = ["runs"] if from_env else ["runs", "--store", str(not_a_dir)]
    env = {"TCBREPLAY_STORE": str(not_a_dir)} if from_env else {}
    result = CliRunner().invoke(main, args, env=env, prog_name="tcbreplay")
    assert result.exit_code == 2
    where = "TCBREPLAY_STORE" if from_env else "'--store'"
    assert result.stderr.splitlines() == [
        f"Error: Invalid value for {where}: Directory '{not_a_dir}' is a file.",
        "Hint: see tcbreplay runs --help",
    ]
    assert not_a_dir.read_text() == "a file, not a store"
    helped = CliRunner().invoke(main, ["runs", "--help"], terminal_width=200)
    assert "[env var: TCBREPLAY_STORE; default: traces]" in helped.stdout


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ("error_rate=5", "error_rate=5: must be between 0 and 1"),
        ("seed=abc", "seed='abc': must be an integer"),
        ("mistakes=foo", "mistakes='foo': unknown mistake 'foo'"),
        ("latency=-1", "latency=-1: must be a finite number, not negative"),
        ("latency=inf", "latency=inf: must be a finite number, not negative"),
        ("fault_rate=nan", "fault_rate=nan: must be between 0 and 1"),
        ("colour=red", "'colour=red': expected one of seed, error_rate"),
    ],
)
def test_record_checks_a_sim_model_option_like_a_sim_option(store_dir, option, fragment):
    """--model-option KEY=VALUE with the sim model is refused where sim:KEY=VALUE is."""
    given = ["record", "--model", "sim", "--model-option", option, "--run-id", "new-run", "--quiet"]
    errors = assert_input_error(run_cli(given, store_dir))
    assert len(errors) == 1 and errors[0].startswith(f"--model-option {fragment}"), errors
    inline = ["record", "--model", f"sim:{option}", "--run-id", "new-run", "--quiet"]
    errors = assert_input_error(run_cli(inline, store_dir))
    assert len(errors) == 1 and errors[0].startswith(f"sim option {fragment}"), errors


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [
        ("--timeout", "nan", "above 0"),
        ("--timeout", "inf", "above 0"),
        ("--call-timeout", "nan", "above 0"),
        ("--call-timeout", "inf", "above 0"),
        ("--backoff", "-1", "not negative"),
        ("--backoff", "nan", "not negative"),
        ("--max-rpm", "nan", "above 0"),
        ("--max-tpm", "inf", "above 0"),
    ],
)
def test_record_refuses_a_non_finite_or_negative_runner_option(store_dir, option, value, rule):
    errors = assert_input_error(run_cli(record_args(option, value), store_dir))
    assert errors == [f"{option} {float(value)}: must be a finite number, {rule}"]


def test_record_refuses_fewer_than_one_call_a_minute(store_dir):
    """Calls are whole: under --max-rpm 0.5 none could be sent (one a minute was, over it)."""
    result = run_cli(record_args("--max-rpm", "0.5"), store_dir)
    errors = assert_input_error(result, "Hint: give --max-rpm 1 or more")
    assert errors == ["--max-rpm 0.5: must be at least 1 (a call a minute)"]


@pytest.mark.parametrize(
    "args",
    [
        ["--resume", "RUN", "--overwrite"],
        ["--retry-errors", "RUN", "--overwrite"],
        ["--resume", "RUN", "--retry-errors", "RUN"],
        ["--resume", "RUN", "--retry-errors", "other-run"],
    ],
)
def test_record_refuses_run_options_that_contradict_each_other(sim_copy, args):
    """--resume and --retry-errors keep the run's samples, which --overwrite deletes;
    --retry-errors re-runs errors, which --resume leaves alone."""
    root, run_id = sim_copy
    args = [run_id if arg == "RUN" else arg for arg in args]
    before = snapshot(root)
    result = CliRunner().invoke(main, ["record", *args, "--store", str(root), "--quiet"])
    named = [arg for arg in args if arg.startswith("--")]
    errors = assert_input_error(result)
    assert len(errors) == 1
    assert errors[0].startswith(f"{named[0]} and {named[1]} cannot be combined"), errors
    assert snapshot(root) == before


@pytest.mark.parametrize("option", ["--dataset", "--traces"])
def test_a_file_name_that_is_not_utf8_is_refused(tmp_path, option):
    """The manifest keeps each input's name as UTF-8 text: a name with other bytes (as Python
    hands it over, with surrogates) is refused before anything is written."""
    named = tmp_path / os.fsdecode(b"data\xff.json")
    named.write_text('[{"input": "hi", "target": []}]')
    plain = tmp_path / "data.json"
    plain.write_text('[{"input": "hi", "target": []}]')
    root = tmp_path / "traces"
    if option == "--dataset":
        args = ["record", "--model", "sim:seed=1", "--dataset", named, "--run-id", "r"]
    else:
        args = ["import", "--dataset", plain, "--tools", DATA / "tools_shop.json",
                "--traces", named, "--run-id", "r"]  # fmt: skip
    result = cli(*args, "--store", root)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == (
        f"Error: {option} {str(named)!r}: the name is not valid UTF-8"
    )
    assert not root.exists()


# -- what a --store may be ---------------------------------------------------------------------

RECORD_3 = ["record", "--model", "sim:seed=3,latency=0", "--run-id", "r", "--limit", "3", "--quiet"]
# a URL of a scheme no store can be on, each as the tester met it: memory:// recorded "ok"
# into the process's memory; a chained URL made a local folder "simplecache::s3:"; ftp, github
# and hdfs ended in tracebacks (hdfs with the JVM's dlopen noise); http was said to hold
# credentials, https to have no bucket, data:// hinted --store x/y://BUCKET/PREFIX
NO_STORE_URLS = [
    ("memory://x/y", "memory://"),
    ("simplecache::s3://bkt/st1", "simplecache::"),
    ("ftp://bkt/p", "ftp://"),
    ("github://a/b", "github://"),
    ("hdfs://a/b", "hdfs://"),
    ("http://127.0.0.1:1/bkt", "http://"),
    ("https://x/y", "https://"),
    ("data://x/y", "data://"),
]


@pytest.mark.parametrize(("url", "scheme"), NO_STORE_URLS)
@pytest.mark.parametrize("given", ["after", "before", "env"])
def test_a_store_url_of_another_scheme_is_one_line(tmp_path, monkeypatch, url, scheme, given):
    monkeypatch.chdir(tmp_path)
    for command in (RECORD_3, ["runs"], ["score", "r"]):
        if given == "after":
            args, env = [*command, "--store", url], {}
        elif given == "before":
            args, env = ["--store", url, *command], {}
        else:
            args, env = command, {"TCBREPLAY_STORE": url}
        result = CliRunner().invoke(main, args, env=env)
        errors = assert_input_error(result, "Hint: give a folder, or a URL of s3://, s3a://, gs://")
        assert errors == [f"--store {scheme}...: " + (
            "a chained URL (fsspec's PROTOCOL::URL) is not a store tcbreplay can write and read"
            if scheme.endswith("::") else f"{scheme} is not a store tcbreplay can write and read"
        )]  # fmt: skip
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("name", "char"), [("l*", "*"), ("l?", "?"), ("l[1]", "["), ("l]", "]")])
def test_a_local_store_holding_a_wildcard_is_one_line(tmp_path, name, char):
    # DuckDB read the runs of every folder the pattern matched, and a traceback where it
    # matched none
    store = tmp_path / name
    for command in (RECORD_3, ["runs"], ["score", "r"], ["sql", "select 1"]):
        result = cli(*command, "--store", store)
        errors = assert_input_error(result, "Hint: name the store without * ? [ ]")
        assert errors == [
            f"--store {store}: {char!r} is a wildcard to the libraries that read and delete the "
            "store, which would take other stores' runs for its own"
        ]
    assert list(tmp_path.iterdir()) == []


def test_a_file_url_store_is_the_folder_it_names(tmp_path, monkeypatch):
    # file:///tmp/x/fst made a folder "file:" here, wrote part of a run, then failed
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    folder = tmp_path / "fst"
    url = folder.as_uri()
    result = cli(*RECORD_3, "--store", url)
    assert result.exit_code == 0, result.output
    assert f"-> {folder / 'r'}\n" in result.output
    assert f"next: tcbreplay score r --store {folder}" in result.output
    scored = cli("--store", url, "score", "r", "--format", "json")
    assert scored.exit_code == 0, scored.output
    assert (folder / "r" / "scores" / "spec" / "summary.json").is_file()
    listed = CliRunner().invoke(main, ["runs", "--format", "json"], env={"TCBREPLAY_STORE": url})
    assert [run["run_id"] for run in json.loads(listed.stdout)] == ["r"]
    assert list(cwd.iterdir()) == []


def test_a_store_folder_whose_name_reads_as_a_scheme_records_and_scores(tmp_path, monkeypatch):
    # Arrow took foo:bar/r/messages.parquet for a URL of a scheme foo: a traceback midway,
    # the run left recording
    monkeypatch.chdir(tmp_path)
    result = cli(*RECORD_3, "--store", "foo:bar")
    assert result.exit_code == 0, result.output
    scored = cli("score", "r", "--store", "foo:bar", "--format", "json")
    assert scored.exit_code == 0, scored.output
    assert (tmp_path / "foo:bar" / "r" / "scores" / "spec" / "summary.json").is_file()
