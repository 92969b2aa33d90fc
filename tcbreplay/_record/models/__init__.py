"""Model strings: ``PROVIDER:NAME`` through LangChain's ``init_chat_model``, or ``sim``.

A :class:`ModelChoice` is what a run records about its model: the id as given, the
provider, the name and every non-secret setting. Secrets come from the
environment only and are never part of a model choice.
"""

from __future__ import annotations

import difflib
import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tcbreplay import _json
from tcbreplay._model_secrets import SECRETS_HINT, find_secrets, refuse_model_secrets
from tcbreplay._record.models.anthropic_calls import raise_error_bodies
from tcbreplay._record.models.gemini_bodies import raise_gemini_error_bodies
from tcbreplay._record.models.openai_calls import keep_non_object_arguments_invalid
from tcbreplay._record.models.streamed_bodies import raise_streamed_error_bodies
from tcbreplay._secrets import register
from tcbreplay.errors import ModelError

DEFAULT_MODEL = "google_genai:gemini-2.5-flash"

# Environment variables that hold each provider's key, in the order LangChain reads them.
KEY_VARIABLES = {
    "google_genai": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
}

# Providers whose SDK retries by itself unless told not to (``max_retries``).
SDK_RETRIES_OFF = frozenset({"google_genai", "openai", "anthropic"})

# Model settings that change how requests travel, not what the model answers: a run is
# resumed with other values of these (a proxy's URL, a longer timeout) as the same run.
TRANSPORT_SETTINGS = frozenset(
    {"base_url", "timeout", "request_timeout", "max_retries", "client_args", "additional_headers"}
)


@dataclass(frozen=True)
class ModelChoice:
    """A resolved model string and its recorded, non-secret settings."""

    id: str
    provider: str
    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    # the option that gave it (--model, or replay's --then), for errors to name
    option: str = field(default="--model", compare=False)

    @property
    def simulated(self) -> bool:
        return self.provider == "sim"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.provider,
            "name": self.name,
            "settings": self.settings,
            "simulated": self.simulated,
        }


def parse_model(
    model: str, options: Mapping[str, str] | None = None, option: str = "--model"
) -> ModelChoice:
    """Resolve ``sim[:k=v,...]`` or ``PROVIDER:NAME`` plus ``--model-option`` settings
    (``option``: the option that gave ``model``, which errors name)."""
    hint = secrets_hint(model.partition(":")[0])
    refuse_model_secrets(model, option, hint)
    options = dict(options or {})
    parsed = {key: _parse_value(key, text) for key, text in options.items()}
    for key, value in parsed.items():
        _refuse_secrets(key, value, hint)
    if model == "sim" or model.startswith("sim:"):
        from tcbreplay._record.models.sim import parse_sim_options

        # --model-option pairs get the checks of sim options given in the model string
        settings = parse_sim_options(model.partition(":")[2], options)
        return ModelChoice(model, "sim", "sim", settings, option)
    settings = parsed
    provider, sep, name = model.partition(":")
    if not sep or not provider or not name:
        raise ModelError(
            f"{option} {model!r}: expected PROVIDER:NAME (for example {DEFAULT_MODEL}) or sim"
        )
    return ModelChoice(model, provider, name, settings, option)


def model_from_manifest(model: Mapping[str, Any]) -> ModelChoice:
    """The model choice a run was recorded with."""
    return ModelChoice(
        id=model["id"],
        provider=model["provider"],
        name=model["name"],
        settings=dict(model.get("settings") or {}),
    )


def with_transport(choice: ModelChoice, options: Mapping[str, str]) -> ModelChoice:
    """``choice`` with corrected transport settings (``--model-option`` with ``--resume``):
    only those, which leave the run's inputs as they were, may change."""
    other = sorted(k for k in options if k not in TRANSPORT_SETTINGS)
    if other:
        raise ModelError(
            f"--model-option {other[0]}: a resumed run keeps its model settings; only how "
            f"requests travel may change ({', '.join(sorted(TRANSPORT_SETTINGS))})",
            hint="to record with other model settings, start another run (--run-id)",
        )
    if options and choice.simulated:
        raise ModelError("--model-option: the sim model has no transport settings")
    parsed = {key: _parse_value(key, text) for key, text in options.items()}
    for key, value in parsed.items():
        _refuse_secrets(key, value, secrets_hint(choice.provider))
    return ModelChoice(choice.id, choice.provider, choice.name, {**choice.settings, **parsed},
                       choice.option)  # fmt: skip


def check_credentials(choice: ModelChoice, environ: Mapping[str, str] | None = None) -> None:
    """Fail early, in one line, when the provider's API key is not in the environment."""
    environ = os.environ if environ is None else environ
    names = KEY_VARIABLES.get(choice.provider)
    if not names or any(environ.get(n) for n in names):
        return
    raise ModelError(
        f"{names[0]} is not set: {choice.option} {choice.id} needs an API key",
        hint=f"export {names[0]}=... (it is never recorded), or use --model sim to record offline",
    )


