"""BFCL agreement: tcbreplay's verdicts against BFCL's own checker on BFCL's own questions.

The 1,000 non-live questions of ``bfcl-eval`` (simple_python, multiple, parallel,
parallel_multiple), and four derived from them for a rule BFCL's data does not exercise
(:func:`bench.bfcl_variants.derived`), get answers synthesized in variants
(:mod:`bench.bfcl_variants`), each answer in one of BFCL's result forms in turn. BFCL's
checker judges every answer (:mod:`bench.bfcl_reference`); tcbreplay imports each
variant's answers (``import --format bfcl``) and scores them twice: ``--scorer bfcl``,
which must agree with BFCL on every sample (valid or not, and the error type), and the spec
scorer, whose verdict is "clean" when tsa = 1, tp = 1, ahr 0 or null and args_missing 0
(with the scoring options ``--strings bfcl --types strict --rel-tol 0`` where this
tcbreplay has them). Prints the table and writes it to BENCHMARKS.md under "## BFCL
agreement" (other sections, and the section's notes, kept).
Exits 1 if ``--scorer bfcl`` disagrees anywhere, or the spec scorer where no deliberate
difference explains it.

    python -m bench.bfcl_bench [--out bench/out/bfcl]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import bfcl_reference as reference
from bench.bfcl_variants import DERIVED_FROM, VARIANTS, derived, form_of, render

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
SECTION = "## BFCL agreement"
NOTES = "### Notes"  # what people wrote below the generated part of the section: kept
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
COMMAND = "make bench-bfcl"
# the spec scorer's deliberate differences from BFCL's checker, by BFCL's error type on an
# answer the spec scorer finds clean (docs/bfcl.md, "BFCL in, BFCL out")
DIFFERENCES = {
    "cannot_find_match": "BFCL's parallel matcher is greedy: it refuses an order of calls that "
    "a valid pairing exists for; the spec scorer pairs an order-free group optimally",
    "missing_required": "BFCL requires every parameter the schema lists as required, also one "
    'its own answer marks optional (`""`); the spec scorer follows the answer',
}
# the variants whose answers BFCL's rules accept: where its checker refuses one, the manual's
# quirks say why
MEANT_VALID = (
    "exact", "another acceptable value", "case, space or punctuation", "optional left out",
    "optional supplied", "optional supplied as empty", "parallel calls reordered",
    "int for a float", "a float the answer lists for an integer",
)  # fmt: skip


def bfcl_files(out: Path) -> tuple[Path, Path, list[dict[str, Any]], list[dict[str, Any]]]:
    """BFCL's questions and possible answers of the four categories, each pair of files
    joined into one (their lines unchanged), then the questions derived from them
    (:func:`bench.bfcl_variants.derived`)."""
    import bfcl_eval

    data = Path(bfcl_eval.__file__).parent / "data"
    questions, answers = out / "questions.jsonl", out / "possible_answers.jsonl"
    q_lines, a_lines = [], []
    for category in CATEGORIES:
        q_lines += (data / f"BFCL_v4_{category}.json").read_text().splitlines()
        a_lines += (data / "possible_answer" / f"BFCL_v4_{category}.json").read_text().splitlines()
    q_lines, a_lines = [x for x in q_lines if x.strip()], [x for x in a_lines if x.strip()]
    answer_of = {a["id"]: a for a in map(json.loads, a_lines)}
    extra = derived([json.loads(x) for x in q_lines], answer_of)
    q_lines += [json.dumps(q) for q, _ in extra]
    a_lines += [json.dumps(a) for _, a in extra]
    questions.write_text("\n".join(q_lines) + "\n")
    answers.write_text("\n".join(a_lines) + "\n")
    return questions, answers, [json.loads(x) for x in q_lines], [json.loads(x) for x in a_lines]


def spec_options() -> Any:
    """The spec scorer's options: BFCL's string folding, strict types and exact numbers (as
    docs/bfcl.md gives them), once they exist."""
    from tcbreplay._score.options import ScoreOptions

    names = {f.name for f in dataclasses.fields(ScoreOptions)}
    if {"strings", "types"} <= names:
        options = ScoreOptions(rel_tol=0.0, strings="bfcl", types="strict")
        return options, "--strings bfcl --types strict --rel-tol 0"
    return ScoreOptions(), "defaults (no --strings/--types in this tcbreplay yet)"


Differ = list[tuple[str, str, str, bool]]  # sample id, variant, BFCL's error type, spec clean


def run(
    out: Path,
) -> tuple[
    list[dict[str, Any]], list[str], str, list[tuple[str, str, str]], Differ, tuple[int, int]
]:
    import polars as pl

    import tcbreplay
    from tcbreplay._importers.bfcl import load_bfcl_inputs
    from tcbreplay._importers.import_run import import_traces
    from tcbreplay._score.options import ScoreOptions

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    questions_file, answers_file, questions, answers = bfcl_files(out)
    answer_of = {a["id"]: a for a in answers}
    store = tcbreplay.Store(out / "store")
    inputs = load_bfcl_inputs(questions_file, answers_file)
    options, options_label = spec_options()
    rows, mismatches, refused = [], [], []
    differ: Differ = []
    for number, (variant, make) in enumerate(VARIANTS.items()):
        results = {}
        for question in questions:
            calls = make(question, answer_of[question["id"]])
            if calls is not None:
                results[question["id"]] = render(calls, form_of(len(results)), question)
        traces = out / f"results_{number:02d}.jsonl"
        traces.write_text(
            "".join(json.dumps({"id": k, "result": v}) + "\n" for k, v in results.items())
        )
        started = time.perf_counter()
        expected = {
            qid: reference.verdict(q, answer_of[qid], results[qid])
            for q in questions
            if (qid := q["id"]) in results
        }
        bfcl_s = time.perf_counter() - started
        run_id = f"bfcl-variant-{number:02d}"
        import_traces(inputs, traces, store, run_id, model="synthesized", fmt="bfcl")
        started = time.perf_counter()
        ours = tcbreplay.score_run(store, run_id, ScoreOptions(scorer="bfcl")).scores
        ours_s = time.perf_counter() - started
        spec = tcbreplay.score_run(store, run_id, options).scores
        judged = ours.join(spec, on="sample_id", suffix="_spec").filter(
            pl.col("sample_id").is_in(list(results))
        )
        agree = spec_agree = bfcl_valid = clean_n = 0
        for row in judged.iter_rows(named=True):
            valid, error_type = expected[row["sample_id"]]
            bfcl_valid += valid
            if not valid and variant in MEANT_VALID:
                refused.append((row["sample_id"], variant, error_type))
            if (row["valid"], row["error_type"]) == (valid, error_type):
                agree += 1
            else:
                mismatches.append(
                    f"{variant}: {row['sample_id']}: BFCL {valid} {error_type}, "
                    f"tcbreplay {row['valid']} {row['error_type']}"
                )
            clean = (
                row["tsa_spec"] == 1
                and row["tp_spec"] == 1
                and not row["ahr_spec"]
                and row["args_missing_spec"] == 0
            )
            clean_n += clean
            spec_agree += clean == valid
            if clean != valid:
                differ.append((row["sample_id"], variant, error_type or "", clean))
        rows.append(
            {"variant": variant, "samples": len(results), "bfcl_valid": bfcl_valid,
             "agree": agree, "spec_clean": clean_n, "spec_agree": spec_agree,
             "bfcl_s": bfcl_s, "ours_s": ours_s}
        )  # fmt: skip
    n_derived = sum(int(q["id"].rsplit("_", 1)[1]) >= DERIVED_FROM for q in questions)
    counts = (len(questions) - n_derived, n_derived)
    return rows, mismatches, options_label, refused, differ, counts


def differences(differ: Differ) -> tuple[str, int]:
    """The spec scorer's verdicts that are not BFCL's, counted per deliberate difference, and
    how many no difference explains."""
    counted: dict[str, list[str]] = {}
    unexplained = 0
    for qid, variant, error_type, clean in differ:
        kind = error_type.split(":")[-1]
        reason = DIFFERENCES.get(kind) if clean else None
        if reason is None:
            reason = f"unexplained: BFCL {'invalid' if clean else 'valid'} ({error_type or '-'})"
            unexplained += 1
        counted.setdefault(reason, []).append(f"{qid} ({variant})")
    lines = ["| difference | samples | which |", "|---|---|---|"]
    for reason, which in counted.items():
        lines.append(f"| {reason} | {len(which)} | {', '.join(which)} |")
    if not counted:
        lines.append("| none | 0 | |")
    return "\n".join(lines), unexplained


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| variant | samples | BFCL: valid | `--scorer bfcl` agrees | spec: clean "
        "| spec agrees with BFCL |",
        "|---|---|---|---|---|---|",
    ]
    total = {
        k: sum(r[k] for r in rows)
        for k in ("samples", "bfcl_valid", "agree", "spec_clean", "spec_agree")
    }
    for r in [*rows, {"variant": "**all**", **total}]:
        n = r["samples"]
        lines.append(
            f"| {r['variant']} | {n} | {r['bfcl_valid']} | {r['agree']} ({_pct(r['agree'], n)}) "
            f"| {r['spec_clean']} | {r['spec_agree']} ({_pct(r['spec_agree'], n)}) |"
        )
    return "\n".join(lines)


def _refusals(refused: list[tuple[str, str, str]]) -> str:
    """Per question, the variants BFCL refused and its error types."""
    by_question: dict[str, tuple[list[str], set[str]]] = {}
    for qid, variant, error_type in refused:
        variants, types = by_question.setdefault(qid, ([], set()))
        variants.append(variant)
        types.add(error_type.split(":")[-1])
    return "; ".join(
        f"{qid} ({', '.join(variants)}: {', '.join(sorted(types))})"
        for qid, (variants, types) in sorted(by_question.items())
    )


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "—"


def write_section(text: str, path: Path = BENCHMARKS_MD) -> None:
    """Replace the "## BFCL agreement" section of BENCHMARKS.md (or add it at the end),
    keeping its notes (from a line "### Notes" to the section's end): people write them."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = old.find(SECTION + "\n")
    if start < 0:
        path.write_text(old.rstrip("\n") + "\n\n" + text, encoding="utf-8")
        return
    end = old.find("\n## ", start + len(SECTION))
    rest = "" if end < 0 else old[end:]
    section = old[start:] if end < 0 else old[start:end]
    notes = section.find("\n" + NOTES + "\n")
    kept = "" if notes < 0 else "\n" + section[notes:].strip("\n") + "\n"
    path.write_text(old[:start] + text.rstrip("\n") + "\n" + kept + rest, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "bfcl")
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    args = parser.parse_args(argv)
    from importlib.metadata import version

    import bfcl_eval  # noqa: F401  (make bench-bfcl installs it)

    rows, mismatches, options_label, refused, differ, (n_bfcl, n_derived) = run(args.out)
    body = table(rows)
    print(body)
    differ_table, unexplained = differences(differ)
    print(differ_table)
    refusals = _refusals(refused)
    print("BFCL refuses, where its rules are meant to accept:", refusals)
    for line in mismatches[:20]:
        print(line)
    seconds = sum(r["bfcl_s"] for r in rows), sum(r["ours_s"] for r in rows)
    section = (
        f"{SECTION}\n\n`{COMMAND}` ({dt.date.today().isoformat()}, bfcl-eval "
        f"{version('bfcl-eval')}): BFCL's {n_bfcl:,} non-live questions "
        f"({', '.join(CATEGORIES)}) and {n_derived} derived from them (each a copy of one with "
        "an integer parameter's answer written as floats, which BFCL's data has nowhere: "
        "`derived` in `bench/bfcl_variants.py`), answered in variants synthesized from the "
        "possible answers (`bench/bfcl_variants.py`; a variant that does not apply to a "
        "question, such as reordering a single call, leaves it out). The answers take BFCL's "
        "three result forms in turn: calls with JSON-text arguments, calls with object "
        "arguments (both with dots in names rewritten as underscores, as providers do), and a "
        "Python call string.\n\n"
        "- *BFCL: valid*: its own checker's verdict (`bench/bfcl_reference.py`);\n"
        "- *`--scorer bfcl` agrees*: samples with the same verdict and the same error type;\n"
        "- *spec: clean*: samples the spec scorer scores tsa 1, tp 1, ahr 0 or null and "
        f"args_missing 0 (options: {options_label}); *spec agrees*: those where clean "
        "equals BFCL's valid.\n\n"
        f"{body}\n\n"
        "Where the spec scorer's verdict is not BFCL's, each sample is one of the deliberate "
        'differences the manual names (docs/bfcl.md, "BFCL in, BFCL out"), counted here (a '
        "sample no difference explains is listed as unexplained):\n\n"
        f"{differ_table}\n\n"
        "Where BFCL refuses an answer its rules are meant to accept, its data or its matcher is "
        'why (docs/bfcl.md, "BFCL\'s checker, exactly"): '
        + refusals
        + f".\n\nBFCL's checker took {seconds[0]:.1f} s over all samples, `--scorer bfcl` "
        f"{seconds[1]:.1f} s (scoring only, {len(rows)} runs).\n"
    )
    if not args.no_write:
        write_section(section)
    return 1 if mismatches or unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
