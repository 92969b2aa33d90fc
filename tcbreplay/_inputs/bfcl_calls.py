"""A model's answer to a BFCL question, decoded into calls as BFCL's evaluator decodes it.

The Berkeley Function Calling Leaderboard keeps one ``result`` per question, in one of
two forms:

- a list of calls ``[{function_name: arguments}, ...]`` (function-calling models), the
  arguments a JSON object or JSON text, as providers return them;
- a string of Python calls ``"[f(a=1), g(b='x')]"`` (prompting models).

Both become ``[{function_name: {param: value}}, ...]``, the shape BFCL's AST checker takes.
The importer stores the calls (made JSON-safe) for the other scorers; the ``bfcl`` scorer
decodes the stored result again, since a call string's values are Python values (a tuple
is not a list to BFCL) that JSON cannot keep apart.

The text form follows what BFCL's prompting decoder does, its quirks included: keyword
arguments only (positional ones are dropped), a name standing alone (``unit=inches``) is
the string ``"inches"``, a call with no keyword arguments inside an argument is its
source text, a call with some is a nested ``{name: {...}}``, a unary operator on a
number negates it whatever the operator (``+5`` and ``~5`` read as ``-5``), and a
subscript is its source text. Where BFCL evaluates an arithmetic expression with
Python's ``eval`` (in its own module, names and calls included), tcbreplay evaluates
only literals and operators, and refuses results beyond a million bits; an expression
naming anything is undecodable.
"""

from __future__ import annotations

import ast
import json
import operator
import warnings
from typing import Any

# BFCL's error types for answers its decoder cannot take
DECODER_FAILED = "ast_decoder:decoder_failed"
WRONG_OUTPUT_FORMAT = "ast_decoder:decoder_wrong_output_format"

# the largest integer result, in bits, that arithmetic in a call string may produce
_MAX_BITS = 1_000_000


class DecodeError(ValueError):
    """An answer BFCL's decoder cannot turn into calls, with BFCL's error type."""

    def __init__(self, message: str, error_type: str = DECODER_FAILED) -> None:
        super().__init__(message)
        self.error_type = error_type


Calls = list[dict[Any, Any]]


def decode_result(result: Any, renamed: dict[str, str] | None = None) -> Calls:
    """A stored result as BFCL's checker receives it: decoded, renamed, format-checked.

    ``renamed`` maps names a provider rewrote (``spotify_play``) back to the question's
    (``spotify.play``). Raises :class:`DecodeError` where BFCL's evaluator reports a
    decoder error.
    """
    if isinstance(result, str):
        calls = decode_text(result)
    elif isinstance(result, list):
        calls = decode_list(result)
    else:
        raise DecodeError(f"a result is a list of calls or a string, not {type(result).__name__}")
    if renamed:
        calls = [
            {renamed.get(k, k) if isinstance(k, str) else k: v for k, v in c.items()} for c in calls
        ]
    check_format(calls)
    return calls


def decode_list(result: list[Any]) -> Calls:
    """Calls of a function-calling model: each item's first key is the function's name and its
    value the arguments, an object or JSON text (as BFCL's function-calling handlers read
    them; an item's other keys are ignored, as they ignore them)."""
    calls = []
    for k, item in enumerate(result):
        if not isinstance(item, dict) or not item:
            raise DecodeError(f"call {k} is not an object naming a function")
        name = next(iter(item))
        args = item[name]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError) as exc:
                raise DecodeError(f"call {k} ({name}): arguments are not JSON: {exc}") from None
        elif not isinstance(args, dict):
            raise DecodeError(f"call {k} ({name}): arguments are neither an object nor JSON text")
        calls.append({name: args})
    return calls


def check_format(calls: Calls) -> None:
    """BFCL's check of decoded calls: a list of one-key objects whose value is an object."""
    for k, call in enumerate(calls):
        if len(call) != 1 or type(next(iter(call.values()))) is not dict:
            raise DecodeError(
                f"call {k}: not one function name with an object of arguments",
                WRONG_OUTPUT_FORMAT,
            )


def decode_text(text: str) -> Calls:
    """Calls of a prompting model: a Python list of calls (the brackets may be left out)."""
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text += "]"
    text = text.strip().strip("'")
    try:
        with warnings.catch_warnings():  # an odd escape in a string is the model's business
            warnings.simplefilter("ignore")
            body = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"not a Python list of calls: {exc}") from None
    nodes: list[ast.expr]
    if isinstance(body, ast.Call):
        nodes = [body]
    elif isinstance(body, (ast.List, ast.Tuple, ast.Set)):
        nodes = body.elts
    else:
        raise DecodeError(f"not a list of calls: {type(body).__name__}")
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call):
            raise DecodeError(f"not a call: {_source(node)}")
        calls.append(_call(node))
    return calls


