"""Make ``shop.evalset.json``: a Google ADK eval set, written by ADK's own models
(``google.adk.evaluation``: ``EvalSet``, ``EvalCase``, ``Invocation``, ``IntermediateData``,
as ``adk eval`` and ADK's web UI save them), for the three questions of the openai-v2
fixtures (``make_openai_v2.py``): each case's expected tool trajectory the built-in
benchmark's gold calls for its question.

ADK is installed into a temporary virtual environment (it is no dependency of tcbreplay's),
unless ``ADK_PYTHON`` names a Python that has it. Run from the repository's root:
``.venv/bin/python tests/data/otel/make_adk_evalset.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent.parent
CASES = ["mul-7-by-8", "price-pen", "backpack-bottle-pen"]
ANSWERS = {
    "mul-7-by-8": "7 times 8 is 56.00.",
    "price-pen": "A pen costs 1.20.",
    "backpack-bottle-pen": "That is 34.20.",
}

WRITE = r"""
import json, sys
from google.adk.evaluation.eval_case import EvalCase, IntermediateData, Invocation
from google.adk.evaluation.eval_set import EvalSet
from google.genai import types

cases = []
for case in json.loads(sys.argv[1]):
    invocation = Invocation(
        invocation_id=f"inv-{case['id']}",
        user_content=types.Content(role="user", parts=[types.Part(text=case["input"])]),
        final_response=types.Content(role="model", parts=[types.Part(text=case["answer"])]),
        intermediate_data=IntermediateData(
            tool_uses=[types.FunctionCall(name=c["name"], args=c["args"]) for c in case["target"]]
        ),
    )
    cases.append(EvalCase(eval_id=case["id"], conversation=[invocation]))
eval_set = EvalSet(eval_set_id="shop", name="shop", eval_cases=cases, creation_timestamp=0.0)
print(eval_set.model_dump_json(indent=2))
"""


def main() -> None:
    dataset = json.loads((ROOT / "tcbreplay/_inputs/benchmarks/tool_call/dataset.json").read_text())
    by_id = {e["id"]: e for e in dataset}
    cases = [{**by_id[k], "answer": ANSWERS[k]} for k in CASES]
    with tempfile.TemporaryDirectory() as tmp:
        python = os.environ.get("ADK_PYTHON", "")
        if not python:
            venv = Path(tmp) / "adk"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            python = str(venv / "bin" / "python")
            subprocess.run([python, "-m", "pip", "install", "-q", "google-adk"], check=True)
        out = subprocess.run(
            [python, "-c", WRITE, json.dumps(cases)], capture_output=True, text=True, check=True
        )
    (HERE / "shop.evalset.json").write_text(out.stdout)
    print("wrote shop.evalset.json")


if __name__ == "__main__":
    main()
