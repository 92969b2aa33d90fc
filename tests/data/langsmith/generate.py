"""Write the LangSmith fixtures beside this file from a real agent traced by the real SDK.

A LangGraph agent (LangChain's ``create_agent``) on tcbreplay's ``sim`` model with the built-in
benchmark's tools answers five of its questions (one twice, one failing), traced by LangChain's
own LangSmith tracer (``LANGSMITH_TRACING=true``) into a loopback LangSmith
(``tests/langsmith_server.py``) under a made-up API key that is written nowhere. Then:

- ``posted.multipart``: the body the SDK's background thread posted to ``/runs/multipart``,
  as it was sent;
- ``posted-batch.json``: a body it posted to ``/runs/batch`` (from a second run of the agent,
  against a server without the multipart endpoint, as older LangSmith servers are);
- ``runs.jsonl``: ``Client.list_runs()`` against the loopback server, each ``Run`` as
  ``run.model_dump(mode="json")``, a run a line;
- ``runs.parquet``: the same runs in the bulk export's layout: the columns LangSmith documents
  as its "exportable fields", JSON fields as JSON text, times as UTC timestamps (the types
  are not documented: those are this fixture's choice).

    .venv/bin/python tests/data/langsmith/generate.py

Beside them, ``expected.jsonl`` holds what the agent itself returned for each question (its
messages, as ``messages_to_dict`` writes them, or its error), in the order asked: what
importing any of the files must give; and ``dataset.json`` the samples' gold calls (the
sample run as a dataset example under that example's id, the rest under the benchmark's ids).

``--agent URL OUT`` runs only the agent, traced into URL (the environment names the rest),
writing what it returned to OUT; the live test runs it so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).parent
TESTS = HERE.parent.parent
# a made-up key of LangSmith's shape: the SDK sends it in a header, never in a body
FAKE_KEY = "lsv2_pt_00000000000000000000000000000000_0000000000"
PROJECT = "tcbreplay-fixture"
# the built-in benchmark's samples the agent answers; the last fails (the model errs)
SAMPLES = ("price-3-notebooks", "paren-3.5-plus-2-times-4", "sum-three-numbers", "hi-there")
FAILING = "mul-7-by-8"
TWICE = "sum-three-numbers"  # answered twice: two trials of one sample
# the sample traced as a LangSmith dataset example's run: its reference_example_id
EXAMPLE = "paren-3.5-plus-2-times-4"
EXAMPLE_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, f"tcbreplay:{EXAMPLE}"))
SIM = {"seed": 11, "error_rate": 0.4, "parallel": 0.5}


def agent_env(url: str) -> dict[str, str]:
    """The environment that traces the agent into ``url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env.update(
        LANGSMITH_TRACING="true",
        LANGSMITH_ENDPOINT=url,
        LANGSMITH_API_KEY=FAKE_KEY,
        LANGSMITH_PROJECT=PROJECT,
    )
    return env


def run_agent(url: str, out: Path, *, timeout: float = 120) -> None:
    """Run the agent in a fresh process (the SDK reads its settings once per process),
    writing what it returned to ``out``."""
    subprocess.run(
        [sys.executable, __file__, "--agent", url, str(out)],
        env=agent_env(url),
        check=True,
        timeout=timeout,
    )


def _agent(out: Path) -> None:
    """The agent's questions, traced as the environment says; what it returned, to ``out``."""
    from langchain.agents import create_agent
    from langchain_core.messages import messages_to_dict
    from langchain_core.tracers.context import tracing_v2_enabled
    from langchain_core.tracers.langchain import wait_for_all_tracers

    from tcbreplay._inputs.benchmarks.tool_call.tools import TOOLS
    from tcbreplay._record.models.sim import SAMPLE_ID_KEY, SimChatModel

    entries = {e["id"]: e for e in json.loads(_benchmark_dataset().read_text())}
    plans = {
        sid: [(c["name"], c["args"]) for c in entries[sid].get("target") or []]
        for sid in (*SAMPLES, FAILING)
    }
    model = SimChatModel.from_settings({**_sim_defaults(), **SIM}, plans)
    failing = SimChatModel.from_settings({**_sim_defaults(), **SIM, "fault_rate": 1.0}, plans)
    prompt = "You are a shop's assistant. Use the tools for prices and arithmetic."
    agent = create_agent(model, tools=TOOLS, system_prompt=prompt)
    broken = create_agent(failing, tools=TOOLS, system_prompt=prompt)
    returned = []
    for sid in (*SAMPLES, TWICE, FAILING):
        config = {"metadata": {SAMPLE_ID_KEY: sid}}
        question = {"messages": [{"role": "user", "content": entries[sid]["input"]}]}
        try:
            if sid == FAILING:
                result = broken.invoke(question, config)
            elif sid == EXAMPLE:
                with tracing_v2_enabled(project_name=PROJECT, example_id=EXAMPLE_ID):
                    result = agent.invoke(question, config)
            else:
                result = agent.invoke(question, config)
        except Exception as exc:  # the trace keeps the error
            returned.append({"sample_id": sid, "error": repr(exc)})
        else:
            messages = messages_to_dict(result["messages"])
            returned.append({"sample_id": sid, "messages": messages})
    wait_for_all_tracers()
    out.write_text("".join(json.dumps(r) + "\n" for r in returned))


