"""The lock files under requirements/ agree with pyproject.toml: a clone installs, for its tests
and its demo, versions inside the ranges users get, and every requirement is pinned."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parent.parent
LOCKS = ROOT / "requirements"
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;#]+)")


def _pins(name: str) -> dict[str, str]:
    path = LOCKS / name
    if not path.exists():
        pytest.skip(f"no {path} (not a checkout)")
    pins = {}
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
        else:
            assert not line.strip() or line.lstrip().startswith("#"), f"{name}: not a pin: {line}"
    return pins


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements(lines: list[str]) -> list[Requirement]:
    reqs = [Requirement(line) for line in lines]
    env = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux"}
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def _assert_pinned_within(reqs: list[Requirement], pins: dict[str, str], lock: str) -> None:
    for req in reqs:
        name = canonicalize_name(req.name)
        assert name in pins, f"{lock} does not pin {req.name}: run make lock"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{lock} pins {req.name}=={pins[name]}, outside {req.specifier}: run make lock"
        )


def test_the_test_lock_pins_every_requirement_inside_its_range():
    """(the test lock holds the docs extra too: `make install` installs what `make docs` needs;
    and the s3 extra, which the tests of stores on object storage use)"""
    project = _project()["project"]
    extras = project["optional-dependencies"]
    reqs = _requirements([*project["dependencies"], *extras["test"], *extras["docs"],
                          *extras["s3"]])  # fmt: skip
    _assert_pinned_within(reqs, _pins("test.txt"), "requirements/test.txt")


def test_the_runtime_lock_is_the_runtime_part_of_the_test_lock():
    runtime, test = _pins("runtime.txt"), _pins("test.txt")
    _assert_pinned_within(
        _requirements(_project()["project"]["dependencies"]), runtime, "requirements/runtime.txt"
    )
    assert {name: test.get(name) for name in runtime} == runtime
    # what the demo installs leaves out the suite's own tools and the manual's
    tools = {"pytest", "playwright", "inspect-ai", "mcp", "ruff", "mypy", "mkdocs"}
    assert not tools & set(runtime)


def test_what_builds_tcbreplay_is_locked_too():
    build = (LOCKS / "build.in").read_text().splitlines()
    listed = [line for line in build if line.strip() and not line.startswith("#")]
    assert listed == _project()["build-system"]["requires"]
    for lock in ("runtime.txt", "test.txt"):
        _assert_pinned_within(_requirements(listed), _pins(lock), f"requirements/{lock}")
