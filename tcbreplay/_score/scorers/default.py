"""The default scorer (``--scorer spec``: the metric spec's metrics) over one range of samples:
flat calls through the compiled kernel.

Names become integer codes (one dictionary of the range's names, the tools' own names
first), arguments texts stay Arrow byte buffers, and :mod:`tcbreplay._score.kernels` computes
every per-sample number. What the kernel leaves undecided (lists or objects compared,
objects of more than 64 keys) is judged here with :func:`tcbreplay._score.metrics.arg_verdicts`
on ``json.loads``-ed arguments, before the pairing is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tcbreplay._score import kernels
from tcbreplay._score.exact_match import first_divergence
from tcbreplay._score.flat_calls import FlatCalls, FlatSide
from tcbreplay._score.kernels import number_locale, scratch_for, text_buffers
from tcbreplay._score.metrics import (
    DEFAULT_COMPARE,
    NO_RULES,
    VALID_VERDICTS,
    Compare,
    GoldRules,
    arg_verdicts,
    missing_keys,
    success,
)
from tcbreplay._score.roles import restrict_calls
from tcbreplay._score.texts import filled_texts, same_as_previous
from tcbreplay._score.tool_params import SampleTools, Tools
from tcbreplay._score.translate import read_args
from tcbreplay.errors import StoreError


@dataclass
class ScoredPart:
    """The default scorer's results for one range of samples (``s`` local to it)."""

    scores: pl.DataFrame
    flat: FlatCalls
    tool_counts: pl.DataFrame
    pairs: pl.DataFrame


@dataclass
class _Judged:
    """The kernel's first pass over one range's calls: per sample tsa, tp and whether the
    name sequences are equal (``same``); the candidate pairs with their verdicts decided
    (``pairs``); the names and each call's name code; the kernel's options."""

    tsa: np.ndarray
    tp: np.ndarray
    same: np.ndarray
    pairs: np.ndarray
    names: pl.Series
    a_code: np.ndarray
    g_code: np.ndarray
    options: kernels.KernelOptions


def score_part(
    flat: FlatCalls, tools: Tools, compare: Compare = DEFAULT_COMPARE,
    own_tools: SampleTools | None = None, *, covered: bool = True,
) -> ScoredPart:  # fmt: skip
    """Per-sample scores, the chosen pairs and per-tool counts of one range's calls;
    ``own_tools``: the tools of the samples that have their own (None: none has);
    ``covered``: compute the metric ``covered`` (else null)."""
    samples, agent, gold = flat.samples, flat.agent, flat.gold
    n = samples.height
    judged = _judge(flat, tools, compare, own_tools)
    tsa, tp, same, pairs = judged.tsa, judged.tp, judged.same, judged.pairs
    names, a_code, g_code, options = judged.names, judged.a_code, judged.g_code, judged.options
    chosen = kernels.functions().choose_pairs(
        agent.first, gold.first, same, pairs, options.g_block, options.grouped
    )
    totals = kernels.functions().sample_totals(n, pairs, chosen)
    n_pairs, invalid, valid, missing = totals
    total = invalid + valid
    with np.errstate(divide="ignore", invalid="ignore"):
        ahr = np.where(total > 0, invalid / np.maximum(total, 1), np.nan)
    scores = pl.DataFrame(
        {
            "sample_id": samples["sample_id"],
            "trial": samples["trial"],
            "sample_index": samples["sample_index"],
            "category": samples["category"],
            "status": samples["status"],
            "n_gold": pl.Series(np.diff(gold.first), dtype=pl.Int32),
            "n_agent": pl.Series(np.diff(agent.first), dtype=pl.Int32),
            "tsa": pl.Series(tsa, dtype=pl.Float64).fill_nan(None),
            "tp": pl.Series(tp, dtype=pl.Float64),
            "ahr": pl.Series(ahr, dtype=pl.Float64).fill_nan(None),
            "args_invalid": invalid,
            "args_total": total,
            "args_missing": missing,
            "pairs": pl.Series(n_pairs, dtype=pl.Int32),
        }
    ).with_columns(success().alias("exact"))
    scores = scores.with_columns(
        pl.lit(None, pl.Boolean).alias("write_exact"),
        first_divergence(pairs, agent.first, gold.first, options.grouped, options.g_block),
        pl.Series("covered", _covered(flat, judged, tools, compare, own_tools), pl.Boolean)
        if covered
        else pl.lit(None, pl.Boolean).alias("covered"),
    )
    picked = kernels.functions().picked(pairs, chosen)
    chosen_frame = pl.DataFrame(
        {
            "sample_id": samples["sample_id"].gather(picked[kernels.SAMPLE]),
            "trial": samples["trial"].gather(picked[kernels.SAMPLE]),
            "agent_index": picked[kernels.AGENT],
            "gold_index": picked[kernels.GOLD],
            "tool": names.gather(picked[kernels.TOOL]),
            "args_invalid": picked[kernels.INVALID],
            "args_valid": picked[kernels.VALID],
            "args_missing": picked[kernels.MISSING],
        }
    )
    return ScoredPart(
        scores=scores,
        flat=flat,
        tool_counts=_tool_counts(names, a_code, g_code, picked),
        pairs=chosen_frame,
    )


