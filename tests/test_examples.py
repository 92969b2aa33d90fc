"""The scripts in examples/ run as a user runs them (a subprocess, tcbreplay on the PATH, a
fresh store) against the small fixtures in tests/data/, and print what they promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).parent / "data"
REPORT = (DATA / "report/dataset.json", DATA / "tools_shop.json",
          DATA / "report/traces_a.jsonl", DATA / "report/traces_b.jsonl")  # fmt: skip


def run_example(name: str, *args: Path, cwd: Path, store: Path | None = None) -> str:
    """Run ``examples/NAME`` in ``cwd``, whose ./traces is the store (``store``: the one
    TCBREPLAY_STORE names instead); its stdout."""
    script = EXAMPLES / name
    command = [script]  # run as the docs show it (examples/NAME ...): by its #! line
    env = {
        **os.environ,
        # the tcbreplay of this environment, as a user's activated virtualenv gives it
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "120",
    }
    env.pop("TCBREPLAY_STORE", None)
    if store is not None:
        env["TCBREPLAY_STORE"] = str(store)
    out = subprocess.run(
        [*command, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def cells(output: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for line in output.splitlines():
        row = [cell.strip() for cell in line.split("│")]
        if row[0] == first:
            return row
    raise AssertionError(f"no row {first!r} in:\n{output}")


def test_every_example_is_run_here():
    tested = {
        "score_inspect_log.sh",
        "compare_two_models.sh",
        "tau_bench_validity.sh",
        "use_the_library.py",
        "replay_a_changed_prompt.sh",
        "score_production_traces.sh",
        "tau2_sides.sh",
    }
    assert {path.name for path in EXAMPLES.iterdir()} == tested
    assert all(os.access(EXAMPLES / name, os.X_OK) for name in tested)


@pytest.mark.slow  # inspect_ai takes seconds to import
def test_score_an_inspect_log(tmp_path):
    pytest.importorskip("inspect_ai")
    log = DATA / "inspect" / "mockllm-2-samples-2-epochs.json"
    out = run_example("score_inspect_log.sh", log, cwd=tmp_path)
    assert "run inspect: 2 samples, 2 trials each: 4/4 trials imported" in out
    assert cells(out, "ahr  argument hallucination rate")[1:4] == ["0.1250", "0.125", "1/8 args"]
    assert cells(out, "2")[1:3] == ["0.5000", "1.0000"]  # pass^2, pass@2
    # the worst sample first: mul's second epoch, where the model passed a wrong value
    assert cells(out, "inspect")[1:6] == ["mul", "1", "1", "1", "0.5"]
    assert (tmp_path / "traces" / "inspect" / "scores" / "spec" / "summary.json").exists()


@pytest.mark.slow  # four commands, each a process of its own (about 4 s under load)
def test_compare_two_models(tmp_path):
    out = run_example("compare_two_models.sh", *REPORT, cwd=tmp_path)
    assert "run model-a: 6/6 samples imported" in out and "run model-b: 6/6" in out
    assert "model-b vs model-a  (6 common samples, scoring spec)" in out
    assert cells(out, "tp")[1:4] == ["0.6667", "0.5833", "-0.0833"]
    assert cells(out, "perfect")[1:3] == ["-1.0000", "-1.0000"]  # regressed
    assert cells(out, "missed-call")[1:3] == ["+0.5000", "+0.5000"]  # improved


@pytest.mark.slow  # three commands, each a process of its own
def test_import_tau_bench_and_run_validity(tmp_path):
    tau = DATA / "tau-bench"
    out = run_example(
        "tau_bench_validity.sh",
        tau / "gpt-4o-airline-sample.json",
        tau / "airline-tools.json",
        cwd=tmp_path,
    )
    assert "run tau: 5 samples, 4 trials each: 20/20 trials imported" in out
    assert cells(out, "write_exact  write calls as gold")[3] == "7/20 trials"
    assert "tau: outcome abs(reward - 1) <= 1e-6  (scoring spec)" in out
    # the numbers of BENCHMARKS.md's validity table (AUC: bootstrap-free)
    assert cells(out, "write_exact")[:6] == ["write_exact", "higher", "20", "0.8571", "0.0769",
                                             "0.8901"]  # fmt: skip
    assert cells(out, "tp")[:6] == ["tp", "higher", "20", "0.2740", "0.0892", "0.6593"]


@pytest.mark.slow  # eight commands, a process each
def test_tau2_sides(tmp_path):
    out = run_example("tau2_sides.sh", DATA / "tau2" / "gpt-4.1_telecom_sample.json", cwd=tmp_path)
    assert "run tau2: 5/5 samples imported" in out
    tables = out.split("tau2: outcome abs(reward - 1) <= 1e-6")[1:]
    assert [t.split("\n", 1)[0].strip() for t in tables] == [
        "(scoring spec)", "(scoring spec_side-user)", "(scoring spec_side-both)",
    ]  # fmt: skip
    # covered: AUC 0.75 on either side alone, 1 on both together (reward = both sides' work)
    assert [cells(t, "covered")[5] for t in tables] == ["0.7500", "0.7500", "1.0000"]


@pytest.mark.slow  # two exports, each imported, scored and queried by a process per command
@pytest.mark.parametrize(
    "traces", ["langsmith/runs.parquet", "langfuse/observations.parquet"], ids=lambda t: t[:9]
)
def test_score_production_traces(tmp_path, traces):
    """A LangSmith bulk export and a Langfuse blob export of the same agent's traces score
    alike against the dataset their traces are matched to."""
    dataset = DATA / traces.split("/")[0] / "dataset.json"
    out = run_example(
        "score_production_traces.sh", DATA / traces, dataset, DATA / "tools_shop.json", cwd=tmp_path
    )
    assert (
        "run production: 5 samples, 2 trials each: 6/10 trials imported, 4 without a trace" in out
    )
    assert cells(out, "tp   trajectory precision")[1:4] == ["0.4500", "0.45", "10 trials"]
    assert cells(out, "ahr  argument hallucination rate")[1:4] == ["0.3750", "0.375", "3/8 args"]
    # the worst samples: the failed trace among them, as its sample's trial 0
    worst = [[c.strip() for c in line.split("│")] for line in out.splitlines()]
    worst = [row[1:9] for row in worst if row[0] == "production"]
    assert ["mul-7-by-8", "0", "0", "0", "NULL", "1", "0", "error"] in worst


@pytest.mark.slow  # (about 2.5 s: a process of its own)
def test_use_the_library(tmp_path):
    out = run_example("use_the_library.py", *REPORT, tmp_path / "store", cwd=tmp_path)
    assert out.splitlines() == [
        "run a: 6 samples imported",
        "  tsa 0.7000  tp 0.6667  ahr 0.2857",
        "  lowest tp: crashed (0.00)",
        "  lowest tp: extra-call (0.50)",
        "run b: 6 samples imported",
        "  tsa 0.6000  tp 0.5833  ahr 0.2857",
        "  lowest tp: crashed (0.00)",
        "  lowest tp: perfect (0.00)",
        "calls per run: {'a': 5, 'b': 5}",
        "tp: 0.6667 -> 0.5833 (delta -0.0833)",
        "regressed: perfect",
        "improved: missed-call",
    ]
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["a", "b"]


@pytest.mark.slow  # six commands, each a process of its own: seconds of CPU
def test_replay_a_changed_prompt(tmp_path):
    """The Replay page's worked example (docs/replay.md includes the script), with the store
    its header names: it read traces/base/manifest.json whatever TCBREPLAY_STORE said."""
    store = tmp_path / "elsewhere" / "store"
    out = run_example("replay_a_changed_prompt.sh", cwd=tmp_path, store=store)
    assert "run base (simulated model): 12/12 ok" in out
    assert "Always show your working." in (tmp_path / "prompt.txt").read_text()
    assert (
        "replay new-prompt of base: 12 samples, 12 diverged (system x12), 0 ok, 0 turns "
        "served, 0 live calls" in out
    )
    assert cells(out, "capital-of-france")[1:4] == ["0", "system", "system"]
    assert "replay new-prompt-live of base: 12 samples, 12 diverged (system x12), 12 ok" in out
    assert "new-prompt-live vs base  (12 common samples" in out
    assert "spec_gold-base" in out
    assert (store / "new-prompt-live" / "scores" / "spec_gold-base").is_dir()
    page = (ROOT / "docs" / "replay.md").read_text()
    assert "<!-- include: examples/replay_a_changed_prompt.sh -->" in page
