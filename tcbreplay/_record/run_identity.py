"""What names a recorded run: the fingerprint of everything that decides what it should
contain, the code of the user's it runs, and the run id a recording takes by default.

A recording resumes a run only when the fingerprints agree (see
:mod:`tcbreplay._record.resume`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.tools import code_sha256
from tcbreplay._record.models import TRANSPORT_SETTINGS, ModelChoice
from tcbreplay._store.runs import Store
from tcbreplay.errors import TcbReplayError


def fingerprint(
    inputs: BenchmarkInputs,
    choice: ModelChoice,
    agent: str | None = None,
    former: bool = False,
    code: Mapping[str, Any] | None = None,
) -> str:
    """sha256 of everything that decides what a recording should contain (``agent``: the
    ``--agent`` factory, only when given, so runs of the built-in agent keep theirs; ``code``:
    the sha256 of the user's code it runs, see :func:`user_code`, only when there is any). The
    sim model is named by its settings alone, however they were spelled (``sim:seed=7``,
    ``sim`` with ``--model-option seed=7``); ``former``: as tcbreplay hashed it before, with
    the model string as given."""
    fields = inputs.manifest_fields()
    basis = {
        "dataset": inputs.dataset.entries(),
        "tools": fields["tools"]["specs"],
        "system_prompt": fields["system_prompt"]["text"],
        "model": "sim" if choice.simulated and not former else choice.id,
        "settings": {k: v for k, v in choice.settings.items() if k not in TRANSPORT_SETTINGS},
        **({"agent": agent} if agent else {}),
        **({"code": dict(code)} if code else {}),
    }
    text = json.dumps(basis, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def user_code(inputs: BenchmarkInputs, agent: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The sha256 of the code of the user's a recording runs, which a resumed run must run
    too: the module of the ``--agent`` factory (``agent``: what the manifest records of it),
    and the modules that define the tools of ``--tools`` (as a replay hashes them, see
    :func:`tcbreplay._inputs.tools.code_sha256`). tcbreplay's own modules (the built-in
    benchmarks' tools) are left out: they change with tcbreplay, which the manifest's
    versions record, and the fingerprints of runs of the built-in agent and tools stay as
    they were."""
    code: dict[str, Any] = {}
    if agent is not None:
        code["agent"] = agent.get("sha256")
    tools = code_sha256(inputs.toolset.tools or [], inputs.toolset.source)
    tools = {name: sha for name, sha in tools.items() if name.partition(".")[0] != "tcbreplay"}
    if tools:
        code["tools"] = tools
    return code


def _run_fingerprint(
    store: Store, run_id: str, inputs: BenchmarkInputs, choice: ModelChoice,
    agent: str | None, overwrite: bool, code: Mapping[str, Any] | None = None,
) -> str:  # fmt: skip
    """The fingerprint a recording of run ``run_id`` checks the run's against: a former one
    (see :func:`fingerprint`) when an older tcbreplay recorded the run of these same inputs,
    so that its run is resumed as before: before the user's ``code`` was hashed, and, of the
    sim model, before its settings alone named it."""
    print_ = fingerprint(inputs, choice, agent, code=code)
    if overwrite or not store.exists(run_id):
        return print_
    try:
        stored = store.open_run(run_id, writing=True).manifest.get("fingerprint")
    except TcbReplayError:  # said by the recording's own look at the run
        return print_
    formers = {fingerprint(inputs, choice, agent)}
    if choice.simulated:
        formers.add(fingerprint(inputs, choice, agent, former=True))
    return stored if stored in formers else print_


def default_run_id(inputs: BenchmarkInputs, choice: ModelChoice, agent: str | None = None) -> str:
    """``<benchmark>-<model>-<fingerprint>``: the same command names the same run."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", choice.name if not choice.simulated else "sim")
    return f"{inputs.name}-{model}-{fingerprint(inputs, choice, agent)[:10]}"