def _judge(
    flat: FlatCalls, tools: Tools, compare: Compare, own_tools: SampleTools | None,
    codes: tuple[pl.Series, np.ndarray, np.ndarray] | None = None,
) -> _Judged:  # fmt: skip
    """The kernel's candidate pairs of ``flat``, every verdict decided (the kernel's, and
    those it leaves to Python); ``codes``: the names and each call's name code, when known
    (else found: :func:`_name_codes`)."""
    samples, agent, gold = flat.samples, flat.agent, flat.gold
    names, a_code, g_code = codes or _name_codes(tools.names, agent.name, gold.name)
    params, options = _params(tools, names, own_tools, compare)
    _gold_rules(flat, options)
    a_offsets, a_data = text_buffers(agent.args)
    g_offsets, g_data = text_buffers(gold.args)
    a_checked = np.zeros(len(agent.s), dtype=np.bool_)
    g_checked = np.zeros(len(gold.s), dtype=np.bool_)
    scratch = scratch_for(a_offsets, g_offsets, params.default_offsets)
    # most runs have fewer candidates than calls; more where sequences differ a lot
    rows = len(agent.s) + len(gold.s) + 16
    while True:
        pairs = np.empty((rows, 8), dtype=np.int32)
        tsa, tp, same, found, side, call = kernels.functions().score_samples(
            agent.first, a_code, a_offsets, a_data, gold.first, g_code, g_offsets, g_data,
            len(names), params.first, params.key_offsets, params.key_data, params.has_default,
            params.default_offsets, params.default_data, compare.rel_tol, compare.abs_tol,
            a_checked, g_checked, scratch, number_locale(), pairs, options,
        )  # fmt: skip
        if found >= 0:
            break
        rows *= 4
    pairs = pairs[:found]
    if side == 0:  # the arguments the pairing did not split, checked for repeated keys too
        for side_, offsets, data, checked in ((1, a_offsets, a_data, a_checked),
                                              (2, g_offsets, g_data, g_checked)):  # fmt: skip
            call = kernels.functions().first_repeated_key(offsets, data, checked)
            if call >= 0:
                side = side_
                break
    if side:
        text = (agent if side == 1 else gold).args[int(call)].as_py()
        raise StoreError(
            "cannot split tool-call arguments into keys: "
            f"an arguments object repeats a key: {text[:200]}"
        )
    _free_form_pending(pairs, names, tools, own_tools)
    _decide_pending(pairs, flat, names, tools, own_tools, compare, samples["sample_id"])
    return _Judged(tsa, tp, same, pairs, names, a_code, g_code, options)