def build_chat_model(choice: ModelChoice, samples: Mapping[str, Any] | None = None) -> Any:
    """A LangChain chat model for the model choice (``samples``: the sim's gold plans)."""
    if choice.simulated:
        from tcbreplay._record.models.sim import SimChatModel

        return SimChatModel.from_settings(choice.settings, samples or {})
    from langchain.chat_models import init_chat_model

    # settings recorded by an older version may hold a secret: keep it out of error texts
    register(f for key, value in choice.settings.items() for f in find_secrets(key, value))
    kwargs = dict(choice.settings)
    # langchain_core reads a failed call's response with a synchronous .json(), which on
    # google-genai's aiohttp response is a coroutine never awaited: Python printed a
    # RuntimeWarning for every failed call, past --quiet (the error itself is kept)
    warnings.filterwarnings(
        "ignore", "coroutine 'ClientResponse.json' was never awaited", RuntimeWarning
    )
    if choice.provider in SDK_RETRIES_OFF:
        # The record runner retries with backoff itself; SDK retries would hide attempts
        # (and multiply them: a refused connection would be tried 9 times, not 3).
        kwargs.setdefault("max_retries", 0)
    try:
        model = init_chat_model(choice.name, model_provider=choice.provider, **kwargs)
    except ImportError as exc:
        raise ModelError(f"{choice.option} {choice.id}: {exc}") from exc
    except (ValueError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0]
        hint = provider_hint(choice) if first.startswith("Unsupported provider") else None
        raise ModelError(f"{choice.option} {choice.id}: {first}", hint=hint) from exc
    # a tool call whose arguments are no JSON object is the agent's, not a lost reply
    keep_non_object_arguments_invalid()
    # a 200 whose body is an error is that error, not a reply that fails to be read
    raise_error_bodies()
    raise_streamed_error_bodies()
    raise_gemini_error_bodies()
    return model


# names people give providers that LangChain knows by another
_PROVIDER_ALIASES = {
    "google": "google_genai",
    "gemini": "google_genai",
    "genai": "google_genai",
    "googleai": "google_genai",
    "google-genai": "google_genai",
    "vertex": "google_vertexai",
    "vertexai": "google_vertexai",
    "claude": "anthropic",
    "azure": "azure_openai",
    "mistral": "mistralai",
}


def provider_hint(choice: ModelChoice) -> str | None:
    """'did you mean google_genai:...?' for a provider LangChain does not know."""
    try:
        from langchain.chat_models.base import _BUILTIN_PROVIDERS as known
    except ImportError:  # a LangChain that keeps them elsewhere: no suggestion
        known = {}
    wanted = choice.provider.lower()
    close = _PROVIDER_ALIASES.get(wanted) or next(
        iter(difflib.get_close_matches(wanted, list(known), n=1, cutoff=0.6)), None
    )
    if close is None:
        return f"providers LangChain knows: {', '.join(sorted(known))}" if known else None
    return f"did you mean {choice.option} {close}:{choice.name}?"


def effective_settings(choice: ModelChoice, chat_model: Any) -> dict[str, Any]:
    """Settings as recorded: what was given plus the model's own non-secret defaults."""
    out = dict(choice.settings)
    for attr in ("temperature", "top_p", "top_k", "max_output_tokens", "max_tokens", "seed"):
        value = getattr(chat_model, attr, None)
        if value is not None and attr not in out and _json_safe(value):
            out[attr] = value
    return out


def model_profile(chat_model: Any) -> dict[str, Any] | None:
    """The chat model's profile as LangChain reports it (``model.profile``: what the model
    can do, which ``create_agent`` reads to choose how to ask for a ``response_format``),
    its JSON values only; None when it reports none. A replay's recorded model reports it
    (see :class:`tcbreplay._replay.model.RecordedChatModel`)."""
    profile = getattr(chat_model, "profile", None)
    if not isinstance(profile, Mapping):
        return None
    return {str(key): value for key, value in profile.items() if _json_safe(value)}


def _parse_value(key: str, text: str) -> Any:
    """An option's value: JSON when it parses as JSON, else the text itself."""
    try:
        return _json.loads(text)
    except _json.LimitError as exc:
        raise ModelError(f"--model-option {key}: {exc.problem}", hint=_json.HINT) from None
    except json.JSONDecodeError:
        return text


def secrets_hint(provider: str) -> str:
    """Where a secret given in a model string or option goes instead, for ``provider``."""
    if provider == "sim":
        return "the sim model takes no secret; a provider's key goes in the environment"
    names = KEY_VARIABLES.get(provider)
    if not names:
        return SECRETS_HINT
    variables = " or ".join(names)
    return f"pass secrets by environment ({variables} for {provider}); they are never recorded"


def _refuse_secrets(key: str, value: Any, hint: str = SECRETS_HINT) -> None:
    """Refuse an option that holds a secret anywhere: it would be written into the manifest."""
    finding = next(find_secrets(key, value), None)
    if finding is None:
        return
    if finding.path == key and finding.why.endswith("secret's name"):
        problem = ""  # the option's own name, as in api_key=...
    else:
        where = f" (at {finding.path})" if finding.path != key else ""
        problem = f" {finding.why}{where};"
    raise ModelError(
        f"--model-option {key}:{problem} secrets are not accepted as options", hint=hint
    )


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
