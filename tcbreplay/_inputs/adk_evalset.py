"""Google ADK's eval sets (``*.evalset.json``) as datasets: each eval case a dataset entry whose
gold calls are its expected tool trajectory.

An eval set is ``{"eval_set_id", "name", "eval_cases": [...]}`` (ADK writes snake_case; its
models read camelCase too). A case ``{"eval_id", "conversation": [invocation, ...],
"session_input"}`` is an entry: its id the ``eval_id``, its input the first invocation's
``user_content`` text (its parts' texts joined), its gold calls every invocation's
``intermediate_data.tool_uses`` (``{"name", "args"}``) in order, as the agentevals CLI compares
a trace's tool trajectory with them; its metadata the eval set's id, the number of
invocations, each later invocation's user text (``turns``) and the last ``final_response``
text (``final_response``). A case that is a ``conversation_scenario`` (a simulated user, no
scripted turns) has its ``starting_prompt`` as input and no gold calls.
"""

from __future__ import annotations

from typing import Any

from tcbreplay.errors import DatasetError


def is_evalset(doc: Any) -> bool:
    """Whether a JSON document is an ADK eval set."""
    return isinstance(doc, dict) and ("eval_cases" in doc or "evalCases" in doc)


def entries(doc: dict[str, Any], label: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The eval set's cases as dataset entries, and where each is (for errors)."""
    cases = _get(doc, "eval_cases")
    if not isinstance(cases, list):
        raise DatasetError(f"{label}: eval_cases must be a list of eval cases")
    set_id = _get(doc, "eval_set_id")
    out, where = [], []
    for i, case in enumerate(cases):
        place = f"{label}: eval_cases[{i}]"
        if not isinstance(case, dict):
            raise DatasetError(f"{place}: an eval case must be an object")
        out.append(_entry(case, set_id, place))
        where.append(f"eval_cases[{i}]")
    return out, where


def _entry(case: dict[str, Any], set_id: Any, place: str) -> dict[str, Any]:
    case_id = _get(case, "eval_id")
    if not isinstance(case_id, str | int) or isinstance(case_id, bool):
        raise DatasetError(f"{place}: eval_id must be a string")
    conversation = _get(case, "conversation") or []
    if not isinstance(conversation, list):
        raise DatasetError(f"{place}: conversation must be a list of invocations")
    metadata: dict[str, Any] = {"eval_set_id": set_id} if set_id is not None else {}
    if not conversation:
        scenario = _get(case, "conversation_scenario") or {}
        prompt = _get(scenario, "starting_prompt") if isinstance(scenario, dict) else None
        metadata["conversation_scenario"] = True
        return {"id": case_id, "input": str(prompt or ""), "target": [], "metadata": metadata}
    texts, target = [], []
    final = None
    for j, invocation in enumerate(conversation):
        where = f"{place}: conversation[{j}]"
        if not isinstance(invocation, dict):
            raise DatasetError(f"{where}: an invocation must be an object")
        texts.append(_text(_get(invocation, "user_content")))
        data = _get(invocation, "intermediate_data") or {}
        uses = _get(data, "tool_uses") if isinstance(data, dict) else None
        for k, use in enumerate(uses or []):
            if not isinstance(use, dict) or not isinstance(use.get("name"), str):
                raise DatasetError(f"{where}: tool_uses[{k}] needs a name")
            args = use.get("args") or {}
            if not isinstance(args, dict):
                raise DatasetError(f"{where}: tool_uses[{k}].args must be an object")
            target.append({"name": use["name"], "args": args})
        response = _get(invocation, "final_response")
        if response:
            final = _text(response)
    metadata["invocations"] = len(conversation)
    if len(texts) > 1:
        metadata["turns"] = texts[1:]
    if final is not None:
        metadata["final_response"] = final
    return {"id": case_id, "input": texts[0], "target": target, "metadata": metadata}


def _text(content: Any) -> str:
    """A ``Content``'s text: its parts' texts joined."""
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts") or []
    return "".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _get(obj: dict[str, Any], key: str) -> Any:
    """A field by its snake_case name, or its camelCase alias."""
    if key in obj:
        return obj[key]
    head, *rest = key.split("_")
    return obj.get(head + "".join(w.capitalize() for w in rest))