def _covered(
    flat: FlatCalls, judged: _Judged, tools: Tools, compare: Compare,
    own_tools: SampleTools | None,
) -> np.ndarray:  # fmt: skip
    """Per sample: every gold call accepts some agent call, in any order, other calls
    allowed (``covered``; true without gold calls). The first pass judged every same-name
    pair of a sample whose gold has an order-free block, and the pairs on a longest common
    subsequence of the names elsewhere: a sample those leave undecided has its calls judged
    again as one order-free block (every same-name pair), the other samples' calls left
    out."""
    gold, n = flat.gold, flat.samples.height
    hit = _accepted_gold(judged.pairs, gold.first)
    covered = np.bincount(gold.s[~hit], minlength=n) == 0
    settled = covered.copy()
    if judged.options.grouped is not None:
        settled |= judged.options.grouped[:n]
    if settled.all():
        return covered
    # the gold calls no judged pair accepted, each judged again against every agent call of
    # its name (pairs are of one name; one order-free block); those the first pass accepted
    # stay accepted
    width = np.int64(len(judged.names) + 1)
    g_key = gold.s.astype(np.int64) * width + judged.g_code
    a_key = flat.agent.s.astype(np.int64) * width + judged.a_code
    missed = ~hit & ~settled[gold.s]
    tried = np.isin(a_key, g_key[missed])
    # every gold call one order-free block: every same-name pair is judged (the names keep
    # their codes)
    again = restrict_calls(flat, tried, missed, order_free=True)
    codes = (judged.names, judged.a_code[tried], judged.g_code[missed])
    more = _judge(again, tools, compare, own_tools, codes)
    still = np.flatnonzero(missed)[~_accepted_gold(more.pairs, again.gold.first)]
    covered[~settled] = (np.bincount(gold.s[still], minlength=n) == 0)[~settled]
    return covered


def _accepted_gold(pairs: np.ndarray, g_first: np.ndarray) -> np.ndarray:
    """Per gold call (flat, in sample order): some judged pair accepts it (no invalid
    argument, none missing)."""
    hit = np.zeros(int(g_first[-1]), dtype=np.bool_)
    # row numbers, not the rows: copying every column of the accepted rows costs twice this
    accepted = np.flatnonzero((pairs[:, kernels.INVALID] == 0) & (pairs[:, kernels.MISSING] == 0))
    hit[g_first[pairs[accepted, kernels.SAMPLE]] + pairs[accepted, kernels.GOLD]] = True
    return hit


