"""BFCL's vendored question and answer files (tests/data/bfcl), as the BFCL tests read them."""

from __future__ import annotations

import json
from pathlib import Path

from bench.bfcl_variants import derived, left_out_only

DATA = Path(__file__).parent / "data" / "bfcl"
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")


def _entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


QUESTIONS = [q for c in CATEGORIES for q in _entries(DATA / f"BFCL_v4_{c}.json")]
ANSWERS = {
    a["id"]: a for c in CATEGORIES for a in _entries(DATA / "possible_answer" / f"BFCL_v4_{c}.json")
}
BY_ID = {q["id"]: q for q in QUESTIONS}
# the questions derived from the vendored ones for a rule BFCL's data does not exercise (an
# integer parameter whose answer lists floats), or the vendored ones do not (an optional
# parameter with a declared default answered "" alone), and all questions with them
DERIVED = derived(QUESTIONS, ANSWERS) + left_out_only(QUESTIONS, ANSWERS)
ALL_QUESTIONS = QUESTIONS + [q for q, _ in DERIVED]
ALL_ANSWERS = {**ANSWERS, **{a["id"]: a for _, a in DERIVED}}


def joined_files(root: Path, with_derived: bool = False) -> tuple[Path, Path]:
    """The vendored categories' questions and answers, each joined into one file (then the
    derived ones, ``with_derived``)."""
    questions, answers = root / "questions.jsonl", root / "answers.jsonl"
    chosen = ALL_QUESTIONS if with_derived else QUESTIONS
    questions.write_text("".join(json.dumps(q) + "\n" for q in chosen))
    answers.write_text("".join(json.dumps(ALL_ANSWERS[q["id"]]) + "\n" for q in chosen))
    return questions, answers