def _benchmark_dataset() -> Path:
    import tcbreplay._inputs.benchmarks.tool_call as tool_call

    return Path(tool_call.__file__).parent / "dataset.json"


def _sim_defaults() -> dict:
    from tcbreplay._record.models.sim import parse_sim_options

    return parse_sim_options("")


def dataset() -> list[dict]:
    """The samples asked, with their gold calls: the dataset example's under its id."""
    entries = {e["id"]: e for e in json.loads(_benchmark_dataset().read_text())}
    out = []
    for sid in (*SAMPLES, FAILING):
        entry = {k: entries[sid][k] for k in ("id", "input", "target")}
        if sid == EXAMPLE:
            entry["id"] = EXAMPLE_ID
        out.append(entry)
    return out


def list_runs(url: str) -> list[dict]:
    """``Client.list_runs()`` of the project, as the SDK's ``Run`` objects dump."""
    from langsmith import Client
    from langsmith_server import SESSION_ID

    client = Client(api_url=url, api_key=FAKE_KEY, auto_batch_tracing=False)
    return [run.model_dump(mode="json") for run in client.list_runs(project_id=SESSION_ID)]


# the bulk export's columns, as LangSmith's data export page lists them ("Exportable fields")
EXPORT_COLUMNS = (
    "id", "tenant_id", "session_id", "trace_id", "parent_run_id", "parent_run_ids",
    "reference_example_id", "name", "run_type", "start_time", "end_time", "status", "is_root",
    "dotted_order", "trace_tier", "inputs", "outputs", "error", "extra", "events", "tags",
    "feedback_stats", "total_tokens", "prompt_tokens", "completion_tokens", "total_cost",
    "prompt_cost", "completion_cost", "first_token_time",
)  # fmt: skip
_JSON_COLUMNS = ("inputs", "outputs", "extra", "events", "feedback_stats")
_TIME_COLUMNS = ("start_time", "end_time", "first_token_time")
TENANT_ID = "9b2f6d1e-7c3a-4e5b-8f0a-1d2c3b4a5e6f"


def write_parquet(runs: list[dict], path: Path) -> None:
    """The runs in the bulk export's layout."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    def cell(run: dict, column: str):
        value = run.get(column)
        if column == "tenant_id":
            return TENANT_ID
        if column == "trace_tier":
            return "shortlived"
        if column in _JSON_COLUMNS:
            return None if value is None else json.dumps(value)
        if column in _TIME_COLUMNS:
            return None if value is None else datetime.fromisoformat(value)
        if column in ("total_cost", "prompt_cost", "completion_cost"):
            return None if value is None else float(value)
        return value

    types = {c: pa.string() for c in EXPORT_COLUMNS}
    types.update({c: pa.timestamp("us", tz="UTC") for c in _TIME_COLUMNS})
    types.update({c: pa.int64() for c in ("total_tokens", "prompt_tokens", "completion_tokens")})
    types.update({c: pa.float64() for c in ("total_cost", "prompt_cost", "completion_cost")})
    types.update(parent_run_ids=pa.list_(pa.string()), tags=pa.list_(pa.string()))
    types["is_root"] = pa.bool_()
    schema = pa.schema([(c, types[c]) for c in EXPORT_COLUMNS])
    table = pa.table({c: [cell(r, c) for r in runs] for c in EXPORT_COLUMNS}, schema=schema)
    pq.write_table(table, path, compression="zstd")


def main() -> None:
    sys.path.insert(0, str(TESTS))
    from langsmith_server import LangSmithServer

    with LangSmithServer("multipart") as server:
        run_agent(server.url, HERE / "expected.jsonl")
        multipart = [p for p in server.posted if p.path.endswith("/runs/multipart")]
        runs = list_runs(server.url)
    with LangSmithServer("batch") as server, tempfile.TemporaryDirectory() as tmp:
        run_agent(server.url, Path(tmp) / "returned.jsonl")
        batch = [p for p in server.posted if p.path.endswith("/runs/batch")]
    files = {
        "posted.multipart": b"".join(p.body for p in multipart),
        "posted-batch.jsonl": b"".join(p.body + b"\n" for p in batch),
        "runs.jsonl": "".join(json.dumps(run) + "\n" for run in runs).encode(),
    }
    for name, data in files.items():
        assert FAKE_KEY.encode() not in data, f"{name} holds the API key"
        (HERE / name).write_bytes(data)
    write_parquet(runs, HERE / "runs.parquet")
    (HERE / "dataset.json").write_text(json.dumps(dataset(), indent=1) + "\n")
    print(f"{len(runs)} runs; {len(batch)} batch bodies; wrote {', '.join(files)}, runs.parquet")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--agent"]:
        _agent(Path(sys.argv[3]))
    else:
        main()
