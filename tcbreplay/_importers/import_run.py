"""Turn traces recorded elsewhere into a run that scoring treats like a recorded one.

Each line of the traces file is ``{"sample_id": ..., "messages": [...]}`` with
messages as ``langchain_core.messages.messages_to_dict`` writes them. Calls to
tools that do not exist, or with arguments a tool does not take, are agent
behaviour to be scored; only traces that cannot be read are refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcbreplay._inputs import limits
from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.dataset import lone_surrogate
from tcbreplay._record.secrets import redact
from tcbreplay._store.runs import Store
from tcbreplay._store.schema import new_manifest, sample_record, utcnow
from tcbreplay.errors import InputError, TcbReplayError, TraceError


@dataclass
class ImportSummary:
    """What an import stored."""

    run_id: str
    run_dir: str
    samples: int
    imported: int
    missing: int


def import_traces(
    inputs: BenchmarkInputs,
    traces: str | Path,
    store: Store,
    run_id: str,
    *,
    model: str | None = None,
    fmt: str = "jsonl",
) -> ImportSummary:
    """Validate every trace, then store the run; nothing is written if a trace is bad.

    ``fmt`` is ``jsonl`` (one sample's messages per line) or ``abet-evaluation`` (a
    dashboard file of the original benchmark: samples it left out are taken to have
    output equal to their target, as the original saved only mismatches).
    """
    if model is not None and lone_surrogate(model):
        raise InputError(f"--model {model!r}: not valid UTF-8 text")
    if lone_surrogate(str(traces)):  # the manifest keeps its name, as UTF-8 text
        raise InputError(
            f"--traces {str(traces)!r}: the name is not valid UTF-8", hint="rename the file"
        )
    path = Path(traces)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read traces: {exc.strerror or exc}") from exc
    if fmt == "jsonl":
        lines = _parse_lines(data, path.name, inputs.dataset.by_id)
    elif fmt == "abet-evaluation":
        lines = _abet_lines(path, inputs)
    else:
        raise TraceError(f"--format {fmt!r}: choose jsonl or abet-evaluation")
    records = []
    now = utcnow().isoformat()
    for sample in inputs.dataset.samples:
        line = lines.get(sample.sample_id)
        records.append(
            sample_record(
                run_id,
                sample,
                status="missing" if line is None else line["status"],
                messages=[] if line is None else line["messages"],
                attempts=0 if line is None else 1,
                started_at=now,
                finished_at=now,
                error_type=None if line is None else line.get("error_type"),
                error="no trace in the imported file" if line is None else line.get("error"),
            )
        )
    manifest = new_manifest(
        run_id,
        now,
        inputs.manifest_fields(),
        {
            "id": model or "unknown",
            "provider": "import",
            "name": model or "unknown",
            "settings": {},
            "simulated": False,
        },
        source="import",
        traces={"source": str(path), "format": fmt, "sha256": hashlib.sha256(data).hexdigest()},
    )
    if store.exists(run_id):
        _drop_unfinished_import(store, run_id)
    # a failure in there removes the folder it made
    writer = store.create_run(manifest, inputs.dataset.entries())
    try:
        for record in records:
            writer.append(record)
        writer.fold()
        imported = sum(1 for r in records if r["status"] != "missing")
        writer.update_manifest(
            status="imported",
            finished_at=utcnow().isoformat(),
            totals={
                "samples": len(records),
                "recorded": len(records),
                "ok": sum(1 for r in records if r["status"] == "ok"),
                "errors": sum(1 for r in records if r["status"] != "ok"),
                "missing": len(records) - imported,
            },
        )
    except BaseException:
        # an import is all or nothing: a half-made run would block the same --run-id
        writer.discard()
        raise
    writer.close()
    return ImportSummary(
        run_id=run_id,
        run_dir=str(writer.dir),
        samples=len(records),
        imported=imported,
        missing=len(records) - imported,
    )


def _drop_unfinished_import(store: Store, run_id: str) -> None:
    """Remove a run an import began but never finished (its process was killed), which would
    block the run id; refused while that import still runs."""
    try:
        manifest = store.open_run(run_id).manifest
    except TcbReplayError:
        return  # not a run this can judge: creating the run says what is wrong
    if manifest.get("source") == "import" and manifest.get("status") == "recording":
        store.delete_run(run_id)


def _parse_lines(data: bytes, label: str, by_id: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from langchain_core.messages import message_to_dict, messages_from_dict

    from tcbreplay._record.runner import serialize_messages

    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{label}: not UTF-8 text") from exc
    out: dict[str, dict[str, Any]] = {}
    # JSON Lines end at "\n" only: str.splitlines would also split inside strings holding
    # U+2028, U+2029 or U+0085 (a "\r" before the "\n" is JSON whitespace)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        place = f"{label}: line {lineno}"
        try:
            obj = limits.loads(line, first_line=lineno)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{place}: not valid JSON: {exc.msg}") from exc
        except limits.LimitError as exc:
            raise TraceError(f"{label}: {exc}", hint=limits.HINT) from None
        if not isinstance(obj, dict):
            raise TraceError(f"{place}: expected an object with sample_id and messages")
        surrogate = lone_surrogate(obj, line)
        if surrogate:
            raise TraceError(
                f"{place}: holds a lone surrogate {surrogate}, which is not valid Unicode"
            )
        if "sample_id" not in obj:
            raise TraceError(f"{place}: missing sample_id")
        sid = obj["sample_id"]
        if isinstance(sid, bool) or not isinstance(sid, (str, int)):
            raise TraceError(f"{place}: sample_id must be a string or an integer")
        sid = str(sid)
        if sid not in by_id:
            raise TraceError(f"{place}: sample_id {obj['sample_id']!r} is not in the dataset")
        if sid in out:
            raise TraceError(f"{place}: sample_id {obj['sample_id']!r} appears twice")
        raw = obj.get("messages")
        if not isinstance(raw, list):
            raise TraceError(f"{place}: messages must be a list")
        messages = []
        for k, item in enumerate(raw):
            try:
                (message,) = messages_from_dict([item])
                message_to_dict(message)
            except Exception as exc:  # any shape LangChain cannot load is bad input
                detail = " ".join(str(exc).split())[:200]
                raise TraceError(
                    f"{place}: message {k}: not a LangChain message dict "
                    f"({type(exc).__name__}: {detail})",
                    hint="write messages with langchain_core.messages.messages_to_dict",
                ) from exc
            messages.append(message)
        status = obj.get("status", "ok")
        if status not in ("ok", "error"):
            raise TraceError(f"{place}: status must be 'ok' or 'error'")
        for key in ("error", "error_type"):
            if not isinstance(obj.get(key), (str, type(None))):
                raise TraceError(f"{place}: {key} must be a string")
        out[sid] = {
            "status": status,
            # traces recorded elsewhere may quote a key the provider was sent
            "error": None if obj.get("error") is None else redact(obj["error"]),
            "error_type": obj.get("error_type"),
            "messages": serialize_messages(messages, {}),
        }
    if not out:
        raise TraceError(f"{label}: no traces in the file")
    return out


def _abet_lines(path: Path, inputs: BenchmarkInputs) -> dict[str, dict[str, Any]]:
    """One synthesized trace per sample from a dashboard file: the input and one AI message
    holding the agent's calls in order (the file keeps no other messages)."""
    from langchain_core.messages import AIMessage, HumanMessage

    from tcbreplay._importers.abet import read_evaluation
    from tcbreplay._record.runner import serialize_messages

    calls = read_evaluation(path, inputs.dataset)
    out = {}
    for sample in inputs.dataset.samples:
        tool_calls = [
            {"name": name, "args": args, "id": f"{sample.sample_id}-{k}", "type": "tool_call"}
            for k, (name, args) in enumerate(calls[sample.sample_id])
        ]
        messages = [
            HumanMessage(content=sample.input),
            AIMessage(
                content="",
                tool_calls=tool_calls,
                response_metadata={"synthesized_from": "abet-evaluation"},
            ),
        ]
        out[sample.sample_id] = {"status": "ok", "messages": serialize_messages(messages, {})}
    return out
