"""The store's schema: its file names, Arrow schemas and the columns older files lack.

Every writer of a run (recording, importing) builds its rows of these
(:mod:`tcbreplay._store.records`) and its manifest by :mod:`tcbreplay._store.manifest`,
where every reader checks it.

Layout of ``<store>/<run_id>/`` (``schema_version`` 5, documented in docs/store.md):

- ``manifest.json``: everything needed to score the run without its inputs.
- ``dataset.jsonl``: the run's dataset, normalised, one entry per line (for resuming).
- ``samples.parquet``: one row per sample and trial (``SAMPLES_SCHEMA``), keyed by
  ``(sample_id, trial)``; ``sample_index`` numbers the rows (:func:`row_index`).
- ``messages.parquet``: one row per message, the raw LangChain serialization (``MESSAGES_SCHEMA``),
  in row groups of one message type each (:class:`tcbreplay._store.parquet.MessagesWriter`).
- ``divergences.parquet``: a replay's divergences, one row per sample and trial whose replay
  diverged (``DIVERGENCES_SCHEMA``, :mod:`tcbreplay._replay.divergence`); only replays have
  it, and a run without it has none.
- ``journal.jsonl``: while recording, one line per finished sample; folded into the
  Parquet files when the run finishes, so a crash loses only samples in flight
  (:mod:`tcbreplay._store.journal`).
  On object storage: numbered batches of lines instead, ``journal/<n>.jsonl``.
- ``writer.lock``: held (``flock``) by the one process writing the run; on object storage an
  object that process creates and renews (:class:`tcbreplay._store.locks.LeaseLock`).
- ``scores/<scoring>/``: per-sample scores and a summary, one folder per scoring options.
- ``evaluations/``: the dashboard file.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

# 2: a trial column in samples, messages and scores (rows keyed by sample_id and trial), and
# the samples' metadata. 3: the samples' own tools, and gold calls with rules (accept,
# optional, group). 4: replays, with their divergences (divergences.parquet) and the status
# diverged. Older files read as trial 0, without metadata or tools of their own
# (OPTIONAL_COLUMNS), and older runs have no divergences. 5: each message's calls beside it
# (the ``calls`` column: scoring reads them without parsing every message); an older file's
# messages have theirs read from the message when a view reads it (OPTIONAL_COLUMNS).
SCHEMA_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)


MANIFEST = "manifest.json"


DATASET = "dataset.jsonl"


SAMPLES = "samples.parquet"


MESSAGES = "messages.parquet"


JOURNAL = "journal.jsonl"
# on object storage (no appends): the journal's batches, journal/<n>.jsonl
JOURNAL_CHUNKS = "journal"


LOCK = "writer.lock"


# One shard's journal and lock (``record --shard I/N``, ``record --engine ray``): each shard
# appends to its own journal, and the last one to finish folds them all (see
# :class:`tcbreplay._store.writer.ShardWriter`).
def shard_journal(shard: tuple[int, int]) -> str:
    return f"journal-{shard[0]}-of-{shard[1]}.jsonl"


def shard_lock(shard: tuple[int, int]) -> str:
    return f"shard-{shard[0]}-of-{shard[1]}.lock"


SHARD_JOURNALS = "journal-*-of-*.jsonl"
SHARD_LOCKS = "shard-*-of-*.lock"


DIVERGENCES = "divergences.parquet"


DATA_FILES = (SAMPLES, MESSAGES)


SCORES = "scores"
DEFAULT_SCORING = "spec"  # the folder under scores/ of a scoring with the default options
# the default scorer's name (``--scorer spec``, the scorer a summary without one names): it
# computes the metric spec's metrics (tcbreplay._score.scorers.default)
DEFAULT_SCORER = "spec"


# the folder of the dashboard file (named as the original benchmark named it)
DASHBOARD_DIR = "evaluations"


# Row groups of 128Ki rows: DuckDB scans a file one row group per thread, so a run's
# million rows in one group would be read by one core.
ROW_GROUP_ROWS = 128 * 1024


PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 6}


# how a sample ended: recorded fine, failed after its retries, absent from imported traces, or
# replayed until a request its recording does not answer
STATUSES = ("ok", "error", "missing", "diverged")
_TS = pa.timestamp("us", tz="UTC")


SAMPLES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("sample_id", pa.string()),
        ("trial", pa.int32()),  # 0, 1, ... : the sample's runs (record --trials, imports)
        ("sample_index", pa.int32()),  # the row's number: row_index(entry, trial, entries)
        ("input", pa.string()),
        ("gold", pa.string()),  # JSON: [{"name", "args", rules?}, ...]
        ("tools", pa.string()),  # JSON: the sample's own tool schemas, or null: the run's
        ("category", pa.string()),
        ("metadata", pa.string()),  # JSON object, or null: the entry's and the trial's
        ("status", pa.string()),  # ok | error | missing
        ("attempts", pa.int32()),
        ("error_type", pa.string()),
        ("error", pa.string()),
        ("started_at", _TS),
        ("finished_at", _TS),
        ("duration_s", pa.float64()),
        ("n_messages", pa.int32()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
    ]
)


MESSAGES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("sample_id", pa.string()),
        ("trial", pa.int32()),
        ("sample_index", pa.int32()),  # the sample's, so scoring needs no join on ids
        ("position", pa.int32()),
        ("type", pa.string()),  # human | ai | tool | system | ...
        ("message", pa.string()),  # JSON, as langchain_core.messages.message_to_dict writes it
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("total_tokens", pa.int64()),
        ("latency_s", pa.float64()),
        # the tool calls an AI (or human) message carries: its data.tool_calls as DuckDB writes
        # JSON (MESSAGE_CALLS), null for other messages and for one that carries none; derived
        # from ``message`` when the file is written (tcbreplay._store.parquet.MessagesWriter)
        ("calls", pa.string()),
    ]
)

# ``calls`` from a message (the store's messages table, or a file of an older version)
MESSAGE_CALLS = (
    "case when type in ('ai', 'human') then json_extract(message, '$.data.tool_calls')::varchar end"
)


# a replay's divergences (:mod:`tcbreplay._replay.divergence`): recorded and replayed are JSON
# text, null where that side has nothing at the path
DIVERGENCES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("sample_id", pa.string()),
        ("trial", pa.int32()),
        ("sample_index", pa.int32()),
        ("turn", pa.int32()),  # the request's: the assistant messages it holds
        ("component", pa.string()),  # system | messages | tools | params | tool_output
        ("path", pa.string()),  # messages[3].content, tools.add_numbers.parameters.b
        ("recorded", pa.string()),
        ("replayed", pa.string()),
    ]
)


# The one argument of a tool call whose arguments were not a JSON object (an importer's text
# from a model, kept as it was): no tool has such a parameter, so it scores as invalid.
INVALID_ARGUMENTS = "[tcbreplay: arguments not a JSON object]"


# Columns that files of older versions lack, and the SQL value they read as there: version 1
# files lack trial and metadata, versions 1 and 2 the samples' own tools.
OPTIONAL_COLUMNS = {
    "trial": "0::integer",
    "metadata": "null::varchar",
    "tools": "null::varchar",
    "calls": MESSAGE_CALLS,
}
# what a writer derives when it writes the file, rather than filling in (with_optional_columns)
DERIVED_COLUMNS = ("calls",)
# messages as they are given to the writer, which derives the rest
WRITTEN_MESSAGES_SCHEMA = pa.schema([f for f in MESSAGES_SCHEMA if f.name not in DERIVED_COLUMNS])


def with_optional_columns(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """An Arrow table of an older file with the columns it lacks, as the views read them
    (trial 0, no metadata, no tools of its own), in the store's column order."""
    for name in OPTIONAL_COLUMNS:
        if name in DERIVED_COLUMNS:
            continue
        if name in schema.names and name not in table.column_names:
            value = 0 if name == "trial" else None
            table = table.append_column(
                schema.field(name), pa.array([value] * table.num_rows, schema.field(name).type)
            )
    return table.select([name for name in schema.names if name in table.column_names])


