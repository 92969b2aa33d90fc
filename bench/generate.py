"""Write synthetic runs of the tool-call benchmark straight into the trace store.

A generated run has the store's layout and schemas (``schema_version`` 1) and reads like
one recorded from the built-in ``tool-call`` tools with Gemini through LangChain: each
message is the JSON that ``langchain_core.messages.message_to_dict`` gives for the human,
AI and tool messages of a real ``google_genai`` recording (ids, ``response_metadata``,
``usage_metadata``, ``additional_kwargs.function_call``, tool call ids), built as text
here without importing LangChain. Per sample: 0-8 gold calls drawn like the built-in
dataset (``list_items``, then multiplications, then additions, int and float
arguments); the agent plays the gold calls with mistakes (skip, extra, swap, wrong
value, invented argument), sometimes several calls in one AI message, a tool message per
call with the tool's real result, then a text answer; a few samples fail mid-way
(status ``error``). About 7 messages per sample.

With ``rules`` (``--rules``), every gold call carries gold rules (#19): its first argument an
``accept`` list (gold's value and its text, ``2.5`` and ``"2.5"``), and in every sample of
two or more calls, some of them (see :func:`gold_rules`) one order-free ``group``; the
agent's calls are drawn the same way.

The dataset is stored as ``record`` stores it: normalised entries in ``dataset.jsonl``
beside a small manifest. The model is labelled ``bench:synthetic`` and ``simulated``:
these are not a model's outputs.

Deterministic given the seed: chunk ``k`` draws from generators seeded by ``(seed, k)``,
and nothing depends on the clock.

    python -m bench.generate --samples 100000 --store bench/out/store-100k --run-id bench-100k
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import multiprocessing
import os
import random
import resource
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _jstr
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tcbreplay._inputs.benchmarks import BENCHMARKS
from tcbreplay._inputs.benchmarks.tool_call.tools import CATALOG
from tcbreplay._store.files import file_record, write_json_atomic
from tcbreplay._store.parquet import MessagesWriter
from tcbreplay._store.schema import (
    DATASET,
    MANIFEST,
    MESSAGES,
    PARQUET_OPTIONS,
    ROW_GROUP_ROWS,
    SAMPLES,
    SAMPLES_SCHEMA,
    SCHEMA_VERSION,
    WRITTEN_MESSAGES_SCHEMA,
)
from tcbreplay._version import __version__

# 2: dataset.jsonl; 3: sample_index in messages; 4: file hashes; 5: row groups of 128Ki rows;
# 6: messages in row groups of one type each, as the store writes them; 7: each message's
# calls beside it (schema 5)
GENERATOR_VERSION = 7
CHUNK_SAMPLES = 20_000
MODEL_NAME = "gemini-2.5-flash"
ERROR_RATE = 0.15  # probability of a mistake at each gold call (the sim's default)
PARALLEL = 0.3  # probability that a call joins the previous AI message
FAILED_SAMPLES = 0.003  # samples whose recording failed part-way
GOLD_CALL_WEIGHTS = (10, 22, 20, 15, 10, 8, 6, 5, 4)  # 0..8 gold calls
MISTAKES = ("skip", "extra", "swap", "wrong_value", "invented_arg")
_INVENTED = ("currency", "unit", "precision", "note", "round_to")
_BASE_TIME = dt.datetime(2025, 6, 2, 9, 0, tzinfo=dt.UTC)
_BASE_US = int(_BASE_TIME.timestamp() * 1_000_000)
_TOOLS = BENCHMARKS["tool-call"].tools

# (name, price, one, many) as a question mentions them
_ITEMS = tuple(
    (item["name"], item["price"], one, many)
    for item, (one, many) in zip(
        CATALOG,
        [
            ("a notebook", "notebooks"),
            ("a pen", "pens"),
            ("a backpack", "backpacks"),
            ("a bottle", "bottles"),
            ("a pair of headphones", "pairs of headphones"),
        ],
        strict=True,
    )
)
_GREETINGS = (
    "Hi there!",
    "What kinds of things can you help me with?",
    "Thanks, that's all I needed. Have a good one!",
    "Good morning! How's your day going so far?",
    "Before I start shopping, got a quick joke for me?",
    "Random question, totally unrelated: what's the capital of France?",
)
_GREETING_ANSWERS = (
    "Hello! I can look up our catalog and prices and do arithmetic for you. What do you need?",
    "You're welcome! Have a great day.",
    "I can help with questions about our shop's catalog, prices and totals.",
)
_CATALOG_QUESTIONS = (
    "What do you sell?",
    "Could you show me everything in the shop along with the prices?",
    "How much is the {one}?",
    "{many} price?",
    "I'm thinking about getting {one}. What does it go for here?",
    "Which item in your catalog is the cheapest?",
    "Do you carry {many}? If so, what's the price?",
)
_SHOP_LEADS = ("I'd like", "I'm buying", "Ring up", "Price out", "How much for", "I'll take")
_SHOP_TAILS = ("What's the total?", "How much is that?", "Can you tally that up?", "Total?")
_ARITH = ("What is {}?", "Compute {}.", "Work out {}, please.", "Quick one: {}?")
_ANSWERS = (
    "The total comes to ${:.2f}.",
    "That will be ${:.2f} altogether.",
    "The result is {:.2f}.",
    "You'd pay ${:.2f}.",
)
_CATALOG_JSON = json.dumps({"items": [dict(item) for item in CATALOG]})
_CATALOG_ANSWER = "We sell: " + ", ".join(f"{i['name']} (${i['price']:.2f})" for i in CATALOG) + "."
_CALL_WEIGHTS_CUM = tuple(np.cumsum(GOLD_CALL_WEIGHTS).tolist())

# Constant text of message_to_dict output for Gemini messages through langchain-google-genai.
_HUMAN = '{{"type": "human", "data": {{"content": {}, "additional_kwargs": {{}}, "response_metadata": {{}}, "type": "human", "name": null, "id": "{}"}}}}'  # noqa: E501
_AI_META = (
    '"response_metadata": {"finish_reason": "STOP", "model_name": "'
    + MODEL_NAME
    + '", "safety_ratings": [], "model_provider": "google_genai"}'
)
_AI = (
    '{{"type": "ai", "data": {{"content": {}, "additional_kwargs": {}, '
    + _AI_META.replace("{", "{{").replace("}", "}}")
    + ', "type": "ai", "name": null, "id": "lc_run--{}-0", "tool_calls": [{}], '
    '"invalid_tool_calls": [], "usage_metadata": {{"input_tokens": {}, "output_tokens": {}, '
    '"total_tokens": {}, "input_token_details": {{"cache_read": 0}}}}}}}}'
)
_CALL = '{{"name": "{}", "args": {}, "id": "{}", "type": "tool_call"}}'
_TOOL = '{{"type": "tool", "data": {{"content": {}, "additional_kwargs": {{}}, "response_metadata": {{}}, "type": "tool", "name": "{}", "id": "{}", "tool_call_id": "{}", "artifact": null, "status": "{}"}}}}'  # noqa: E501
_HEX = np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), np.uint8).reshape(256, 2)


def json_value(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)`` for the values arguments hold, but faster."""
    kind = type(value)
    if kind is dict:
        if not value:
            return "{}"
        return "{" + ", ".join(f"{_jstr(k)}: {json_value(v)}" for k, v in value.items()) + "}"
    if kind is int or kind is float:
        return repr(value)
    if kind is str:
        return _jstr(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False)


