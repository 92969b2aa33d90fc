"""The README is a front page that stays true: its Python example runs as written, it shows
the two commands' real output, it names every dialect `import` reads, and its links lead into
the manual (docs/), which holds the rest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_library_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", TEXT, re.S)
    assert len(blocks) == 1
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    tsa, tp, ahr = (float(x) for x in out.stdout.splitlines()[0].split())
    assert 0 <= ahr <= 1 and 0 < tsa <= 1 and 0 < tp <= 1
    assert (tmp_path / "traces" / "demo-sim" / "scores" / "spec" / "summary.json").exists()


def test_the_readme_is_a_front_page():
    assert len(TEXT.splitlines()) <= 300
    # measured, never made up: the commands and dates behind them are on the development page
    assert re.search(r"`make demo` took \d+ s and `make test` \d+ min \d+ s", TEXT)


def test_the_two_commands_show_the_demo_numbers():
    """The output shown is the sim's, which is the same on every machine."""
    assert "$ tcbreplay record --model sim:seed=7 --run-id demo-sim" in TEXT
    assert "run demo-sim (simulated model): 94/94 ok, 0 errors, 0 retries" in TEXT
    assert "$ tcbreplay score demo-sim" in TEXT
    assert "tp   trajectory precision        │ 0.9411 │ 0.9410925363053021" in TEXT


@pytest.mark.slow  # records the whole demo (94 samples)
def test_the_score_output_shown_is_what_score_prints(tmp_path):
    """Every line the README shows `score demo-sim` print, as it prints it (a row it gained,
    covered, was missing from the page)."""
    from helpers import cli

    store = tmp_path / "traces"
    made = cli("record", "--model", "sim:seed=7", "--run-id", "demo-sim", "--quiet",
               "--store", store)  # fmt: skip
    assert made.exit_code == 0, made.output
    printed = cli("score", "demo-sim", "--store", store)
    assert printed.exit_code == 0, printed.output
    block = TEXT.split("$ tcbreplay score demo-sim\n", 1)[1].split("\n```", 1)[0]
    shown = [line.rstrip() for line in block.splitlines()]
    actual = [line.rstrip().replace(str(store), "traces") for line in printed.output.splitlines()]
    assert actual == shown


def test_the_import_table_names_every_dialect():
    from tcbreplay._cli import main

    (fmt,) = [p for p in main.get_command(click.Context(main), "import").params if p.name == "fmt"]
    assert isinstance(fmt.type, click.Choice)
    for dialect in fmt.type.choices:
        assert f"`{dialect}`" in TEXT, f"the README's import table lacks {dialect}"


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs gives a page's headings (its toc slugs), and attr_list's {#id}."""
    ids = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if match := re.match(r"#+ (.*?)(?: \{#([\w-]+)\})?$", line):
            title, explicit = match.groups()
            slug = re.sub(r"[^\w\s-]", "", title.lower()).strip()
            ids.add(explicit or re.sub(r"[\s-]+", "-", slug))
    return ids


def test_the_links_lead_somewhere():
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", TEXT)
    assert sum(target.startswith("docs/") for target, _ in links) >= 20
    for target, anchor in links:
        if "://" in target:
            continue
        path = ROOT / target
        assert path.exists(), f"README links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(path), f"README links to {target}#{anchor}: no such heading"


def test_the_measured_install_times_and_the_lock_text_live_in_the_development_page():
    page = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    assert "## Installs come from a lock" in page
    assert re.search(r"`make demo`: \d+(\.\d+)? s wall", page)
