"""The trace dialects tcbreplay imports, in one table: ``import`` reads a file through its row,
sniffing asks every row's module, and the command line's ``--format`` choices and
``import --help`` list the rows.

Adding a dialect is a module with a ``sniff`` and a ``read`` (see
:mod:`tcbreplay._importers.dialect`), its row here, and its test file,
``tests/importers/test_dialect_<module>.py``. The order of the rows is the order ``--help`` lists
them in, and breaks ties between dialects equally sure of a file.
"""

from __future__ import annotations

from tcbreplay._importers.dialect import Dialect
from tcbreplay.errors import TraceError

_HERE = "tcbreplay._importers"
BFCL_HINT = "give --format bfcl, with BFCL's questions as --dataset and --answers"

DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect(
            "langchain",
            f"{_HERE}.langchain",
            "JSON Lines, a sample per line, its messages as LangChain's messages_to_dict "
            "writes them",
            aliases=("jsonl",),  # the name of earlier versions
        ),
        Dialect(
            "openai",
            f"{_HERE}.openai",
            "JSON Lines, a sample per line, its messages in OpenAI's Chat Completions form",
        ),
        Dialect(
            "anthropic",
            f"{_HERE}.anthropic",
            "JSON Lines, a sample per line, its messages as Anthropic's Messages API turns",
        ),
        Dialect(
            "tau-bench",
            f"{_HERE}.tau_bench",
            "a τ-bench results file (a JSON list of trajectories); it holds the samples",
            holds_samples=True,
        ),
        Dialect(
            "tau2",
            f"{_HERE}.tau2",
            "a τ²-bench results file (info, tasks, simulations); it holds the samples, and its "
            "domain's tools ship with tcbreplay (airline, retail, telecom)",
            holds_samples=True,
            options=("gold_from",),
        ),
        Dialect(
            "inspect",
            f"{_HERE}.inspect",
            "an inspect_ai eval log (.eval or .json); its samples may hold their gold calls",
            holds_samples=True,
        ),
        Dialect(
            "langsmith",
            f"{_HERE}.langsmith",
            "LangSmith runs: Client.list_runs() as JSON or JSON Lines, the SDK's posted "
            "payloads (/runs/batch, /runs/multipart) or a bulk export's Parquet file; a sample "
            "per trace (with --dataset: the sample it matches)",
            holds_samples=True,
        ),
        Dialect(
            "langfuse",
            f"{_HERE}.langfuse",
            "Langfuse observations: its blob storage exports (JSON Lines, JSON, Parquet) or the "
            "UI's batch export; a sample per trace (with --dataset: the sample it matches)",
            holds_samples=True,
        ),
        Dialect(
            "abet-evaluation",
            f"{_HERE}.abet",
            "a dashboard file of the original Tool Call Benchmark",
        ),
        Dialect(
            "otlp",
            f"{_HERE}.otlp",
            "OpenTelemetry traces: an OTLP/JSON export request, JSON Lines of them or OTLP "
            "protobuf, with GenAI, OpenInference or Vercel AI SDK spans; it holds the samples",
            holds_samples=True,
            options=("sample_by",),
        ),
        Dialect(
            "jaeger",
            f"{_HERE}.jaeger",
            "a Jaeger trace export (JSON, {data: [traces]}) of such spans; it holds the samples",
            holds_samples=True,
            options=("sample_by",),
        ),
        Dialect(
            "bfcl",
            f"{_HERE}.bfcl",
            "a BFCL results file, with BFCL's questions as --dataset and --answers (never "
            "told from the file)",
            given_only=BFCL_HINT,
        ),
    )
}


def dialects() -> list[Dialect]:
    """Every registered dialect, in the table's order."""
    return list(DIALECTS.values())


def names() -> tuple[str, ...]:
    """The registered dialects' names."""
    return tuple(DIALECTS)


def choices() -> tuple[str, ...]:
    """What ``--format`` takes: every dialect's name, then their earlier names."""
    return (*DIALECTS, *(alias for d in DIALECTS.values() for alias in d.aliases))


def get(name: str) -> Dialect:
    """The dialect named ``name`` (or an earlier name of it)."""
    if name in DIALECTS:
        return DIALECTS[name]
    for dialect in DIALECTS.values():
        if name in dialect.aliases:
            return dialect
    raise TraceError(f"--format {name!r}: choose one of {', '.join(DIALECTS)}")


def taking(option: str) -> list[str]:
    """The dialects whose ``read`` takes ``option``."""
    return [d.name for d in DIALECTS.values() if option in d.options]


def holding_samples() -> list[str]:
    """The dialects whose files may hold their samples (``--dataset`` may be left out)."""
    return [d.name for d in DIALECTS.values() if d.holds_samples]
