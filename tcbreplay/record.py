"""The record runner: build a LangGraph agent, run samples concurrently, hand messages to the store.

Recording knows nothing about metrics. Each finished sample (ok or error, with
whatever messages it produced) is appended to the run's journal at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from tcbreplay import __version__
from tcbreplay.benchmarks import BenchmarkInputs
from tcbreplay.dataset import Sample
from tcbreplay.errors import InputError
from tcbreplay.models import (
    SAMPLE_ID_KEY,
    ModelSpec,
    build_chat_model,
    check_credentials,
    effective_settings,
)
from tcbreplay.store import Run, RunWriter, Store, utcnow, validate_run_id

# Per-sample latencies, keyed by AI message id or tool call id; set in each sample's task.
_timings: contextvars.ContextVar[dict[str, float]] = contextvars.ContextVar("tcbreplay_timings")


@dataclass(frozen=True)
class RecordOptions:
    """Runner settings, recorded in the manifest."""

    workers: int = 4
    retries: int = 2
    timeout: float | None = 300.0
    backoff: float = 1.0
    recursion_limit: int = 50

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise InputError("--workers must be at least 1")
        if self.retries < 0:
            raise InputError("--retries must not be negative")
        if self.timeout is not None and self.timeout <= 0:
            raise InputError("--timeout must be positive")

    def to_dict(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "retries": self.retries,
            "timeout": self.timeout,
            "backoff": self.backoff,
            "recursion_limit": self.recursion_limit,
        }


@dataclass
class RecordSummary:
    """What a recording did, for the CLI to render."""

    run_id: str
    run_dir: str
    status: str
    total: int
    recorded: int
    ok: int
    errors: int
    retries: int
    duration_s: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    simulated: bool = False
    error_types: dict[str, int] = field(default_factory=dict)
    attempted: int = 0


ProgressFn = Callable[[dict[str, Any]], None]


def fingerprint(inputs: BenchmarkInputs, spec: ModelSpec) -> str:
    """sha256 of everything that decides what a recording should contain."""
    fields = inputs.manifest_fields()
    basis = {
        "dataset": fields["dataset"]["entries"],
        "tools": fields["tools"]["specs"],
        "system_prompt": fields["system_prompt"]["text"],
        "model": spec.id,
        "settings": spec.settings,
    }
    text = json.dumps(basis, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def default_run_id(inputs: BenchmarkInputs, spec: ModelSpec) -> str:
    """``<benchmark>-<model>-<fingerprint>``: the same command names the same run."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name if not spec.simulated else "sim")
    return f"{inputs.name}-{model}-{fingerprint(inputs, spec)[:10]}"


def record_run(
    inputs: BenchmarkInputs,
    spec: ModelSpec,
    store: Store,
    *,
    run_id: str | None = None,
    options: RecordOptions | None = None,
    progress: ProgressFn | None = None,
    retry_errors: bool = False,
    overwrite: bool = False,
) -> RecordSummary:
    """Record the samples of ``inputs`` that the run does not hold yet; return its summary.

    A new run id starts a run. An existing run with the same inputs is resumed:
    only samples not yet stored are recorded (with ``retry_errors``, also those
    stored with status error). ``overwrite`` deletes the existing run first.
    """
    options = options or RecordOptions()
    if inputs.toolset.tools is None:
        raise InputError(
            f"{inputs.toolset.source}: JSON tool schemas have no code to run",
            hint="record needs tools from a Python module:attr; JSON schemas suit import",
        )
    check_credentials(spec)
    gold = {s.sample_id: [(c.name, c.args) for c in s.target] for s in inputs.dataset.samples}
    chat_model = build_chat_model(spec, gold)
    run_id = validate_run_id(run_id or default_run_id(inputs, spec))
    print_ = fingerprint(inputs, spec)
    if overwrite and store.exists(run_id):
        store.delete_run(run_id)
    if store.exists(run_id):
        writer = store.resume_run(run_id)
        try:
            recorded = _check_resumable(writer, print_, store.open_run(run_id))
        except BaseException:
            writer.close()
            raise
        redo = {"error", "missing"} if retry_errors else set()
        samples = [
            s
            for s in inputs.dataset.samples
            if s.sample_id not in recorded or recorded[s.sample_id] in redo
        ]
        writer.update_manifest(status="recording")
    else:
        manifest = {
            "run_id": run_id,
            "created_at": utcnow().isoformat(),
            "fingerprint": print_,
            "toolkit": {"name": "tcbreplay", "version": __version__},
            "libraries": _library_versions(),
            **inputs.manifest_fields(),
            "model": {
                **spec.to_dict(),
                "effective_settings": effective_settings(spec, chat_model),
            },
            "runner": options.to_dict(),
        }
        writer = store.create_run(manifest)
        samples = inputs.dataset.samples
    if hasattr(progress, "start"):
        progress.start(len(samples), len(inputs.dataset) - len(samples))  # type: ignore[union-attr]
    agent = build_agent(chat_model, inputs)
    return _record(agent, samples, writer, options, progress, spec.simulated, len(inputs.dataset))


