"""BFCL's vendored question and answer files (tests/data/bfcl), as the BFCL tests read them."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data" / "bfcl"
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")


def _entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


QUESTIONS = [q for c in CATEGORIES for q in _entries(DATA / f"BFCL_v4_{c}.json")]
ANSWERS = {
    a["id"]: a for c in CATEGORIES for a in _entries(DATA / "possible_answer" / f"BFCL_v4_{c}.json")
}
BY_ID = {q["id"]: q for q in QUESTIONS}


def joined_files(root: Path) -> tuple[Path, Path]:
    """The vendored categories' questions and answers, each joined into one file."""
    questions, answers = root / "questions.jsonl", root / "answers.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    answers.write_text("".join(json.dumps(a) + "\n" for a in ANSWERS.values()))
    return questions, answers
