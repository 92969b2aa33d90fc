"""BFCL's own AST checker, run on one answer the way BFCL's evaluator runs it.

``bfcl-eval`` is installed with ``pip install --no-deps bfcl-eval`` (``make install`` does
it): its checker imports ``bfcl_eval.constants.model_config``, which imports every
provider's SDK, and its decoders' modules import tree-sitter (for Java and JavaScript),
filelock, openai and overrides. Minimal stand-ins take the place of those not installed
while BFCL is imported, and leave ``sys.modules`` after; nothing on the Python path uses
them. The stand-in model configuration
has two models: ``tcbreplay-fc`` (a function-calling model whose provider rewrites dots
in names as underscores: ``underscore_to_dot``) and ``tcbreplay-prompt``.

:func:`verdict` then does what BFCL's ``_evaluate_single_ast_entry`` does for a Python
category: decode the result with a model handler's ``decode_ast`` (a string: the
prompting decoder; a list with JSON-text arguments: the OpenAI handler's; a list with
object arguments: the Gemini handler's), check its format, and run ``ast_checker``. Where
BFCL's checker raises, the verdict is ``checker_error`` (BFCL itself would stop).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any

FC_MODEL = "tcbreplay-fc"
PROMPT_MODEL = "tcbreplay-prompt"
VERSION = "2026.3.23"  # the bfcl-eval release the tests and the benchmark hold tcbreplay to


@dataclass
class _ModelConfig:
    underscore_to_dot: bool


class _Anything:
    """Stands in for a class of a package BFCL imports but the Python path never uses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _stand_in(name: str, **attrs: Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module


def _import_bfcl() -> types.SimpleNamespace:
    stand_ins = {
        "filelock": {"FileLock": _Anything},
        "tree_sitter": {"Language": _Anything, "Parser": _Anything},
        "tree_sitter_java": {"language": lambda: None},
        "tree_sitter_javascript": {"language": lambda: None},
        "openai": {"OpenAI": _Anything, "RateLimitError": type("RateLimitError", (Exception,), {})},
        "overrides": {"final": lambda f: f},
    }
    placed = ["bfcl_eval.constants.model_config"]
    _stand_in(
        placed[0],
        MODEL_CONFIG_MAPPING={FC_MODEL: _ModelConfig(True), PROMPT_MODEL: _ModelConfig(False)},
    )
    for name, attrs in stand_ins.items():
        try:
            __import__(name)
        except ImportError:  # not installed: stand in (an installed package is used)
            _stand_in(name, **attrs)
            placed.append(name)
    try:
        from bfcl_eval.constants.enums import Language, ReturnFormat
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.model_handler.api_inference.gemini import GeminiHandler
        from bfcl_eval.model_handler.api_inference.openai_completion import (
            OpenAICompletionsHandler,
        )
        from bfcl_eval.model_handler.utils import default_decode_ast_prompting
        from bfcl_eval.utils import is_function_calling_format_output
    finally:
        # BFCL's modules hold what they imported from the stand-ins; nothing else sees them
        for name in placed:
            sys.modules.pop(name, None)
    return types.SimpleNamespace(
        Language=Language,
        ReturnFormat=ReturnFormat,
        ast_checker=ast_checker,
        decode_openai_fc=OpenAICompletionsHandler.decode_ast,
        decode_gemini_fc=GeminiHandler.decode_ast,
        decode_prompting=default_decode_ast_prompting,
        is_function_calling_format_output=is_function_calling_format_output,
    )


_BFCL: types.SimpleNamespace | None = None


def bfcl() -> types.SimpleNamespace:
    """BFCL's functions, imported once."""
    global _BFCL
    if _BFCL is None:
        _BFCL = _import_bfcl()
    return _BFCL


def model_for(result: Any) -> str:
    """The stand-in model a result's form belongs to."""
    return PROMPT_MODEL if isinstance(result, str) else FC_MODEL


def decode(result: Any) -> Any:
    """The result decoded by the handler a model of its form has (raises as it does)."""
    b = bfcl()
    fc = types.SimpleNamespace(is_fc_model=True)
    if isinstance(result, str):
        return b.decode_prompting(result, b.ReturnFormat.PYTHON, False)
    # arguments as objects: a handler that takes them so (Gemini's); else OpenAI's, which
    # parses each call's arguments as JSON text
    if any(isinstance(c, dict) and any(isinstance(v, dict) for v in c.values()) for c in result):
        return b.decode_gemini_fc(fc, result, b.ReturnFormat.PYTHON, False)
    return b.decode_openai_fc(fc, result, b.ReturnFormat.PYTHON, False)


def verdict(
    question: dict[str, Any], answer: dict[str, Any], result: Any
) -> tuple[bool, str | None]:
    """BFCL's (valid, error_type) for ``result`` to ``question`` (its questions file's entry)
    with ``answer`` (its possible answers file's entry)."""
    b = bfcl()
    category = question["id"].rsplit("_", 1)[0]
    try:
        decoded = decode(result)
    except Exception:  # as BFCL's evaluator catches it
        return False, "ast_decoder:decoder_failed"
    if not b.is_function_calling_format_output(decoded):
        return False, "ast_decoder:decoder_wrong_output_format"
    try:
        checked = b.ast_checker(
            question["function"], decoded, answer["ground_truth"], b.Language.PYTHON,
            category, model_for(result),
        )  # fmt: skip
    except Exception:  # BFCL's evaluation would stop here
        return False, "checker_error"
    return bool(checked["valid"]), None if checked["valid"] else checked["error_type"]