def _check_resumable(writer: RunWriter, expected: str, run: Run) -> dict[str, str]:
    manifest = writer.manifest
    if manifest.get("source") == "import":
        raise InputError(f"run {run.run_id!r} was imported, not recorded: it cannot be resumed")
    if manifest.get("fingerprint") != expected:
        raise InputError(
            f"run {run.run_id!r} exists with other inputs (dataset, tools, prompt or model)",
            hint="use another --run-id, or --overwrite to replace it",
        )
    return run.recorded_ids()


def build_agent(chat_model: Any, inputs: BenchmarkInputs) -> Any:
    """A LangGraph agent from LangChain's ``create_agent`` with the timing middleware."""
    from langchain.agents import create_agent

    return create_agent(
        chat_model,
        tools=inputs.toolset.tools,
        system_prompt=inputs.system_prompt or None,
        middleware=[_timing_middleware()],
    )


class RecordInterrupted(Exception):
    """Ctrl-C stopped a recording; everything finished so far was kept."""

    def __init__(self, summary: RecordSummary) -> None:
        super().__init__(f"recording of {summary.run_id} interrupted")
        self.summary = summary


def _record(
    agent: Any,
    samples: list[Sample],
    writer: RunWriter,
    options: RecordOptions,
    progress: ProgressFn | None,
    simulated: bool,
    total: int,
) -> RecordSummary:
    started = time.perf_counter()
    try:
        if samples:
            asyncio.run(_run_all(agent, samples, writer, options, progress))
    except KeyboardInterrupt:
        summary = _finish(writer, "interrupted", time.perf_counter() - started, total)
        summary.simulated = simulated
        raise RecordInterrupted(summary) from None
    except BaseException:
        _finish(writer, "failed", time.perf_counter() - started, total)
        raise
    summary = _finish(writer, "complete", time.perf_counter() - started, total)
    summary.simulated = simulated
    summary.attempted = len(samples)
    return summary


def _finish(writer: RunWriter, status: str, duration: float, total: int) -> RecordSummary:
    """Fold the journal, write totals and status into the manifest, release the run."""
    import pyarrow.parquet as pq

    try:
        writer.fold()
        rows = pq.read_table(writer.dir / "samples.parquet").to_pylist()
        ok = sum(1 for r in rows if r["status"] == "ok")
        error_types: dict[str, int] = {}
        for r in rows:
            if r["status"] != "ok":
                key = r["error_type"] or r["status"]
                error_types[key] = error_types.get(key, 0) + 1
        tokens_in = [r["input_tokens"] for r in rows if r["input_tokens"] is not None]
        tokens_out = [r["output_tokens"] for r in rows if r["output_tokens"] is not None]
        totals = {
            "samples": total,
            "recorded": len(rows),
            "ok": ok,
            "errors": len(rows) - ok,
            "retries": sum(max(0, (r["attempts"] or 1) - 1) for r in rows),
            "input_tokens": sum(tokens_in) if tokens_in else None,
            "output_tokens": sum(tokens_out) if tokens_out else None,
            "duration_s": round(duration, 3),
        }
        if status == "complete" and len(rows) < total:
            status = "incomplete"
        writer.update_manifest(status=status, finished_at=utcnow().isoformat(), totals=totals)
    finally:
        writer.close()
    return RecordSummary(
        run_id=writer.run_id,
        run_dir=str(writer.dir),
        status=status,
        total=total,
        recorded=totals["recorded"],
        ok=ok,
        errors=totals["errors"],
        retries=totals["retries"],
        duration_s=duration,
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        error_types=error_types,
    )


