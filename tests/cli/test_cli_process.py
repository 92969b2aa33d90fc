"""The console script in a real process (``python -m tcbreplay``): exit codes and output are
those of the command, after the fast ending that skips Python's teardown (``cli.run``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT


def tcbreplay(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_API_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "tcbreplay", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, **kwargs,
    )  # fmt: skip


@pytest.mark.slow  # (a process of its own: 3-4 s under the suite's load)
def test_a_command_prints_all_its_output_and_exits_0(sim_run):
    store, run_id = sim_run
    done = tcbreplay("score", run_id, "--store", str(store.root), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("}") and f'"run_id": "{run_id}"' in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("args", "code", "first_line"),
    [
        (["score", "no-such-run", "--store", "{store}"], 2, "Error: run 'no-such-run' not found"),
        # a process each (1-2 s under the suite's load): the rest of the kinds in test-slow
        pytest.param(
            ["score", "--no-such-option"],
            2,
            "Error: No such option '--no-such-option'",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            ["sql", "delete from samples", "--store", "{store}"],
            2,
            "Error: ",
            marks=pytest.mark.slow,
        ),
        ([], 2, "Usage: "),
    ],
)
def test_errors_keep_their_exit_code_and_message(sim_run, args, code, first_line):
    store, _ = sim_run
    done = tcbreplay(*(a.replace("{store}", str(store.root)) for a in args))
    assert done.returncode == code
    out = done.stderr if first_line.startswith("Error") else done.stdout + done.stderr
    assert out.lstrip().startswith(first_line), out
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # (a process of its own: about 3 s under the suite's load)
def test_a_closed_pipe_is_no_traceback(sim_run):
    """``tcbreplay ... | head -1``: the reader goes away before the output is flushed."""
    store, _ = sim_run
    proc = subprocess.Popen(
        [sys.executable, "-m", "tcbreplay", "sql", "select * from messages", "--store",
         str(store.root), "--format", "json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    proc.stdout.read(10)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0  # (0 or 1 by the timing, before)
    assert "Traceback" not in stderr


@pytest.mark.slow  # (a process of its own)
def test_a_pipe_closed_before_rich_draws_exits_0(sim_run):
    """A table's title, header or caption that is not plain ASCII is drawn by rich, whose
    own handling of a reader gone (``| head``) exited 1; the CLI's exits 0."""
    store, _ = sim_run
    proc = subprocess.Popen(
        [sys.executable, "-m", "tcbreplay", "sql", 'select sample_id as "é" from samples',
         "--store", str(store.root), "--format", "table"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    proc.stdout.close()  # (gone before the first line is drawn)
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, stderr
    assert "Traceback" not in stderr


@pytest.mark.slow  # two processes (about 5 s under the suite's load)
@pytest.mark.parametrize("command", ["report", "catalog"])
def test_output_to_dev_stdout_through_a_pipe(sim_run, command):
    """``-o /dev/stdout`` when stdout is a pipe: written into the pipe, not refused because
    the pipe has no name to replace."""
    store, run_id = sim_run
    args = ["report", run_id] if command == "report" else ["catalog"]
    done = subprocess.run(
        [sys.executable, "-m", "tcbreplay", *args, "-o", "/dev/stdout", "--store",
         str(store.root)],
        cwd=ROOT, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    if command == "report":
        assert done.stdout.startswith(b"<!doctype html>")
    else:
        assert done.stdout[8:12] == b"DUCK"  # a DuckDB database file's magic bytes


def test_sigterm_is_ctrl_c_in_the_block_and_left_as_it_was_after():
    import signal
    import threading

    from tcbreplay._cli.common import sigterm_as_ctrl_c

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), sigterm_as_ctrl_c() as stopped:
        assert stopped.exit_code == 130  # not stopped yet: Ctrl-C's code
        signal.raise_signal(signal.SIGTERM)
    assert stopped.exit_code == 143  # the shell's code for SIGTERM: a scheduler sees which
    assert signal.getsignal(signal.SIGTERM) == before
    seen: list[object] = []

    def other_thread() -> None:  # only the main thread may set a handler: left alone
        with sigterm_as_ctrl_c():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen == [before]
