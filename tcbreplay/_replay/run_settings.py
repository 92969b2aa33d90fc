"""What a run's manifest says of the requests its model was sent, for replay: its sampling
settings, whether those are known (an import's are not) and taken (sim takes none), whether
its answers were asked for JSON, whether the answer format (a schema) each request asked for
is known, whether the system messages its agent sent were kept, and the fields of
Anthropic's ``output_config`` and OpenAI's ``reasoning`` its model was given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcbreplay._record.agent_factory import AGENT_FIELD
from tcbreplay._record.formats import asked_format, format_as_sent
from tcbreplay._replay.fingerprint import canonical_params, normalized
from tcbreplay._store.schema import FORMAT_KEPT, SYSTEM_KEPT

# providers whose runs record no sampling settings a request carried
_NO_PARAMS = ("import",)


@dataclass(frozen=True)
class RunSettings:
    """See the module; ``system_kept``: the run keeps the system messages its agent of
    one's own sent (SYSTEM_KEPT), ``system_known``: that, or it has no such agent."""

    params: dict[str, Any]
    params_known: bool
    sampled: bool
    json_asked: bool
    formats_known: bool
    system_kept: bool
    system_known: bool
    # the model settings' output_config but its format (ChatAnthropic's; its
    # reasoning_effort, or effort, as the effort it sends there)
    output_config: dict[str, Any]
    # the model settings' reasoning (ChatOpenAI's; its reasoning_effort as effort)
    reasoning: dict[str, Any]
    # its model's provider (``anthropic``, ``openai``, ...): the form an answer format is
    # compared in (:func:`~tcbreplay._record.formats.format_as_sent`)
    provider: str = ""


def run_settings(manifest: Mapping[str, Any]) -> RunSettings:
    """What ``manifest`` says (see the module). The answer format of a run's model settings
    (a Gemini schema) is its ``response_format``; those its calls asked for beside it are
    known for the built-in agent (it asks none) and for an agent of one's own whose run
    keeps them (FORMAT_KEPT)."""
    model = manifest.get("model") or {}
    known = model.get("provider") not in _NO_PARAMS
    settings = model.get("effective_settings") or model.get("settings") or {}
    taken = known and model.get("provider") != "sim"
    params = canonical_params(settings) if taken else {}
    if taken and "response_format" not in params:
        params.update(canonical_params({"response_format": asked_format(settings)}))
    provider = str(model.get("provider") or "")
    if "response_format" in params:  # (as its model sent it)
        params["response_format"] = normalized(format_as_sent(params["response_format"],
                                                              provider))  # fmt: skip
    agent = manifest.get(AGENT_FIELD)
    said = agent if isinstance(agent, dict) else {}
    kept = said.get(SYSTEM_KEPT) is True
    return RunSettings(
        params=params,
        params_known=known,
        sampled=model.get("provider") != "sim",
        json_asked=not known or _mime(settings) == "application/json",
        formats_known=taken and (not agent or said.get(FORMAT_KEPT) is True),
        system_kept=kept,
        system_known=not agent or kept,
        output_config=_output_config(settings) if taken else {},
        reasoning=_reasoning(settings) if taken else {},
        provider=provider,
    )


def _output_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the ``output_config`` ChatAnthropic of these settings sends, but its
    ``format`` (:func:`~tcbreplay._record.formats.asked_format` reads that)."""
    given = settings.get("output_config")
    out = {k: v for k, v in given.items() if k != "format"} if isinstance(given, dict) else {}
    effort = settings.get("reasoning_effort", settings.get("effort"))
    if effort is not None:
        out["effort"] = effort
    return out


def _reasoning(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the ``reasoning`` ChatOpenAI of these settings sends (its
    ``reasoning_effort`` as ``effort``)."""
    given = settings.get("reasoning")
    out = {k: v for k, v in given.items() if v is not None} if isinstance(given, dict) else {}
    if settings.get("reasoning_effort") is not None:
        out["effort"] = settings["reasoning_effort"]
    return out


def _mime(settings: Mapping[str, Any]) -> Any:
    """The answer's media type a model's settings ask for (ChatGoogleGenerativeAI's)."""
    return settings.get("response_mime_type", settings.get("responseMimeType"))
