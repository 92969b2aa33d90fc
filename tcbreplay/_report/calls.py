"""The calls the report reads: each shown sample's agent and gold calls, gold rules, own tools
and AHR pairing (:func:`tcbreplay._score.metrics.explain_sample`), and over every sample the
names used and the invented arguments of paired calls, a part of the run at a time.

Calls are read as scoring reads them (:func:`tcbreplay._score.translate.load_calls`), their
arguments as JSON. A sample not shown is paired only when one of its calls passes a key its
tool does not take (found by DuckDB, ``queries/report_call_keys.sql``): pairing the others
could count no invented argument; past the samples shown, those are paired by the scoring
kernel (:func:`tcbreplay._score.scorers.default.score_part`, the same pairing), and only
their calls that may pass such a key are read in Python.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from tcbreplay import _json
from tcbreplay._json import MAX_DEPTH, MAX_INT_DIGITS
from tcbreplay._score import translate
from tcbreplay._score.flat_calls import RULES, FlatCalls
from tcbreplay._score.metrics import (
    DEFAULT_COMPARE,
    GoldRules,
    explain_sample,
    free_form_tools,
    tool_properties,
)
from tcbreplay._score.scorers.default import score_part
from tcbreplay._score.tool_params import Tools, sample_tool_sets, tools_table
from tcbreplay._score.translate import ALL_SAMPLES
from tcbreplay._store.run_dir import Run
from tcbreplay._store.views import connect, query_text

# (name, arguments): an object, or any other JSON value or text as it was stored
Call = tuple[str, Any]
# samples whose calls a report reads and pairs at a time
PART_SAMPLES = 50_000


def keyed(frame: pl.DataFrame) -> pl.DataFrame:
    """A frame of rows with ``sample_id`` and ``trial``: ``sample_id`` the row's name
    (:func:`row_key`), and the sample's own id as ``base_id``."""
    if "trial" not in frame.columns:  # scored before trials: every row is trial 0
        frame = frame.with_columns(pl.lit(0, pl.Int32).alias("trial"))
    if not (frame["trial"] > 0).any():  # every name is the id: one column, not two
        return frame.with_columns(pl.col("sample_id").alias("base_id"))
    key = (
        pl.when(pl.col("trial") > 0)
        .then(pl.format("{} (trial {})", "sample_id", "trial"))
        .otherwise(pl.col("sample_id"))
    )
    return frame.with_columns(pl.col("sample_id").alias("base_id"), key.alias("sample_id"))


@dataclass
class Calls:
    """A run's calls as the report keeps them: per row shown, its agent and gold calls, AHR
    pairing, gold rules (where any) and own tools (where it has some); over every row, the
    invented arguments of paired calls per tool and the names calls use."""

    agent: dict[str, list[Call]] = field(default_factory=dict)
    gold: dict[str, list[Call]] = field(default_factory=dict)
    explanations: dict[str, dict[str, Any]] = field(default_factory=dict)
    gold_rules: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    own_tools: dict[str, Any] = field(default_factory=dict)
    invented: Counter[str] = field(default_factory=Counter)
    # gold calls' names, then agent calls', in the order the run first uses them
    call_names: list[str] = field(default_factory=list)