# -- the dataset: gold trajectories like the built-in benchmark's ------------------------------


def _big_first(x: float, y: float) -> dict[str, Any]:
    """The tools ask for the larger number as ``a``."""
    return {"a": x, "b": y} if x >= y else {"a": y, "b": x}


def _number(rng: random.Random) -> float | int:
    if rng.random() < 0.5:
        return rng.randint(1, 50)
    return round(rng.uniform(0.5, 120.0), rng.choice((1, 2)))


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _shop(rng: random.Random, m: int) -> tuple[str, str, list[tuple[str, dict[str, Any]]]]:
    """``list_items``, then ``m`` operations: quantities times prices, sums, then modifiers."""
    j = min(5, m + 1, max(1, m // 2 + rng.randint(0, 1)))
    items = rng.sample(_ITEMS, j)
    most = min(j, m - (j - 1))
    n_mul = most if rng.random() < 0.7 else rng.randint(0, most)
    multiplied = set(rng.sample(range(j), n_mul))
    calls: list[tuple[str, dict[str, Any]]] = [("list_items", {})]
    terms, parts = [], []
    for k, (_, price, one, many) in enumerate(items):
        if k in multiplied:
            q = rng.randint(2, 10)
            calls.append(("multiply_numbers", _big_first(price, q)))
            terms.append(round(price * q, 2))
            parts.append(f"{q} {many}")
        else:
            terms.append(price)
            parts.append(one)
    acc = terms[0]
    for t in terms[1:]:
        calls.append(("add_numbers", _big_first(acc, t)))
        acc = round(acc + t, 2)
    mods = []
    n_mods = m - (j - 1) - n_mul
    for k in range(n_mods):
        # "what's left of my budget" ends a question
        kind = rng.choice(
            ("tax", "discount", "double", "coupon", "budget")[: 4 + (k == n_mods - 1)]
        )
        if kind in ("coupon", "budget") and acc > 2.0:
            if kind == "coupon":
                off = rng.choice((1.0, 2.0)) if acc < 6 else rng.choice((2.0, 5.0))
                calls.append(("add_numbers", {"a": acc, "b": -off}))
                acc = round(acc - off, 2)
                mods.append(f"then take a ${off:g} coupon off")
            else:
                budget = next(b for b in (10, 20, 50, 100, 200, 500, 1000, 10**6) if b > acc)
                calls.append(("add_numbers", {"a": rng.choice((budget, float(budget))), "b": -acc}))
                acc = round(budget - acc, 2)
                mods.append(f"and tell me what's left of my ${budget}")
        else:
            f = {"tax": (1.05, 1.08, 1.1), "discount": (0.9, 0.8, 0.75)}.get(kind, (2,))
            factor = rng.choice(f)
            calls.append(("multiply_numbers", _big_first(acc, factor)))
            acc = round(acc * factor, 2)
            mods.append(f"then multiply by {factor}")
    text = f"{rng.choice(_SHOP_LEADS)} {_join(parts)}"
    if mods:
        text += ", " + ", ".join(mods)
    text += ". " + rng.choice(_SHOP_TAILS)
    category = "mixed" if mods else ("single-item" if j == 1 else "multi-item")
    return category, text, calls


def _wrap(expr: str) -> str:
    return f"({expr})" if " " in expr else expr


def _arithmetic(rng: random.Random, m: int) -> tuple[str, str, list[tuple[str, dict[str, Any]]]]:
    acc = _number(rng)
    expr = str(acc)
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(m):
        r = rng.random()
        x = _number(rng)
        if r < 0.2 and acc > x:
            calls.append(("add_numbers", {"a": acc, "b": -x}))
            acc, expr = round(acc - x, 2), f"{_wrap(expr)} - {x}"
        elif r < 0.45:
            x = rng.choice((2, 3, 4, 1.5, 0.5, 1.1))
            calls.append(("multiply_numbers", _big_first(acc, x)))
            acc, expr = round(acc * x, 2), f"{_wrap(expr)} * {x}"
        else:
            calls.append(("add_numbers", _big_first(acc, x)))
            acc, expr = round(acc + x, 2), f"{expr} + {x}"
    return "arithmetic", rng.choice(_ARITH).format(expr), calls


def gold_sample(rng: random.Random) -> tuple[str, str, list[tuple[str, dict[str, Any]]]]:
    """One dataset entry: category, input and gold calls (0-8, like the built-in dataset)."""
    n = rng.choices(range(len(GOLD_CALL_WEIGHTS)), cum_weights=_CALL_WEIGHTS_CUM)[0]
    if n == 0:
        return "greeting", rng.choice(_GREETINGS), []
    if n == 1 and rng.random() < 0.55:
        _, _, one, many = rng.choice(_ITEMS)
        question = rng.choice(_CATALOG_QUESTIONS).format(one=one, many=many)
        return "catalog", question[0].upper() + question[1:], [("list_items", {})]
    if n >= 2 and rng.random() < 0.75:
        return _shop(rng, n - 1)
    return _arithmetic(rng, n)


# -- the agent: the gold calls with mistakes, grouped into AI messages ---------------------------


def _as_written(rng: random.Random, args: dict[str, Any]) -> dict[str, Any]:
    """Gemini often writes a whole float as an int (8.0 -> 8): equal under the spec."""
    if args and rng.random() < 0.3:
        return {
            k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in args.items()
        }
    return dict(args)


def _perturb(rng: random.Random, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((1, -1, 10))
    if isinstance(value, float):
        return round(value * rng.choice((2.0, 0.5, 10.0)) + 1.0, 6)
    return "wrong"


def _wrong_call(rng: random.Random, avoid: str | None) -> tuple[str, dict[str, Any]]:
    name = rng.choice([n for n in ("list_items", "add_numbers", "multiply_numbers") if n != avoid])
    if name == "list_items":
        return name, {}
    return name, _big_first(rng.randint(1, 9), rng.randint(1, 9))


def agent_calls(
    rng: random.Random, gold: list[tuple[str, dict[str, Any]]]
) -> list[tuple[str, dict[str, Any]]]:
    """The calls the agent makes: gold with a mistake at each call with ``ERROR_RATE``."""
    calls: list[tuple[str, dict[str, Any]]] = []
    i = 0
    while i < len(gold):
        name, args = gold[i]
        args = _as_written(rng, args)
        if rng.random() >= ERROR_RATE:
            calls.append((name, args))
            i += 1
            continue
        kind = rng.choice(MISTAKES)
        if kind == "swap" and i + 1 < len(gold):
            nxt = gold[i + 1]
            calls += [(nxt[0], _as_written(rng, nxt[1])), (name, args)]
            i += 2
            continue
        if kind == "extra":
            calls += [_wrong_call(rng, name), (name, args)]
        elif kind == "wrong_value" and args:
            r = rng.random()
            if r < 0.25 and "a" in args and "b" in args:  # a and b the wrong way round
                args = {"a": args["b"], "b": args["a"]}
            elif r < 0.35:  # an argument left out: the tool answers with an error
                del args[rng.choice(sorted(args))]
            else:
                key = rng.choice(sorted(args))
                args[key] = _perturb(rng, args[key])
            calls.append((name, args))
        elif kind != "skip":  # invented_arg, or a mistake that does not fit this call
            args[rng.choice([k for k in _INVENTED if k not in args])] = rng.choice(
                ("USD", 2, True, "each")
            )
            calls.append((name, args))
        i += 1
    if not gold and rng.random() < ERROR_RATE:
        calls.append(_wrong_call(rng, None))
    return calls


def _turns(rng: random.Random, calls: list[Any]) -> list[list[Any]]:
    turns: list[list[Any]] = []
    for call in calls:
        if turns and len(turns[-1]) < 3 and rng.random() < PARALLEL:
            turns[-1].append(call)
        else:
            turns.append([call])
    return turns


def _result(name: str, args: dict[str, Any]) -> tuple[str, str]:
    """What the real tool returns (pydantic makes a and b floats), and the message status."""
    if name == "list_items":
        return _CATALOG_JSON, "success"
    a, b = args.get("a"), args.get("b")
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        missing = "a" if not isinstance(a, (int, float)) else "b"
        text = (
            f"Error invoking tool '{name}' with kwargs {args} with error:\n"
            f" {missing}: Field required\n Please fix the error and try again."
        )
        return text, "error"
    value = float(a) + float(b) if name == "add_numbers" else float(a) * float(b)
    return '{"result": ' + repr(value) + "}", "success"


# -- ids -----------------------------------------------------------------------------------------


class _Ids:
    """UUIDs (v4 for messages and tool calls, v7 for LangChain run ids) from a seeded generator."""

    def __init__(self, gen: np.random.Generator, block: int = 1 << 16) -> None:
        self._gen = gen
        self._block = block
        self._v4: Iterator[str] = iter(())
        self._v7: Iterator[str] = iter(())
        self._ms = _BASE_US // 1000

    def _make(self, version: int) -> Iterator[str]:
        b = self._gen.integers(0, 256, size=(self._block, 16), dtype=np.uint8)
        if version == 7:
            ms = self._ms + np.arange(self._block, dtype=np.uint64) * 37
            self._ms = int(ms[-1]) + 37
            shifts = np.arange(40, -8, -8, dtype=np.uint64)
            b[:, :6] = ((ms[:, None] >> shifts) & 0xFF).astype(np.uint8)
        b[:, 6] = (b[:, 6] & 0x0F) | (version << 4)
        b[:, 8] = (b[:, 8] & 0x3F) | 0x80
        hexed = _HEX[b].reshape(self._block, 32)
        out = np.full((self._block, 36), ord("-"), dtype=np.uint8)
        for src, dst, width in ((0, 0, 8), (8, 9, 4), (12, 14, 4), (16, 19, 4), (20, 24, 12)):
            out[:, dst : dst + width] = hexed[:, src : src + width]
        text = out.tobytes().decode("ascii")
        return iter([text[k : k + 36] for k in range(0, len(text), 36)])

    def v4(self) -> str:
        try:
            return next(self._v4)
        except StopIteration:
            self._v4 = self._make(4)
            return next(self._v4)

    def v7(self) -> str:
        try:
            return next(self._v7)
        except StopIteration:
            self._v7 = self._make(7)
            return next(self._v7)


# -- chunks --------------------------------------------------------------------------------------


@dataclass
class _Chunk:
    samples: pa.Table
    messages: pa.Table
    entries: list[str]
    input_tokens: int = 0
    output_tokens: int = 0
    errors: int = 0
    retries: int = 0
    duration_s: float = 0.0


@dataclass
class _Columns:
    names: tuple[str, ...]
    data: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data = {n: [] for n in self.names}


def dataset_line(
    sid: str, text: str, gold: list[tuple[str, dict[str, Any]]], cat: str, rules: bool = False
) -> str:
    """One line of ``dataset.jsonl``: ``json.dumps(entry, ensure_ascii=False)``, built faster."""
    return (
        f'{{"id": {_jstr(sid)}, "input": {_jstr(text)}, "target": {gold_json(gold, rules)}, '
        f'"category": {_jstr(cat)}}}'
    )


def gold_json(gold: list[tuple[str, dict[str, Any]]], rules: bool = False) -> str:
    """``json.dumps([{"name": ..., "args": ...}, ...], ensure_ascii=False)``, with the rules
    of :func:`gold_rules` when ``rules``."""
    extra = gold_rules(gold) if rules else [""] * len(gold)
    return (
        "["
        + ", ".join(
            f'{{"name": {_jstr(n)}, "args": {json_value(a)}{x}}}'
            for (n, a), x in zip(gold, extra, strict=True)
        )
        + "]"
    )


def gold_rules(gold: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each gold call's rules as JSON members: its first argument's value and text
    acceptable; the longest run of calls to one tool one order-free group, else the last two
    calls (so every sample of two or more calls has a group of two or more)."""
    start, size, k = 0, 0, 0
    while k < len(gold):
        end = k
        while end < len(gold) and gold[end][0] == gold[k][0]:
            end += 1
        if end - k > size:
            start, size = k, end - k
        k = end
    if size < 2:
        start, size = max(0, len(gold) - 2), min(2, len(gold))
    out = []
    for j, (_, args) in enumerate(gold):
        text = ""
        if args:
            key, value = next(iter(args.items()))
            text += f', "accept": {{{_jstr(key)}: [{json_value(value)}, {_jstr(str(value))}]}}'
        if size >= 2 and start <= j < start + size:
            text += ', "group": 1'
        out.append(text)
    return out


def generate_chunk(
    run_id: str, seed: int, k: int, start: int, count: int, rules: bool = False
) -> _Chunk:
    """Samples ``start .. start+count`` of a run; chunk ``k`` has its own seeded generators."""
    rng = random.Random((seed << 32) | k)
    ids = _Ids(np.random.default_rng([seed, k]))
    s = _Columns(tuple(SAMPLES_SCHEMA.names)).data
    m = _Columns(tuple(WRITTEN_MESSAGES_SCHEMA.names)).data
    m_sid, m_pos, m_type, m_msg = m["sample_id"], m["position"], m["type"], m["message"]
    m_idx = m["sample_index"]
    m_in, m_out, m_tot, m_lat = (
        m["input_tokens"],
        m["output_tokens"],
        m["total_tokens"],
        (m["latency_s"]),
    )
    entries = []
    chunk = _Chunk(samples=None, messages=None, entries=entries)  # type: ignore[arg-type]
    durations = []
    for index in range(start, start + count):
        sid = f"case-{index:07d}"
        category, text, gold = gold_sample(rng)
        entries.append(dataset_line(sid, text, gold, category, rules))
        turns = _turns(rng, agent_calls(rng, gold))
        failed = rng.random() < FAILED_SAMPLES
        if failed:
            turns = turns[: rng.randint(0, len(turns))]
        # the human message
        m_sid.append(sid)
        m_idx.append(index)
        m_pos.append(0)
        m_type.append("human")
        m_msg.append(_HUMAN.format(_jstr(text), ids.v4()))
        m_in.append(None)
        m_out.append(None)
        m_tot.append(None)
        m_lat.append(None)
        position = 1
        context = 480 + len(text) // 4
        tokens_in = tokens_out = 0
        duration = 0.0
        last = None
        for turn in turns:
            call_ids = [ids.v4() for _ in turn]
            args_text = [json_value(args) for _, args in turn]
            calls = ", ".join(
                _CALL.format(name, a, cid)
                for (name, _), a, cid in zip(turn, args_text, call_ids, strict=True)
            )
            fn = (
                '{"function_call": {"name": "'
                + turn[-1][0]
                + '", "arguments": '
                + _jstr(args_text[-1])
                + "}}"
            )
            out = sum(8 + len(a) // 4 for a in args_text)
            latency = rng.lognormvariate(-0.2, 0.45)
            m_sid.append(sid)
            m_idx.append(index)
            m_pos.append(position)
            m_type.append("ai")
            m_msg.append(_AI.format('""', fn, ids.v7(), calls, context, out, context + out))
            m_in.append(context)
            m_out.append(out)
            m_tot.append(context + out)
            m_lat.append(latency)
            tokens_in += context
            tokens_out += out
            duration += latency
            context += out
            position += 1
            for (name, args), cid in zip(turn, call_ids, strict=True):
                content, status = _result(name, args)
                latency = 0.0003 + rng.random() * 0.002
                m_sid.append(sid)
                m_idx.append(index)
                m_pos.append(position)
                m_type.append("tool")
                m_msg.append(_TOOL.format(_jstr(content), name, ids.v4(), cid, status))
                m_in.append(None)
                m_out.append(None)
                m_tot.append(None)
                m_lat.append(latency)
                duration += latency
                context += len(content) // 4
                position += 1
                last = (name, content)
        if not failed:
            if last is None:
                answer = rng.choice(_GREETING_ANSWERS)
            elif last[0] == "list_items":
                answer = _CATALOG_ANSWER
            else:
                value = json.loads(last[1]).get("result") if last[1].startswith("{") else None
                answer = (
                    rng.choice(_ANSWERS).format(value)
                    if isinstance(value, float)
                    else "Sorry, I could not work that out."
                )
            out = len(answer) // 4 + 2
            latency = rng.lognormvariate(-0.2, 0.45)
            m_sid.append(sid)
            m_idx.append(index)
            m_pos.append(position)
            m_type.append("ai")
            m_msg.append(_AI.format(_jstr(answer), "{}", ids.v7(), "", context, out, context + out))
            m_in.append(context)
            m_out.append(out)
            m_tot.append(context + out)
            m_lat.append(latency)
            tokens_in += context
            tokens_out += out
            duration += latency
            position += 1
        duration += 0.01
        attempts = 3 if failed else (2 if rng.random() < 0.01 else 1)
        s["run_id"].append(run_id)
        s["sample_id"].append(sid)
        s["trial"].append(0)
        s["sample_index"].append(index)
        s["input"].append(text)
        s["gold"].append(gold_json(gold, rules))
        s["tools"].append(None)
        s["category"].append(category)
        s["metadata"].append(None)
        s["status"].append("error" if failed else "ok")
        s["attempts"].append(attempts)
        s["error_type"].append("ChatGoogleGenerativeAIError" if failed else None)
        s["error"].append(
            "Error calling model 'gemini-2.5-flash' (RESOURCE_EXHAUSTED): 429 RESOURCE_EXHAUSTED. "
            "{'error': {'code': 429, 'message': 'Resource has been exhausted (e.g. check quota).', "
            "'status': 'RESOURCE_EXHAUSTED'}}"
            if failed
            else None
        )
        durations.append(duration)
        s["n_messages"].append(position)
        s["input_tokens"].append(tokens_in or None)
        s["output_tokens"].append(tokens_out or None)
        chunk.input_tokens += tokens_in
        chunk.output_tokens += tokens_out
        chunk.errors += failed
        chunk.retries += attempts - 1
    n = len(durations)
    dur = np.asarray(durations)
    started = _BASE_US + np.arange(start, start + n, dtype=np.int64) * 400_000
    s["started_at"] = pa.array(started, pa.timestamp("us", tz="UTC"))
    s["finished_at"] = pa.array(
        started + (dur * 1e6).astype(np.int64), pa.timestamp("us", tz="UTC")
    )
    s["duration_s"] = dur
    m["run_id"] = [run_id] * len(m_sid)
    m["trial"] = [0] * len(m_sid)
    chunk.duration_s = float(dur.sum())
    chunk.samples = pa.table({k: s[k] for k in SAMPLES_SCHEMA.names}, schema=SAMPLES_SCHEMA)
    chunk.messages = pa.table(
        {k: m[k] for k in WRITTEN_MESSAGES_SCHEMA.names}, schema=WRITTEN_MESSAGES_SCHEMA
    )  # (MessagesWriter derives each message's calls)
    return chunk


# -- writing a run -------------------------------------------------------------------------------


class _RowGroupWriter:
    """A Parquet file with the store's options and row groups."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self._writer = pq.ParquetWriter(path, schema, **PARQUET_OPTIONS)
        self._pending: list[pa.Table] = []
        self._rows = 0
        self.rows_written = 0

    def write(self, table: pa.Table) -> None:
        self._pending.append(table)
        self._rows += table.num_rows
        while self._rows >= ROW_GROUP_ROWS:
            whole = pa.concat_tables(self._pending)
            self._write(whole.slice(0, ROW_GROUP_ROWS))
            rest = whole.slice(ROW_GROUP_ROWS)
            self._pending, self._rows = [rest], rest.num_rows

    def _write(self, table: pa.Table) -> None:
        self._writer.write_table(table.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
        self.rows_written += table.num_rows

    def close(self) -> None:
        if self._rows:
            self._write(pa.concat_tables(self._pending))
        self._pending = []
        self._writer.close()


@dataclass
class GenerateResult:
    """A generated run: where it is, what it holds, how long it took."""

    run_dir: Path
    samples: int
    messages: int
    seconds: float
    manifest_bytes: int
    dataset_bytes: int
    cpu_seconds: float  # this process and its workers


@contextlib.contextmanager
def _chunks(jobs: list[tuple[Any, ...]], workers: int | None) -> Iterator[Any]:
    """Generated chunks in job order, from a process pool when there is enough work."""
    workers = min(workers or os.cpu_count() or 1, len(jobs))
    if workers <= 1 or len(jobs) <= 2:
        yield (generate_chunk(*job) for job in jobs)
        return
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(workers) as pool:
        yield pool.imap(_generate_job, jobs)


def _generate_job(job: tuple[Any, ...]) -> _Chunk:
    return generate_chunk(*job)


def generator_info(samples: int, seed: int, rules: bool = False) -> dict[str, Any]:
    """What the manifest records about the generator; a run with equal info can be reused."""
    info: dict[str, Any] = {
        "name": "bench.generate",
        "version": GENERATOR_VERSION,
        "samples": samples,
        "seed": seed,
    }
    if rules:
        info["rules"] = True
    return info


def generate_run(
    store: str | Path,
    run_id: str,
    samples: int,
    seed: int = 0,
    *,
    workers: int | None = None,
    quiet: bool = True,
    rules: bool = False,
) -> GenerateResult:
    """Write a synthetic run of ``samples`` samples as ``<store>/<run_id>``, replacing it.

    Chunks are generated in ``workers`` processes (default: one per core) and written in
    order by this one, so the output does not depend on the number of workers.
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    t0 = time.perf_counter()
    cpu0 = _cpu_seconds()
    store = Path(store)
    final = store / run_id
    tmp = store / f".{run_id}.generating"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    sample_writer = _RowGroupWriter(tmp / SAMPLES, SAMPLES_SCHEMA)
    message_writer = MessagesWriter(tmp / MESSAGES)
    dataset_path = tmp / DATASET
    dataset_hash = hashlib.sha256()
    totals = {"input_tokens": 0, "output_tokens": 0, "errors": 0, "retries": 0, "duration_s": 0.0}
    starts = list(range(0, samples, CHUNK_SAMPLES))
    jobs = [
        (run_id, seed, k, a, min(CHUNK_SAMPLES, samples - a), rules) for k, a in enumerate(starts)
    ]
    with dataset_path.open("w", encoding="utf-8") as entries, _chunks(jobs, workers) as chunks:
        for (_, _, _, start, _, _), chunk in zip(jobs, chunks, strict=True):
            text = "".join(line + "\n" for line in chunk.entries)
            entries.write(text)
            dataset_hash.update(text.encode())
            sample_writer.write(chunk.samples)
            message_writer.write(chunk.messages)
            for key in totals:
                totals[key] += getattr(chunk, key)
            if not quiet:
                done = start + chunk.samples.num_rows
                rate = done / (time.perf_counter() - t0)
                print(f"\r  generated {done:,}/{samples:,} samples ({rate:,.0f}/s)", end="")
    if not quiet:
        print()
    sample_writer.close()
    message_writer.close()
    manifest = _manifest(run_id, samples, seed, dataset_hash.hexdigest(), totals, rules)
    # as the store's writer does: the data files' sha256, reused by scoring's audit record
    manifest["files"] = {name: file_record(tmp / name) for name in (SAMPLES, MESSAGES)}
    write_json_atomic(tmp / MANIFEST, manifest)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return GenerateResult(
        run_dir=final,
        samples=samples,
        messages=message_writer.rows_written,
        seconds=time.perf_counter() - t0,
        manifest_bytes=(final / MANIFEST).stat().st_size,
        dataset_bytes=(final / DATASET).stat().st_size,
        cpu_seconds=_cpu_seconds() - cpu0,
    )


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the pool's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _manifest(
    run_id: str, samples: int, seed: int, dataset_sha: str, totals: dict[str, Any],
    rules: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The fields ``record`` writes, in its order, for the synthetic model and dataset."""
    from importlib import metadata

    from tcbreplay._inputs.tools import load_toolset  # imports langchain_core: generator only

    toolset = load_toolset(_TOOLS)
    prompt = BENCHMARKS["tool-call"].system_prompt.read_bytes()
    settings = {"seed": seed, "error_rate": ERROR_RATE, "parallel": PARALLEL, "style": MODEL_NAME}
    model = {
        "id": f"bench:synthetic,seed={seed}",
        "provider": "bench",
        "name": "synthetic",
        "settings": settings,
        "simulated": True,
        "effective_settings": settings,
    }
    basis = json.dumps([dataset_sha, toolset.to_list(), model["id"], settings], sort_keys=True)
    libraries = {}
    for name in ("langchain", "langchain-core", "langgraph", "langchain-google-genai"):
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    recorded = samples
    return {
        "run_id": run_id,
        "created_at": _BASE_TIME.isoformat(),
        "fingerprint": hashlib.sha256(basis.encode()).hexdigest(),
        "toolkit": {"name": "tcbreplay", "version": __version__},
        "libraries": libraries,
        "benchmark": {"name": "tool-call", "title": "Tool Call Benchmark"},
        "dataset": {
            "source": f"bench.generate (seed {seed}, {samples} samples)",
            "sha256": dataset_sha,
            "file": DATASET,
            "n_entries": samples,
        },
        "tools": {"source": _TOOLS, "sha256": toolset.sha256, "specs": toolset.to_list()},
        "system_prompt": {
            "source": str(BENCHMARKS["tool-call"].system_prompt),
            "sha256": hashlib.sha256(prompt).hexdigest(),
            "text": prompt.decode(),
        },
        "model": model,
        "runner": {
            "workers": 4,
            "retries": 2,
            "timeout": 300.0,
            "backoff": 1.0,
            "recursion_limit": 50,
        },
        "schema_version": SCHEMA_VERSION,
        "status": "complete",
        "finished_at": (_BASE_TIME + dt.timedelta(seconds=round(samples * 0.4 + 5, 3))).isoformat(),
        "totals": {
            "samples": samples,
            "recorded": recorded,
            "ok": recorded - totals["errors"],
            "errors": totals["errors"],
            "retries": totals["retries"],
            "input_tokens": totals["input_tokens"],
            "output_tokens": totals["output_tokens"],
            "duration_s": round(totals["duration_s"] / 4, 3),
        },
        "source": "bench",
        "generator": generator_info(samples, seed, rules),
    }


def parse_size(text: str) -> int:
    """``10k`` -> 10000, ``1m`` -> 1000000, ``2500`` -> 2500."""
    text = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--samples", required=True, type=parse_size, help="e.g. 10000, 10k, 1m")
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, help="processes (default: one per core)")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--rules", action="store_true", help="gold rules on every sample: accept lists, groups"
    )
    args = parser.parse_args(argv)
    result = generate_run(
        args.store, args.run_id, args.samples, args.seed, workers=args.workers, quiet=args.quiet,
        rules=args.rules,
    )  # fmt: skip
    print(
        f"{result.run_dir}: {result.samples:,} samples, {result.messages:,} messages in "
        f"{result.seconds:.1f} s ({result.samples / result.seconds:,.0f} samples/s, "
        f"{result.cpu_seconds:.1f} CPU s); "
        f"manifest {result.manifest_bytes / 1e3:.1f} kB, "
        f"{DATASET} {result.dataset_bytes / 1e6:.1f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