def counted_as(trials: object) -> str:
    """What a count of a run's rows counts, as its tables say: samples, or with several
    trials (each a row of its sample) trials."""
    return "trials" if isinstance(trials, int) and trials > 1 else "samples"


def row_index(index: int, trial: int, entries: int) -> int:
    """The ``sample_index`` of trial ``trial`` of dataset entry ``index`` (of ``entries``):
    the entry's position for trial 0, as before trials, and after all of trial t - 1's rows
    for trial t, so adding trials to a run numbers its rows the same."""
    value = index + trial * entries
    if trial < 0 or value >= 2**31:
        raise ValueError(f"trial {trial} of entry {index}: no row index (0 <= index < 2**31)")
    return value


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# a trial's metadata key for what its stored messages lack of its requests: the contents of
# the system messages each answered model call's request began with (a list per call), kept
# by an agent of one's own (``--agent``) where they are not the run's prompt; a run whose
# manifest's ``agent`` says ``system_kept`` keeps them, and replay compares its requests'
# with these (an older run's requests are taken to have begun with its prompt)
SENT_SYSTEM_KEY = "tcbreplay_system"
SYSTEM_KEPT = "system_kept"
# a trial's metadata key for the answer format each answered model call of an agent of one's
# own asked for (a list per call: its ``response_format``, null where none; see
# tcbreplay._record.formats), kept where any call asked one; a run whose manifest's ``agent``
# says ``format_kept`` keeps them, and replay and serve compare its requests' with these (an
# older run's are not known: serve refuses a request asking for a schema)
ASKED_FORMAT_KEY = "tcbreplay_format"
FORMAT_KEPT = "format_kept"
# a trial's metadata key for the tools each answered model call of an agent of one's own was
# sent, where any call was sent other tools than the sample's (a list per call: null where it
# was sent the sample's, else its tools, each by name where the sample has a tool of that
# name, else as its schema; see tcbreplay._record.call_tools); replay and serve compare each
# request's tools with its call's (without the key, every call was sent the sample's tools)
SENT_TOOLS_KEY = "tcbreplay_tools"
# (each of these lists, of a trial that ended in error where its last model call failed, ends
# with that call's: the request replay and serve end as recorded)