def load_calls(
    run: Run, samples: pl.DataFrame, schemas: list[dict[str, Any]], shown: set[str] | None
) -> Calls:
    """Read the run's calls a part of :data:`PART_SAMPLES` samples at a time: keep those of
    the rows (``samples``, in sample order) in ``shown`` (every row when None), and count over
    every row the names used and the invented arguments of paired calls (``schemas``: the
    tools of samples without tools of their own)."""
    every = samples["sample_id"]
    kept = (every if shown is None else every.filter(every.is_in(list(shown)))).to_list()
    data = Calls(gold={sid: [] for sid in kept}, agent={sid: [] for sid in kept})
    rules: dict[str, list[dict[str, Any]]] = {}
    schema_props = tool_properties(schemas)
    free = set(free_form_tools(schemas))  # (tools whose arguments no key of is invented)
    names: tuple[dict[str, None], dict[str, None]] = ({}, {})
    con = connect(runs=[run], with_scores=False)
    tools = None  # the run's tools as the kernel takes them, once a part needs them
    try:
        n_parts = -(-samples.height // PART_SAMPLES)
        parts = [ALL_SAMPLES] if n_parts <= 1 else translate.split_samples(con, n_parts)
        for part in parts:
            # the calls as scoring reads them: a gold list or tool_calls that is no list holds
            # none, an element that is no object is a call named '' without arguments
            flat = translate.load_flat(con, part)
            tables = flat.tables()
            ids = keyed(tables.samples)["sample_id"].to_list()
            for seen, side in zip(names, (tables.gold, tables.agent), strict=True):
                ordered = side.select("s", "name").sort("s", maintain_order=True)
                first = ordered["name"].fill_null("").unique(maintain_order=True)
                seen.update(dict.fromkeys(first.to_list()))
            own_tools = {
                ids[s]: read_args(text)
                for s, text in tables.samples.select("s", "tools").iter_rows()
                if text is not None
            }
            # a sample not shown is paired only when a call may have an invented argument,
            # by the scoring kernel: its paired calls' arguments are counted here
            explain = set(ids)
            agent_side = tables.agent
            if shown is not None:
                may = _may_invent(con, tables.agent, ids, own_tools, schema_props, free)
                explain = {sid for sid in ids if sid in shown}
                hidden = [k for k in may["s"].unique().to_list() if ids[k] not in shown]
                if hidden:
                    if tools is None:
                        tools = tools_table(con, schemas)
                    others = may.filter(pl.col("s").is_in(hidden))
                    _count_invented(
                        con, flat, tools, others, ids, own_tools, schema_props, data.invented
                    )  # (free-form tools' calls are none of _may_invent's)
                agent_side = tables.agent.filter(
                    pl.col("s").is_in([k for k, sid in enumerate(ids) if sid in explain])
                )
            agent: dict[str, list[Call]] = {}
            for s, name, args in agent_side.select("s", "name", "args").iter_rows():
                agent.setdefault(ids[s], []).append((name or "", read_args(args)))
            gold: dict[str, list[Call]] = {}
            gold_side = tables.gold.filter(
                pl.col("s").is_in([s for s, sid in enumerate(ids) if sid in explain])
            )
            for s, name, args in gold_side.select("s", "name", "args").iter_rows():
                gold.setdefault(ids[s], []).append((name or "", read_args(args)))
            for s, *texts in gold_side.select("s", *RULES).iter_rows():
                rules.setdefault(ids[s], []).append(
                    {k: read_args(t) for k, t in zip(RULES, texts, strict=True) if t}
                )
            for sid in (i for i in ids if i in explain):  # in sample order
                calls = agent.get(sid, [])
                explained = explain_sample(
                    object_args(calls),
                    with_rules(object_args(gold.get(sid, [])), rules.get(sid, [])),
                    own_tools.get(sid, schemas),
                )
                for pair in explained["pairs"]:
                    verdicts = pair["args"].values()
                    data.invented[calls[pair["agent"]][0]] += sum(v == "unknown" for v in verdicts)
                if sid in data.agent:
                    data.agent[sid] = calls
                    data.gold[sid] = gold.get(sid, [])
                    data.explanations[sid] = explained
                    if sid in own_tools:
                        data.own_tools[sid] = own_tools[sid]
                else:
                    rules.pop(sid, None)
    finally:
        con.close()
    data.call_names = list({**names[0], **names[1]})
    data.gold_rules = {sid: r for sid, r in rules.items() if any(r)}
    return data


def _count_invented(
    con: Any,
    flat: FlatCalls,
    tools: Tools,
    calls: pl.DataFrame,
    ids: list[str],
    own_tools: dict[str, Any],
    props: dict[str, dict[str, Any]],
    invented: Counter[str],
) -> None:
    """Add to ``invented`` the arguments that their tool does not take of the paired calls
    among ``calls`` (:func:`_may_invent`'s: each call of ``flat`` that may pass one, by its
    sample ``s`` and number ``i``, with how many keys it passes that its tool does not take,
    null where the call is to be read to know), the pairing chosen by the scoring kernel with
    the default comparison: the same pairing :func:`explain_sample` chooses, for a fraction
    of its time (a tenth of a large run's samples may invent an argument)."""
    own = None
    if flat.tools is not None:
        own = sample_tool_sets(con, flat.tools, flat.samples["sample_id"])
    pairs = score_part(flat, tools, DEFAULT_COMPARE, own, covered=False).pairs
    paired = (
        pairs.join(
            flat.samples.select("sample_id", "trial").with_row_index("s"),
            on=["sample_id", "trial"],
            how="inner",
        )
        .select(pl.col("s").cast(pl.Int64), pl.col("agent_index").cast(pl.Int64).alias("i"))
        .join(calls.with_columns(pl.col("s", "i").cast(pl.Int64)), on=["s", "i"])
    )
    known = paired.filter(pl.col("unknown").is_not_null())
    for name, n in known.group_by("name").agg(pl.col("unknown").sum()).iter_rows():
        invented[name] += n
    read = paired.filter(pl.col("unknown").is_null())
    at = flat.agent.first[read["s"].to_numpy()] + read["i"].to_numpy()
    texts = flat.agent.args.take(pa.array(at, pa.int64())).to_pylist()
    for s, name, text in zip(read["s"].to_list(), read["name"].to_list(), texts, strict=True):
        args = read_args(text)
        if not isinstance(args, dict):  # no object: read as no arguments, as scoring reads
            continue
        sid = ids[s]
        params = (tool_properties(own_tools[sid]) if sid in own_tools else props).get(name)
        invented[name] += sum(key not in (params or {}) for key in args)


def _may_invent(
    con: Any,
    agent: pl.DataFrame,
    ids: list[str],
    own_tools: dict[str, Any],
    props: dict[str, dict[str, Any]],
    free: Collection[str] = (),
) -> pl.DataFrame:
    """The agent calls that may pass a key their tool does not take (``props``: each tool's
    parameters; ``free``: the tools that take any key, whose calls pass none such; a sample
    with tools of its own is judged by them), paired or not: their
    sample ``s``, number ``i`` and ``name``, and how many such keys they pass (``unknown``;
    null for a call whose arguments are to be read to know)."""
    cursor = con.cursor()
    try:
        cursor.register("_calls", agent.select("s", "i", "name", "args").to_arrow())
        limits = {"depth": MAX_DEPTH, "digits": MAX_INT_DIGITS}
        found = pl.from_arrow(
            cursor.sql(query_text("report_call_keys"), params=limits).to_arrow_table()
        )
    finally:
        cursor.close()
    assert isinstance(found, pl.DataFrame)
    pairs = [(tool, key) for tool, params in props.items() for key in params]
    known = pl.DataFrame(pairs, schema={"name": pl.String, "key": pl.String}, orient="row")
    own = [k for k, sid in enumerate(ids) if sid in own_tools]
    # a null key (args to read) matches nothing: its call is read
    run_calls = found.filter(~pl.col("s").is_in(own) & ~pl.col("name").is_in(list(free)))
    unknown = run_calls.join(known, on=["name", "key"], how="anti")
    own_props: dict[int, tuple[dict[str, dict[str, Any]], dict[str, Any]]] = {}
    rows = []
    for s, i, name, key in found.filter(pl.col("s").is_in(own)).iter_rows():
        if s not in own_props:
            schemas = own_tools[ids[s]]
            own_props[s] = (tool_properties(schemas), free_form_tools(schemas))
        params, others = own_props[s]
        if name not in others and (key is None or key not in params.get(name, {})):
            rows.append((s, i, name, key))
    if rows:
        unknown = pl.concat([unknown, pl.DataFrame(rows, schema=unknown.schema, orient="row")])
    return unknown.group_by("s", "i", "name").agg(
        pl.when(pl.col("key").is_null().any())
        .then(None)
        .otherwise(pl.len())
        .cast(pl.Int64)
        .alias("unknown")
    )


def with_rules(
    calls: list[tuple[str, dict[str, Any]]], rules: list[dict[str, Any]]
) -> list[tuple[str, dict[str, Any], GoldRules]]:
    """Gold calls with their rules, as explain_sample takes them."""
    return [(n, a, GoldRules.of(r)) for (n, a), r in zip(calls, rules, strict=True)]


def read_args(text: str | None) -> Any:
    """Arguments text (canonical JSON from DuckDB) as a Python value; text Python cannot read
    (DuckDB's number words such as ``inf``) stays text, to be shown as it is."""
    try:
        return _json.loads(text) if text else {}
    except ValueError:  # LimitError too: a value beyond the limits is shown as its text
        return text


def object_args(calls: list[Call]) -> list[tuple[str, dict[str, Any]]]:
    """Calls whose arguments are no JSON object read as having none, as scoring reads them."""
    return [(name, args if isinstance(args, dict) else {}) for name, args in calls]