def _call(node: ast.Call) -> dict[Any, Any]:
    """``{name: {keyword: value}}``; the name joins the attributes down to the first plain
    name (``a.b.c``), and positional arguments are dropped."""
    parts = []
    func = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    # a ** argument has no keyword: it is kept under None, a key no function declares
    args = {kw.arg: _value(kw.value) for kw in node.keywords}
    return {".".join(reversed(parts)): args}


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # BFCL negates the operand's value whatever the operator
        operand = node.operand
        if isinstance(operand, ast.Constant) and isinstance(operand.value, (int, float, complex)):
            return -operand.value
        raise DecodeError(f"cannot read {_source(node)}")
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise DecodeError(f"cannot read {_source(node)}")
        try:
            return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
        except TypeError as exc:  # a key that cannot be one (a list)
            raise DecodeError(f"cannot read {_source(node)}: {exc}") from None
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return _source(node) if not node.keywords else _call(node)
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.Subscript):
        return f"{_source(node.value)}[{_source(node.slice)}]"
    raise DecodeError(f"cannot read {type(node).__name__}: {_source(node)}")


_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_,
    ast.MatMult: operator.matmul,
}  # fmt: skip
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
          ast.Invert: operator.invert}  # fmt: skip


_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip  (not ``is``: whether two equal literals are one object is up to the compiler)
_CONVERSIONS = {-1: lambda v: v, ord("s"): str, ord("r"): repr, ord("a"): ascii}


def _arithmetic(node: ast.expr) -> Any:
    """An expression of literals and operators, evaluated as Python would (inside it, unary
    operators are Python's own): what BFCL's ``eval`` gives wherever it names nothing."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_arithmetic(e) for e in node.elts]
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        return _apply(kind, items, node=node)
    if isinstance(node, ast.Dict) and None not in node.keys:
        keys = [_arithmetic(k) for k in node.keys if k is not None]
        pairs = list(zip(keys, [_arithmetic(v) for v in node.values], strict=True))
        return _apply(dict, pairs, node=node)
    if isinstance(node, ast.UnaryOp):
        return _apply(_UNARY[type(node.op)], _arithmetic(node.operand), node=node)
    if isinstance(node, ast.BinOp):
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        _check_size(node.op, left, right, node)
        return _apply(_BINARY[type(node.op)], left, right, node=node)
    if isinstance(node, ast.BoolOp):  # short-circuits as Python does
        value = _arithmetic(node.values[0])
        for operand in node.values[1:]:
            if bool(value) != isinstance(node.op, ast.And):
                return value
            value = _arithmetic(operand)
        return value
    if isinstance(node, ast.Compare):
        left = _arithmetic(node.left)
        for op, operand in zip(node.ops, node.comparators, strict=True):
            if type(op) not in _COMPARE:
                raise DecodeError(f"cannot evaluate {_source(node)}: an identity comparison")
            right = _arithmetic(operand)
            if not _apply(_COMPARE[type(op)], left, right, node=node):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _arithmetic(node.body if _arithmetic(node.test) else node.orelse)
    if isinstance(node, ast.JoinedStr):
        return "".join(str(_arithmetic(part)) for part in node.values)
    if isinstance(node, ast.FormattedValue):
        value = _apply(_CONVERSIONS[node.conversion], _arithmetic(node.value), node=node)
        spec = "" if node.format_spec is None else _arithmetic(node.format_spec)
        return _apply(format, value, spec, node=node)
    if isinstance(node, ast.Subscript):
        return _apply(operator.getitem, _arithmetic(node.value), _arithmetic(node.slice), node=node)
    if isinstance(node, ast.Slice):
        parts = (node.lower, node.upper, node.step)
        return slice(*(None if p is None else _arithmetic(p) for p in parts))
    raise DecodeError(f"cannot evaluate {_source(node)}: only literals and operators are")


def _apply(fn: Any, *args: Any, node: ast.expr) -> Any:
    try:
        return fn(*args)
    except (ArithmeticError, TypeError, ValueError, LookupError) as exc:
        raise DecodeError(f"cannot evaluate {_source(node)}: {exc}") from None


def _check_size(op: ast.operator, left: Any, right: Any, node: ast.expr) -> None:
    """Refuse an operation whose result would pass the size limit (``9**9**9``)."""
    ints = all(isinstance(v, int) for v in (left, right))
    if isinstance(op, ast.Pow) and ints and right > 0:
        bits = max(1, abs(left).bit_length()) * right
    elif isinstance(op, ast.LShift) and ints and right > 0:
        bits = abs(left).bit_length() + right
    elif isinstance(op, ast.Mult) and (isinstance(left, int) or isinstance(right, int)):
        seq, times = (right, left) if isinstance(left, int) else (left, right)
        if not isinstance(seq, (str, bytes, list, tuple)):
            return
        bits = len(seq) * max(0, times) * 8
    else:
        return
    if bits > _MAX_BITS:
        raise DecodeError(f"cannot evaluate {_source(node)}: the result would be too large")


def _source(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except (ValueError, RecursionError):
        return type(node).__name__


def json_safe(value: Any) -> Any:
    """A decoded value as JSON can hold it: tuples and sets as lists, other keys and values
    JSON has no form for (bytes, complex numbers, a ``**`` argument's key) as text."""
    if isinstance(value, dict):
        return {_key(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float)):
        return value
    return repr(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    return "**" if key is None else json.dumps(json_safe(key))
