"""inspect_ai eval logs (``.eval`` and ``.json``), read with inspect_ai's own log API
(``inspect_ai.log.read_eval_log``; the optional extra ``tcbreplay[inspect]``).

An ``.eval`` log (a zip file) is first unpacked a chunk at a time within the archive limits
of :mod:`tcbreplay._importers.archives`, as inspect_ai reads it whole. Each sample of each epoch
(1 to :data:`~tcbreplay._importers.lines.MAX_TRIALS`) is a trace: sample ``id``, trial
``epoch - 1``, its ``messages`` as
LangChain messages (an assistant's ``tool_calls``, a tool message's ``tool_call_id``; a call
inspect could not parse is the agent's and scores as an invalid argument), its ``metadata``,
``target`` and scores as the trial's metadata, an ``error`` as status error. Gold calls come
from ``--dataset`` (by sample id and input, see :func:`_dataset_id`) or, without one, from
each sample's metadata when it holds them as a dataset entry does (``target`` as a list of
``{"name", "args"}``, or ``tool_call_names`` and ``tool_call_args``). The tools, when
``--tools`` is left out, are those the log's model calls were offered. What inspect_ai read
but the store cannot hold (a value beyond the JSON limits, a lone surrogate) is refused naming
the sample.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._importers import archives
from tcbreplay._importers.dialect import Sniff, SourceTraces, TraceFile, TraceLine
from tcbreplay._importers.lines import MAX_TRIALS
from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._inputs.dataset import Dataset, dataset_from_entries
from tcbreplay._store.schema import INVALID_ARGUMENTS
from tcbreplay.errors import DatasetError, InputError, TraceError

# metadata keys that hold a sample's gold calls, as a dataset entry holds them
_GOLD_KEYS = ("target", "tool_call_names", "tool_call_args")


def sniff(file: TraceFile) -> Sniff:
    """A zip file (or a ``.eval`` name), or a JSON object with inspect_ai's ``eval`` and
    ``version``."""
    if file.head[:4] == b"PK\x03\x04" or file.suffix == ".eval":
        return Sniff(1.0, "an inspect_ai .eval log (a zip file)")
    top = file.top
    if isinstance(top, dict) and "messages" not in top and {"eval", "version"} <= top.keys():
        return Sniff(0.9, "an inspect_ai .json log (eval, samples)")
    return Sniff.no("neither a zip file (.eval) nor a JSON object with eval and version")


def read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces:
    """The log's traces (inspect_ai reads logs from files: given only bytes, they are
    written to a temporary one first)."""
    if file.path is not None:
        return read_log(file.path, file.data, inputs)
    name = Path(file.name).name  # the file's own name, in the temporary folder
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / (name if name not in ("", ".", "..") else f"log{file.suffix}")
        path.write_bytes(file.data)
        return read_log(path, file.data, inputs)


def read_log(path: Path, data: bytes, inputs: BenchmarkInputs | None) -> SourceTraces:
    """The traces of an inspect_ai log (``data``: the file's bytes), with the samples as a
    dataset where their metadata holds gold calls, and the tools its model was offered."""
    from tcbreplay._record.messages import serialize_messages

    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError(
            "reading inspect_ai logs needs inspect_ai",
            hint="pip install 'tcbreplay[inspect]'",
        ) from None
    if path.suffix == ".eval":  # inspect_ai reads it as a zip file, each member whole
        problem = archives.zip_problem(data)
        if problem:
            raise TraceError(f"{path.name}: {problem}", hint=archives.ARCHIVE_HINT)
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # any log inspect_ai cannot read is bad input
        detail = " ".join(str(exc).split())[:200]
        raise TraceError(
            f"{path.name}: not an inspect_ai log inspect_ai can read ({type(exc).__name__}: "
            f"{detail})"
        ) from exc
    if not log.samples:
        raise TraceError(
            f"{path.name}: the log holds no samples",
            hint="write the log with its samples (not --no-log-samples)",
        )
    lines = []
    for sample in log.samples:
        place = f"{path.name}: sample {sample.id!r}, epoch {sample.epoch}"
        if not 1 <= sample.epoch <= MAX_TRIALS:
            raise TraceError(f"{place}: epoch must be an integer from 1 to {MAX_TRIALS}")
        metadata = {k: v for k, v in (sample.metadata or {}).items() if k not in _GOLD_KEYS}
        if sample.target:
            metadata["target"] = sample.target
        if sample.scores:
            metadata["scores"] = {name: score.value for name, score in sample.scores.items()}
        error = sample.error.message if sample.error is not None else None
        sample_id = str(sample.id)
        if inputs is not None:
            sample_id = _dataset_id(sample, inputs.dataset, place, inputs.dataset.source)
        line = TraceLine(
            sample_id=sample_id,
            messages=serialize_messages(_messages(sample.messages, sample.events), {}),
            trial=sample.epoch - 1,
            status="ok" if error is None else "error",
            error=error,
            error_type=None if error is None else "inspect_ai",
            metadata=metadata or None,
            place=place,
        )
        # the sample's metadata holds its gold calls, for the dataset
        stored = [line.sample_id, _input_text(sample.input), sample.metadata, line.metadata]
        _refuse_unstorable([*stored, line.messages, line.error], place)
        lines.append(line)
    dataset = None if inputs is not None else _dataset(log.samples, path.name)
    tools = _tools(log.samples)
    _refuse_unstorable(tools, f"{path.name}: the tools its model was offered")
    task = log.eval.task  # a registry name, such as inspect_evals/gaia: titled gaia
    benchmark = (task, task.rsplit("/", 1)[-1]) if task else None
    return SourceTraces(lines, dataset, tools, log.eval.model, benchmark)


def _refuse_unstorable(value: Any, place: str) -> None:
    """Refuse what inspect_ai's reader took but the store cannot hold: a value beyond the JSON
    limits, or a lone surrogate (which UTF-8 cannot encode)."""
    problem = _json.value_problem(value)
    if problem:
        raise TraceError(f"{place}: {problem}", hint=_json.HINT)
    surrogate = _json.lone_surrogate(value)
    if surrogate:
        raise TraceError(f"{place}: holds a lone surrogate {surrogate}, which is not valid Unicode")


def _usage_by_message(events: list[Any] | None) -> dict[str, dict[str, int]]:
    """Each model call's token counts (its event's output usage) by the id of the assistant
    message it answered with."""
    found: dict[str, dict[str, int]] = {}
    for event in events or []:
        output = (
            getattr(event, "output", None) if getattr(event, "event", None) == "model" else None
        )
        message = getattr(output, "message", None)
        usage = getattr(output, "usage", None)
        if message is None or usage is None or not getattr(message, "id", None):
            continue
        given, made = usage.input_tokens or 0, usage.output_tokens or 0
        found[message.id] = {"input_tokens": given, "output_tokens": made,
                             "total_tokens": given + made}  # fmt: skip
    return found


def _messages(messages: list[Any], events: list[Any] | None = None) -> list[Any]:
    """inspect_ai's chat messages as LangChain messages, an assistant's with the token counts
    of the model call that answered it (``events``: the sample's)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    usage = _usage_by_message(events)
    out: list[Any] = []
    for m in messages:
        if m.role == "system":
            out.append(SystemMessage(content=m.text))
        elif m.role == "user":
            out.append(HumanMessage(content=m.text))
        elif m.role == "assistant":
            calls = [
                {
                    "name": call.function,
                    "args": (
                        {INVALID_ARGUMENTS: call.parse_error}
                        if call.parse_error or not isinstance(call.arguments, dict)
                        else call.arguments
                    ),
                    "id": call.id,
                }
                for call in m.tool_calls or []
            ]
            answer = AIMessage(content=m.text, tool_calls=calls, id=m.id)
            if m.id in usage:
                answer.usage_metadata = usage[m.id]  # type: ignore[assignment]
            out.append(answer)
        elif m.role == "tool":
            out.append(
                ToolMessage(
                    content=m.text if m.error is None else m.error.message,
                    tool_call_id=m.tool_call_id or "",
                    name=m.function,
                    status="error" if m.error is not None else "success",
                )
            )
    return out


def _dataset(samples: list[Any], label: str) -> Dataset | None:
    """The samples as a dataset, where their metadata holds gold calls (else None)."""
    entries: dict[str, dict[str, Any]] = {}
    for sample in samples:
        meta = sample.metadata or {}
        if not any(key in meta for key in _GOLD_KEYS):
            return None
        entry = {"id": sample.id, "input": _input_text(sample.input)}
        entry.update({key: meta[key] for key in _GOLD_KEYS if key in meta})
        entries.setdefault(str(sample.id), entry)
    try:
        return dataset_from_entries(list(entries.values()), label)
    except DatasetError as exc:  # gold calls in the metadata in no shape a dataset has
        raise TraceError(str(exc)) from None


def _dataset_id(sample: Any, dataset: Dataset, place: str, source: str | None) -> str:
    """The id of the ``dataset`` sample a log's ``sample`` is: the one of its id whose input
    is its input, else the one sample whose input it is. Ids alone may pair other questions:
    a log of a dataset without ids numbers its samples from 1, a dataset file from 0."""
    text = _words(_input_text(sample.input))
    same_id = dataset.by_id.get(str(sample.id))
    if same_id is not None and _words(same_id.input) == text:
        return same_id.sample_id
    same_input = [s.sample_id for s in dataset.samples if _words(s.input) == text]
    if len(same_input) == 1:
        return same_input[0]
    named = Path(source).name if source else "the dataset"
    if len(same_input) > 1:
        raise TraceError(
            f"{place}: its input is the input of {len(same_input)} samples of {named} "
            f"({', '.join(map(repr, same_input[:3]))}), none of its id",
            hint="give the dataset's samples the ids the log's samples have",
        )
    if same_id is not None:
        raise TraceError(
            f"{place}: its input {_short(text)} is not the input of {named}'s sample "
            f"{same_id.sample_id!r} ({_short(_words(same_id.input))}), nor of any other",
            hint="a log of samples without ids numbers them from 1, a dataset without ids "
            "from 0: give both the same ids",
        )
    raise TraceError(
        f"{place}: no sample of {named} has its id or its input ({_short(text)})",
        hint="import it with the dataset the eval ran on",
    )


def _words(text: str) -> str:
    return " ".join(text.split())


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "\n".join(m.text for m in value if getattr(m, "role", None) == "user")


def _tools(samples: list[Any]) -> list[dict[str, Any]]:
    """The tools the log's model calls were offered, each once, in the order first seen."""
    seen: dict[str, dict[str, Any]] = {}
    for sample in samples:
        for event in sample.events or []:
            for tool in getattr(event, "tools", None) or []:
                if event.event == "model" and tool.name not in seen:
                    seen[tool.name] = {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters.model_dump(exclude_none=True),
                    }
    return list(seen.values())