def _name_codes(
    declared: list[str], agent: pa.Array, gold: pa.Array
) -> tuple[pl.Series, np.ndarray, np.ndarray]:
    """The distinct names (declared tools first, in order) and each call's name code."""
    sides = [_byte_table([name.encode() for name in declared])]
    sides += [text_buffers(names) for names in (agent, gold)]
    size = 1024
    while True:  # a table too small for the run's distinct names is started again larger
        slots = np.full(size, -1, dtype=np.int64)
        dict_offsets = np.zeros(size // 2 + 1, dtype=np.int64)
        dict_data = np.empty(size * 64, dtype=np.uint8)
        state = np.zeros(2, dtype=np.int64)
        codes = [np.empty(len(offsets) - 1, dtype=np.int32) for offsets, _ in sides]
        if all(
            kernels.functions().encode_texts(
                offsets, data, slots, dict_offsets, dict_data, state, out
            )
            for (offsets, data), out in zip(sides, codes, strict=True)
        ):
            break
        size *= 8
    count = int(state[0])
    texts = dict_data[: int(state[1])].tobytes()
    names = [texts[dict_offsets[k] : dict_offsets[k + 1]].decode() for k in range(count)]
    return pl.Series(names, dtype=pl.String), codes[1], codes[2]


def _params(
    tools: Tools, names: pl.Series, own_tools: SampleTools | None, compare: Compare
) -> tuple[kernels.Params, kernels.KernelOptions]:
    """The tools' parameters by name code (code t < len(tools.names) is tool t), then those
    of each sample's own tool set; and the kernel's options of the comparison and the sets."""
    codes = len(names)
    counts = np.zeros(codes, dtype=np.int64)
    counts[: len(tools.params)] = [len(p) for p in tools.params]
    first = np.zeros(codes + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    rows = [row for tool in tools.params for row in tool]
    integer = [flag for tool in tools.integers() for flag in tool]
    options = kernels.KernelOptions(
        strings=kernels.STRINGS_BFCL if compare.strings == "bfcl" else kernels.STRINGS_EXACT,
        strict=compare.types == "strict",
    )
    if own_tools is not None:
        code_of = {name: k for k, name in enumerate(names.to_list())}
        set_first, set_code, set_lo, set_hi = [0], [], [], []
        for tool_set in own_tools.sets:
            for name, tool_rows, flags in zip(tool_set.names, tool_set.params,
                                              tool_set.integers(), strict=True):  # fmt: skip
                if name in code_of:  # tools no call names are never looked up
                    set_code.append(code_of[name])
                    set_lo.append(len(rows))
                    rows += tool_rows
                    integer += flags
                    set_hi.append(len(rows))
            set_first.append(len(set_code))
        options.set = own_tools.set
        options.set_first = np.array(set_first, dtype=np.int64)
        options.set_code = np.array([*set_code, 0], dtype=np.int32)
        options.set_lo = np.array([*set_lo, 0], dtype=np.int64)
        options.set_hi = np.array([*set_hi, 0], dtype=np.int64)
    key_offsets, key_data = _byte_table([key for key, _ in rows])
    default_offsets, default_data = _byte_table([d or b"" for _, d in rows])
    options.integer = np.array([*integer, False], dtype=np.bool_)
    params = kernels.Params(
        first=first,
        key_offsets=key_offsets,
        key_data=key_data,
        has_default=np.array([d is not None for _, d in rows], dtype=np.bool_),
        default_offsets=default_offsets,
        default_data=default_data,
        integer=options.integer,
    )
    return params, options


def _gold_rules(flat: FlatCalls, options: kernels.KernelOptions) -> None:
    """Set the gold calls' rules in ``options``: accept, optional and compare texts, block
    numbers and the samples with blocks of two or more calls (left None when no gold call has
    a rule)."""
    if flat.rules is None:
        return
    gold, n = flat.gold, flat.samples.height
    options.accept_offsets, options.accept_data = filled_texts(flat.rules["accept"])
    options.optional_offsets, options.optional_data = filled_texts(flat.rules["optional"])
    options.compare_offsets, options.compare_data = filled_texts(flat.rules["compare"])
    group, s = flat.rules["group"], gold.s
    joins = np.zeros(len(s), dtype=np.bool_)  # the call is in its predecessor's block
    if len(s) > 1:
        joins[1:] = same_as_previous(group) & (s[1:] == s[:-1])
    block = np.cumsum(~joins) - 1
    if len(s):
        block -= block[gold.first[s]]
    options.g_block = np.ascontiguousarray(block, dtype=np.int32)
    options.grouped = (
        np.bincount(s[joins], minlength=n).astype(np.bool_) if n else np.zeros(1, dtype=np.bool_)
    )
    if not len(s):
        options.g_block = np.zeros(1, dtype=np.int32)


def _byte_table(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    data = np.frombuffer(b"".join(texts) + b"\0", dtype=np.uint8)
    return offsets, data


def _free_form_pending(
    pairs: np.ndarray, names: pl.Series, tools: Tools, own_tools: SampleTools | None
) -> None:
    """Leave to Python (in place) the candidate pairs of calls to a tool that takes free-form
    arguments, whose keys beyond the declared ones the kernel takes for invented."""
    sets = [tools] + (own_tools.sets if own_tools is not None else [])
    if not any(tool_set.free_form for tool_set in sets):
        return
    # per tool set (0: the run's tools; k + 1: the samples' own set k), the free-form codes
    free = np.zeros((len(sets), len(names) + 1), dtype=np.bool_)
    for k, tool_set in enumerate(sets):
        free[k, : len(names)] = names.is_in(list(tool_set.free_form)).to_numpy()
    which = np.zeros(len(pairs), dtype=np.int64)
    if own_tools is not None:
        which = own_tools.set[pairs[:, kernels.SAMPLE]].astype(np.int64) + 1
    pairs[free[which, pairs[:, kernels.TOOL]], kernels.PENDING] = 1


def _decide_pending(
    pairs: np.ndarray, flat: FlatCalls, names: pl.Series, tools: Tools,
    own_tools: SampleTools | None, compare: Compare, samples: pl.Series,
) -> None:  # fmt: skip
    """Judge in Python the candidate pairs the kernel left pending (in place); ``samples``
    are the range's sample ids, for errors."""
    agent, gold = flat.agent, flat.gold
    for k in np.flatnonzero(pairs[:, kernels.PENDING]):
        s, i, j, tool = (
            int(x) for x in pairs[k, [kernels.SAMPLE, kernels.AGENT, kernels.GOLD, kernels.TOOL]]
        )
        sample = f"sample {samples[s]!r}: "
        y = int(gold.first[s]) + j
        agent_args = _object(agent.args[int(agent.first[s]) + i].as_py(), sample + f"call {i}: ")
        gold_args = _object(gold.args[y].as_py(), sample + f"gold call {j}: ")
        rules = NO_RULES
        if flat.rules is not None:
            texts = {key: flat.rules[key][y].as_py() for key in ("accept", "optional", "compare")}
            where = sample + f"gold call {j}: "
            rules = GoldRules.of(
                {k: read_args(t, where) for k, t in texts.items() if t is not None}
            )
        name = names[tool]
        tool_set = tools
        if own_tools is not None and own_tools.set[s] >= 0:
            tool_set = own_tools.sets[int(own_tools.set[s])]
        verdicts = arg_verdicts(agent_args, gold_args, tool_set.properties.get(name), compare,
                                rules, tool_set.free_form.get(name))  # fmt: skip
        invalid = sum(v not in VALID_VERDICTS for v in verdicts.values())
        pairs[k, kernels.INVALID] = invalid
        pairs[k, kernels.VALID] = len(verdicts) - invalid
        pairs[k, kernels.MISSING] = len(missing_keys(agent_args, gold_args, rules))
        pairs[k, kernels.PENDING] = 0


def _object(text: str, where: str) -> dict[str, Any]:
    """The arguments text as the spec reads it (anything but an object has no keys)."""
    value = read_args(text, where)
    return value if isinstance(value, dict) else {}


def _tool_counts(
    names: pl.Series, a_code: np.ndarray, g_code: np.ndarray, chosen: np.ndarray
) -> pl.DataFrame:
    """Per tool name called by the agent or gold: gold and agent calls, chosen pairs and
    their argument counts."""
    totals = kernels.functions().tool_totals(len(names), a_code, g_code, chosen)
    columns = ("gold_calls", "agent_calls", "paired", "args_invalid", "args_total", "args_missing")
    table = pl.DataFrame(
        {"tool": names, **{column: totals[:, k] for k, column in enumerate(columns)}}
    )
    return table.filter((pl.col("gold_calls") > 0) | (pl.col("agent_calls") > 0))


def warm() -> None:
    """Run every kernel scoring uses once, on two tiny samples (a few milliseconds): a check
    that the kernels' extension is built and takes what scoring hands it."""

    def side(s: list[int], names: list[str], args: list[str]) -> FlatSide:
        at = np.array(s, dtype=np.int64)
        return FlatSide(
            s=at, name=pa.array(names), args=pa.array(args), first=np.searchsorted(at, [0, 1, 2])
        )

    samples = pl.DataFrame(
        {"sample_id": ["a", "b"], "trial": [0, 0], "sample_index": [0, 1],
         "category": [None, None], "status": ["ok", "ok"]},
        schema_overrides={"trial": pl.Int32, "sample_index": pl.Int32, "category": pl.String},
    ).with_row_index("s")  # fmt: skip
    flat = FlatCalls(
        samples=samples,
        agent=side([0, 0, 1], ["f", "g", "f"], ['{"x":1.5}', '{"y":[1]}', "{}"]),
        gold=side([0, 1, 1], ["f", "g", "f"], ['{"x":1}', "{}", '{"z":true}']),
    )
    tools = Tools(names=["f"], params=[[(b"x", b"1")]], properties={"f": {"x": {"default": 1}}})
    score_part(flat, tools, Compare())
    order = np.arange(2, dtype=np.int64)
    kernels.functions().positions(order, order)
    kernels.functions().in_call_order(order, order)
    text = np.frombuffer(b'[{"name":"f","args":{}}]', dtype=np.uint8)
    bounds = np.array([0, len(text)], dtype=np.int64)
    row, lo, hi, args_lo, args_hi = (np.empty(1, dtype=np.int64) for _ in range(5))
    kernels.functions().split_calls(
        bounds, text, row, np.empty(1, np.int8), lo, hi, args_lo, args_hi
    )
    kernels.functions().span_texts(text, lo, hi, text, np.empty(2, dtype=np.int64))
    inputs = kernels.text_buffers(pa.array(["x", "y"]))
    kernels.functions().dashboard_samples(
        order, order, *inputs, np.ones(2, bool), *flat.agent.buffers(), *flat.gold.buffers(),
        np.empty(1024, dtype=np.uint8),
    )  # fmt: skip
