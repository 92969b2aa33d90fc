"""The manual in docs/ covers the code: every command and option is documented on its page,
the generated references leave nothing out, and the metric spec's worked examples agree with
the tested table of cases. (``make docs`` builds the site itself, warnings as errors.)"""

from __future__ import annotations

import importlib.util
import json
import re
from fractions import Fraction
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
CASES = {
    case["name"]: case
    for case in json.loads((Path(__file__).parent / "data" / "metric_cases.json").read_text())[
        "cases"
    ]
}
# options every command takes, documented once on the commands' index page
SHARED = {"--store", "--format", "--help"}


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks/reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _hooks()
COMMANDS = list(reference.commands())


def page_of(path: tuple[str, ...]) -> Path:
    """The page of ``tcbreplay NAME ...``: docs/commands/NAME.md (the group: index.md)."""
    return DOCS / "commands" / (f"{path[1]}.md" if len(path) > 1 else "index.md")


def documented(option: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def test_every_command_has_help_and_a_page():
    leaves = [(path, cmd) for path, cmd in COMMANDS if not isinstance(cmd, click.Group)]
    assert len(leaves) >= 12
    for path, cmd in COMMANDS:
        name = " ".join(path)
        assert (cmd.help or "").strip(), f"{name} has no help text"
        page = page_of(path)
        assert page.exists(), f"{name} has no page ({page.relative_to(ROOT)})"
        title = page.read_text(encoding="utf-8").splitlines()[0]
        if len(path) > 1:
            assert title.startswith(f"# `{name}"), f"{page.name}: title {title!r}, not {name}"


def test_every_command_page_is_a_command():
    names = {path[1] for path, _ in COMMANDS if len(path) > 1}
    pages = {page.stem for page in (DOCS / "commands").glob("*.md")} - {"index"}
    assert pages == names
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for name in names:
        assert f"commands/{name}.md" in nav, f"docs/commands/{name}.md is not in the nav"


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(path) for path, _ in COMMANDS])
def test_every_option_has_help_and_is_named_on_its_page(path, cmd):
    page = page_of(path).read_text(encoding="utf-8")
    shared = (DOCS / "commands" / "index.md").read_text(encoding="utf-8")
    for param in cmd.get_params(click.Context(cmd)):
        if not isinstance(param, click.Option) or param.hidden:
            continue
        option = max(param.opts, key=len)
        where = f"{' '.join(path)} {option}"
        assert (param.help or "").strip(), f"{where} has no help text"
        assert documented(option, page) or (option in SHARED and documented(option, shared)), (
            f"{where} is not named on {page_of(path).relative_to(ROOT)}"
        )


def test_the_cli_reference_has_every_command_and_option():
    text = reference.cli_reference()
    for path, cmd in COMMANDS:
        assert f"## `{' '.join(path)}`" in text
        assert f"Usage: {' '.join(path)} " in text
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert documented(max(param.opts, key=len), text), (path, param.opts)
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert reference.render(page).count("Usage: tcbreplay") == len(COMMANDS)


def test_the_api_reference_has_every_exported_name():
    import tcbreplay

    text = reference.api_reference()
    names = [name for name in tcbreplay.__all__ if not name.startswith("__")]
    for name in names:
        assert f"## `tcbreplay.{name}`" in text, name
    assert "<!-- api-reference -->" in (DOCS / "python.md").read_text(encoding="utf-8")
    # docstrings' reST roles and double backticks become Markdown code
    assert ":func:" not in text and not re.search(r"(?<!`)``(?!`)", text)


def test_includes_drop_the_title_and_name_a_file_that_exists():
    for page in DOCS.rglob("*.md"):
        for name in re.findall(r"^<!-- include: (\S+) -->$", page.read_text(), re.M):
            assert (ROOT / name).is_file(), f"{page.name} includes {name}, which does not exist"
    assert not reference.include("BENCHMARKS.md").startswith("# Benchmarks")


# --- the metric spec's worked examples --------------------------------------------------------

METRICS = (DOCS / "metrics.md").read_text(encoding="utf-8")
_EXAMPLE = re.compile(r"<!-- case: (\S+) -->\n```text\n(.*?)```", re.S)


def _call(call: list) -> str:
    name, args, *rules = call
    text = (
        f"{name}({', '.join(f'{k}={json.dumps(v, ensure_ascii=False)}' for k, v in args.items())})"
    )
    return f"{text} {json.dumps(rules[0], ensure_ascii=False)}" if rules else text


def _lines(block: str) -> dict[str, str]:
    return {
        label: value.strip()
        for label, _, value in (line.partition(":") for line in block.splitlines())
    }


def _results(line: str) -> dict[str, str]:
    """``tsa 1/2 · tp 1/3 · ahr 0/1`` as {"tsa": "1/2", ...}."""
    return dict(part.strip().split(" ", 1) for part in line.split("·"))


def _assert_value(name: str, text: str, want, where: str) -> None:
    if text in ("null", "true", "false"):
        assert want == json.loads(text), f"{where}: {name} {text}, the case says {want}"
    elif want is None or isinstance(want, bool):
        raise AssertionError(f"{where}: {name} {text}, the case says {want}")
    else:
        assert abs(Fraction(text) - Fraction(want)) < 1e-12, f"{where}: {name} {text} != {want}"


def test_the_worked_examples_are_the_cases_of_the_table():
    examples = _EXAMPLE.findall(METRICS)
    assert len(examples) >= 15
    assert len(examples) == METRICS.count("<!-- case: ")
    for name, block in examples:
        assert name in CASES, f"metrics.md: no case {name} in tests/data/metric_cases.json"
        case, lines = CASES[name], _lines(block)
        assert lines["gold"] == ", ".join(_call(call) for call in case["gold"]), name
        agent = " ".join(f"[{', '.join(_call(call) for call in turn)}]" for turn in case["turns"])
        assert lines["agent"] == agent, name
        for metric, text in _results(lines["result"]).items():
            expect = case["expect"]
            assert metric in expect, f"{name}: the case has no {metric}"
            if metric == "ahr" and "/" in text:  # args_invalid / args_total
                invalid, total = (int(x) for x in text.split("/"))
                assert (invalid, total) == (expect["args_invalid"], expect["args_total"]), name
            _assert_value(metric, text, expect[metric], name)


def test_the_run_example_adds_up_its_samples_as_the_spec_says():
    names, block = re.search(r"<!-- run: (.*?) -->\n```text\n(.*?)```", METRICS, re.S).groups()
    samples = [CASES[name.strip()]["expect"] for name in names.split(",")]
    tsa = [s["tsa"] for s in samples if s["tsa"] is not None]
    clean = [
        s["tsa"] in (None, 1) and s["tp"] == 1 and s["ahr"] in (None, 0) and s["args_missing"] == 0
        for s in samples
    ]
    run = {
        "tsa": sum(map(Fraction, tsa)) / len(tsa),
        "tp": sum(Fraction(s["tp"]) for s in samples) / len(samples),
        "ahr": Fraction(
            sum(s["args_invalid"] for s in samples), sum(s["args_total"] for s in samples)
        ),
        "args_missing": sum(s["args_missing"] for s in samples),
        "exact": Fraction(sum(clean), len(samples)),
    }
    results = _results(_lines(block)["result"])
    assert set(results) <= set(run)
    for metric, text in results.items():
        _assert_value(metric, text, run[metric], f"the run example's {metric}")
