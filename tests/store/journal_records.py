"""Journal records as the writer writes them, for the store tests."""

from __future__ import annotations

from traces import ai_message, human_message

RUN = "run-1"


def record(sample_id: str, index: int, status: str = "ok", n_ai: int = 1, run_id: str = RUN):
    """A journal record as the recorder writes it: a human message and ``n_ai`` AI messages."""
    messages = [{"type": "human", "message": human_message(f"question {index}")}]
    for k in range(n_ai):
        messages.append(
            {
                "type": "ai",
                "message": ai_message(
                    [("add_numbers", {"a": k, "b": 1})], msg_id=f"{sample_id}-{k}"
                ),
                "input_tokens": 10,
                "output_tokens": 2,
                "total_tokens": 12,
                "latency_s": 0.01,
            }
        )
    return {
        "run_id": run_id,
        "sample_id": sample_id,
        "sample_index": index,
        "input": f"question {index}",
        "gold": [{"name": "add_numbers", "args": {"a": 0, "b": 1}}],
        "category": None,
        "status": status,
        "attempts": 1,
        "error_type": None if status == "ok" else "RuntimeError",
        "error": None if status == "ok" else "boom",
        "started_at": "2024-01-01T00:00:00+00:00",
        "finished_at": "2024-01-01T00:00:01+00:00",
        "duration_s": 1.0,
        "messages": messages,
    }
