"""Helpers shared by the report tests: hand-written runs and the page's JSON payloads."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tcbreplay._importers.import_run import import_traces
from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._store.runs import Store

DATA = Path(__file__).parent / "data" / "report"
TOOLS_JSON = Path(__file__).parent / "data" / "tools_shop.json"


def import_hand_run(store: Store, run_id: str, traces: str) -> str:
    """Import ``tests/data/report/<traces>``: six hand-written samples with known scores."""
    inputs = load_inputs(None, DATA / "dataset.json", str(TOOLS_JSON), None, need_prompt=False)
    return import_traces(inputs, DATA / traces, store, run_id).run_id


def payload(html_text: str, element_id: str) -> dict:
    """The JSON of one ``<script type="application/json">`` element of the page."""
    match = re.search(
        rf'<script type="application/json" id="{element_id}">(.*?)</script>', html_text, re.S
    )
    assert match, element_id
    return json.loads(match.group(1))


def drifted_replay(sim_run, root: Path, limit: int = 12) -> tuple[Store, str, str]:
    """A store at ``root`` holding a copy of the sim run and its replay ``drift`` with
    ``add_numbers`` adding one too many (its first ``limit`` samples): (store, parent,
    replay). The replay runs in a thread of its own (its event loop cannot start where
    Playwright's runs)."""
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from tcbreplay._replay.run import replay_run

    source, parent = sim_run
    store = Store(root)
    shutil.copytree(source.run_dir(parent), store.run_dir(parent))
    with ThreadPoolExecutor(1) as pool:
        pool.submit(replay_run, store, parent, new_run_id="drift", limit=limit,
                    tools="replay_fixtures:DRIFTED").result()  # fmt: skip
    return store, parent, "drift"