SCORES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("scoring", pa.string()),
        ("sample_id", pa.string()),
        ("trial", pa.int32()),
        ("sample_index", pa.int32()),
        ("category", pa.string()),
        ("status", pa.string()),
        ("n_gold", pa.int32()),
        ("n_agent", pa.int32()),
        ("tsa", pa.float64()),
        ("tp", pa.float64()),
        ("ahr", pa.float64()),
        ("args_invalid", pa.int64()),
        ("args_total", pa.int64()),
        ("args_missing", pa.int64()),
        ("pairs", pa.int32()),
        ("exact", pa.bool_()),  # the default scorer's outcome metrics (null for the others)
        ("write_exact", pa.bool_()),  # null too where no tool has the role write
        ("first_divergence", pa.int32()),
        ("covered", pa.bool_()),  # every gold call done, in any order, extras allowed
        ("valid", pa.bool_()),  # the bfcl scorer's verdict (null for the others)
        ("error_type", pa.string()),  # and BFCL's error type of an invalid sample
    ]
)


# scores columns added after the first layout: a scores file written before them reads
# with them null
SCORES_ADDED = ("exact", "write_exact", "first_divergence", "valid", "error_type", "covered")


_TOOLS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("tool", pa.string()),
        ("description", pa.string()),
        ("param", pa.string()),
        ("has_default", pa.bool_()),
        ("default_value", pa.string()),
    ]
)


# one row per stored scoring, from its summary.json (the scorings view)
_SCORINGS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("scoring", pa.string()),
        ("scorer", pa.string()),
        ("rel_tol", pa.float64()),
        ("abs_tol", pa.float64()),
        ("strings", pa.string()),  # the default scorer's comparison options (null for others)
        ("types", pa.string()),
        ("focus", pa.string()),  # --only/--without: "only write", "without scratch" (or null)
        ("roles", pa.string()),  # the tools' roles the scoring used, as a JSON object
        ("scored_at", pa.string()),
        ("n_samples", pa.int64()),
        ("n_errors", pa.int64()),
        ("tsa", pa.float64()),
        ("n_tsa", pa.int64()),
        ("tp", pa.float64()),
        ("n_tp", pa.int64()),
        ("ahr", pa.float64()),
        ("args_invalid", pa.int64()),
        ("args_total", pa.int64()),
        ("args_missing", pa.int64()),
        ("exact", pa.float64()),  # the outcome metrics: shares and a mean, with their n
        ("n_exact", pa.int64()),
        ("write_exact", pa.float64()),
        ("n_write_exact", pa.int64()),
        ("first_divergence", pa.float64()),
        ("n_first_divergence", pa.int64()),
        ("covered", pa.float64()),
        ("n_covered", pa.int64()),
        ("toolkit_version", pa.string()),
        ("trials", pa.int64()),  # trials of each sample scored (1 in summaries before trials)
        ("gold_run", pa.string()),  # the run whose calls were the gold (score --gold-run)
        ("side", pa.string()),  # whose calls were scored (score --side): agent, user or both
        # the run's data files changed since (Run.changed_since): its numbers are of others
        ("stale", pa.bool_()),
    ]
)


_RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("status", pa.string()),
        ("created_at", pa.string()),
        ("finished_at", pa.string()),
        ("benchmark", pa.string()),
        ("model", pa.string()),
        ("provider", pa.string()),
        ("simulated", pa.bool_()),
        ("n_samples", pa.int64()),
        ("recorded", pa.int64()),
        ("ok", pa.int64()),
        ("errors", pa.int64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("toolkit_version", pa.string()),
        ("dataset_sha256", pa.string()),
        ("source", pa.string()),
        ("trials", pa.int64()),
    ]
)