async def _run_all(
    agent: Any,
    samples: list[Sample],
    writer: RunWriter,
    options: RecordOptions,
    progress: ProgressFn | None,
) -> None:
    queue: asyncio.Queue[Sample] = asyncio.Queue()
    for sample in samples:
        queue.put_nowait(sample)

    async def worker() -> None:
        while True:
            try:
                sample = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            record = await run_sample(agent, sample, writer.run_id, options)
            writer.append(record)
            if progress is not None:
                progress(record)

    await asyncio.gather(*(worker() for _ in range(min(options.workers, len(samples)))))


async def run_sample(agent: Any, sample: Sample, run_id: str, options: RecordOptions) -> dict:
    """Run one sample with retries; return its journal record (never raises for agent errors)."""
    started_at = utcnow()
    t0 = time.perf_counter()
    messages: list[Any] = []
    error: BaseException | None = None
    attempt = 0
    for attempt in range(1, options.retries + 2):
        timings: dict[str, float] = {}
        _timings.set(timings)
        messages = []
        try:
            async with asyncio.timeout(options.timeout):
                async for state in agent.astream(
                    {"messages": [{"role": "user", "content": sample.input}]},
                    config={
                        "metadata": {SAMPLE_ID_KEY: sample.sample_id},
                        "recursion_limit": options.recursion_limit,
                    },
                    stream_mode="values",
                ):
                    messages = state["messages"]
            error = None
            break
        except Exception as exc:  # agent behaviour and provider failures are data
            error = exc if not isinstance(exc, TimeoutError) else _timeout_error(options.timeout)
            if attempt > options.retries or not is_transient(exc):
                break
            await asyncio.sleep(_backoff(options.backoff, attempt))
    return {
        "run_id": run_id,
        "sample_id": sample.sample_id,
        "sample_index": sample.index,
        "input": sample.input,
        "gold": [c.to_dict() for c in sample.target],
        "category": sample.category,
        "status": "ok" if error is None else "error",
        "attempts": attempt,
        "error_type": None if error is None else type(error).__name__,
        "error": None if error is None else _one_line(error),
        "started_at": started_at.isoformat(),
        "finished_at": utcnow().isoformat(),
        "duration_s": time.perf_counter() - t0,
        "messages": serialize_messages(messages, timings),
    }


class SampleTimeout(TimeoutError):
    """A sample ran past ``--timeout``."""


def _timeout_error(timeout: float | None) -> SampleTimeout:
    return SampleTimeout(f"sample did not finish within {timeout:g} s")


def serialize_messages(messages: list[Any], timings: dict[str, float]) -> list[dict[str, Any]]:
    """Messages as LangChain serializes them, with usage and latency beside each."""
    from langchain_core.messages import message_to_dict

    out = []
    for m in messages:
        usage = getattr(m, "usage_metadata", None) or {}
        key = m.id if m.type == "ai" else getattr(m, "tool_call_id", None)
        out.append(
            {
                "type": m.type,
                "message": json.dumps(message_to_dict(m), ensure_ascii=False, default=str),
                "input_tokens": usage.get("input_tokens"),
                "output_tokens": usage.get("output_tokens"),
                "total_tokens": usage.get("total_tokens"),
                "latency_s": timings.get(key) if key else None,
            }
        )
    return out


_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, dropped connections."""
    if getattr(exc, "transient", False) or isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    for attr in ("code", "status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and value in _TRANSIENT_STATUS:
            return True
    name = type(exc).__name__
    if name in {"ConnectError", "ReadTimeout", "RemoteProtocolError", "ReadError", "ServerError"}:
        return True
    cause = exc.__cause__ or exc.__context__
    return cause is not None and cause is not exc and is_transient(cause)


def _backoff(base: float, attempt: int) -> float:
    return base * (2 ** (attempt - 1)) * (0.5 + random.random())


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:2000]


def _timing_middleware() -> Any:
    from langchain.agents.middleware import AgentMiddleware

    class Timing(AgentMiddleware):
        """Measure each model call and tool call of a sample."""

        async def awrap_model_call(self, request, handler):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            response = await handler(request)
            elapsed = time.perf_counter() - t0
            timings = _timings.get(None)
            if timings is not None:
                for message in getattr(response, "result", []) or []:
                    if getattr(message, "id", None):
                        timings[message.id] = elapsed
            return response

        async def awrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            result = await handler(request)
            timings = _timings.get(None)
            call_id = request.tool_call.get("id")
            if timings is not None and call_id:
                timings[call_id] = time.perf_counter() - t0
            return result

    return Timing()


def _library_versions() -> dict[str, str]:
    out = {}
    for name in ("langchain", "langchain-core", "langgraph", "langchain-google-genai"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
