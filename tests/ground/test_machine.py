"""Python's cycle collector held off (``tcbreplay._machine``): for a block, for a command's
first second (``collector_paused_for``), and both at once. Each case runs in a process of its
own, whose collector it may leave off."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers import ROOT


def _run(code: str) -> list[str]:
    script = textwrap.dedent(
        """
        import gc, os, time
        from tcbreplay._machine import collector_paused, collector_paused_for

        def wait_on(deadline_s=30):
            deadline = time.monotonic() + deadline_s
            while not gc.isenabled() and time.monotonic() < deadline:
                time.sleep(0.01)
            return gc.isenabled()
        """
    ) + textwrap.dedent(code)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_first_second_pauses_and_a_forked_child_collects():
    out = _run(
        """
        collector_paused_for(0.2)
        print("paused", gc.isenabled())
        read, write = os.pipe()
        if os.fork() == 0:
            os.write(write, str(gc.isenabled()).encode())
            os._exit(0)
        os.wait()
        print("child", os.read(read, 10).decode())
        print("after", wait_on())
        """
    )
    assert out == ["paused", "False", "child", "True", "after", "True"]


def test_a_block_begun_in_the_pause_keeps_the_collector_off_to_its_end():
    out = _run(
        """
        collector_paused_for(0.1)
        with collector_paused():
            time.sleep(0.5)  # the timer has ended the pause meanwhile
            print("in-block", gc.isenabled())
            with collector_paused():
                pass
            print("after-inner", gc.isenabled())
        print("after-block", gc.isenabled())
        """
    )
    assert out == ["in-block", "False", "after-inner", "False", "after-block", "True"]


def test_a_collector_turned_off_before_stays_off():
    out = _run(
        """
        gc.disable()
        with collector_paused():
            pass
        print("block", gc.isenabled())
        collector_paused_for(0.05)
        time.sleep(0.5)
        print("timer", gc.isenabled())
        """
    )
    assert out == ["block", "False", "timer", "False"]
