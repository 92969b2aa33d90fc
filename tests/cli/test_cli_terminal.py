"""What a real terminal 80 columns wide shows (tmux): the live progress line of a recording
and the tables of runs, score and sql keep their key numbers."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from helpers import ROOT, cli

# a recording and three commands in tmux panes (about 8 s under the suite's load)
pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
              pytest.mark.slow]  # fmt: skip

WIDTH = 80
SAMPLES = "select * from samples order by sample_index limit 3"


class Pane:
    """A tmux pane of WIDTH columns on a tmux server of this test's own."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def run(self, command: str) -> None:
        # the pane stays open once the command ends, so that it can be read
        self.tmux("respawn-pane", "-k", "-t", "t", f"{command}; sleep 600")

    def screen(self) -> str:
        """The pane's text, history included, wrapped lines joined (so a line that did not
        fit shows up as one longer than WIDTH)."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "t")

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.screen())
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"never shown: {pattern!r} in\n{self.screen()}")


@contextmanager
def pane() -> Iterator[Pane]:
    socket = f"tcbreplay-test-{os.getpid()}"
    p = Pane(socket)
    p.tmux("new-session", "-d", "-s", "t", "-x", str(WIDTH), "-y", "40", "sleep 600")
    try:
        yield p
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def tcbreplay(*args: object) -> str:
    env = f"cd {shlex.quote(str(ROOT))} && env -u COLUMNS -u GOOGLE_API_KEY"
    return f"{env} {shlex.quote(sys.executable)} -m tcbreplay {shlex.join(map(str, args))}"


def test_the_live_progress_line_keeps_done_rate_and_eta(tmp_path):
    """Reported: at 80 columns the progress line cut done/total, rate and ETA first."""
    model = "sim:seed=123456789,error_rate=0.25,latency=0.05,mistakes=skip+swap+wrong_value"
    with pane() as p:
        p.run(tcbreplay("record", "--model", model, "--workers", "2", "--store", tmp_path))
        found = p.wait_for(r"(?m)^(.*) (\d+)/94  (\d+\.\d)/s  eta (\d:\d\d:\d\d)  errors \d+")
        line = found[0]
        assert len(line) <= WIDTH
        assert 0 < int(found[2]) <= 94 and float(found[3]) > 0
        assert found[1].startswith("recording sim:") and "…" in found[1]  # the label cut to fit


def test_runs_score_and_sql_tables_keep_their_numbers(sim_run, tmp_path):
    store, run_id = sim_run
    root = tmp_path / "traces"
    shutil.copytree(store.run_dir(run_id), root / run_id)
    assert cli("score", run_id, "--store", root, "--dashboard", "none").exit_code == 0
    summary = json.loads((root / run_id / "scores" / "spec" / "summary.json").read_text())
    with pane() as p:
        p.run(
            " && ".join(
                [
                    tcbreplay("runs", "--store", root),
                    tcbreplay("score", run_id, "--store", root, "--dashboard", "none"),
                    tcbreplay("sql", SAMPLES, "--store", root),
                    "echo END",
                ]
            )
        )
        p.wait_for(r"(?m)^END$")
        screen = p.screen()
    lines = screen.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, screen
    runs_line = next(line for line in lines if line.startswith(f"{run_id} "))
    for metric in ("tsa", "tp", "ahr"):
        assert f"{summary[metric]:.4f}" in runs_line, screen
        score_line = next(line for line in lines if line.startswith(f"{metric} "))
        assert repr(summary[metric]) in score_line, screen
    for row in summary["by_tool"]:
        tool_line = next(line for line in lines if line.startswith(row["tool"]))
        assert f"{row['ahr']:.4f}" in tool_line and str(row["args_total"]) in tool_line
    sample_lines = [line for line in lines if line.startswith(f"{run_id} ") and "│" in line]
    assert len(sample_lines) == 1 + 3  # runs' row, and one line per sample (nothing wraps)
