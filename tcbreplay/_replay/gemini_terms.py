"""What a Gemini request can say of a recorded run's tools and tool results: the terms
``serve``'s Gemini wire compares them in.

A recording keeps its tools' JSON schemas and its tools' outputs as LangChain had them; a
Gemini client sends less. langchain-google-genai drops ``default``, ``minimum``,
``maximum`` and ``additionalProperties``, sends ``nullable: true`` for a union with null
(of the last other alternative), and a property with no type as a string; google-genai
with ``parameters=`` keeps some of these, with ``parameters_json_schema=`` all. A tool
result goes as ``functionResponse.response``: the output's JSON where it is JSON text, as
it is otherwise, and ``{"output": value}`` where that is no object (so ``"42\\n"`` goes as
``{"output": 42}``).

So both sides are put in one form before they are compared, the *terms*:

- a schema keeps ``type`` (lower case), ``properties``, ``required``, ``items``, ``enum``,
  ``description``, ``anyOf`` and ``nullable``; every other keyword is left out;
- a union with null (``anyOf`` holding ``{"type": "null"}``, or a list of types holding
  ``"null"``) is its last other alternative with ``nullable: true``;
- a property or item with neither type nor ``anyOf`` is a string;
- a property named ``title`` whose description is ``title is {...}`` has none (LangChain's
  client makes that description up for such a property that has none);
- where the request has it so (as langchain-google-genai sends a property), a recorded
  object property with neither properties nor ``additionalProperties`` is a string, and a
  recorded object property's ``required`` its properties without a default (or, deeper
  down, all of them), and a recorded list of types (``["integer", "null"]``) a string;
- where the request sends an array's items as one type (no ``anyOf``), a recorded item's
  union is its last alternative's type: langchain-google-genai sends nothing else of it (a
  ``list[Model | None]``'s items go as ``{"type": "OBJECT", "nullable": true}``), so the
  alternative's ``properties``, ``required``, ``items``, ``enum`` and ``description`` are
  left out where the request's item holds none of them;
- a schema's local ``$ref``s (``#/$defs/Name``, as pydantic's ``model_json_schema`` writes
  them) are what they name;
- a tool output is the ``response`` object a client sends for it (a list of text blocks its
  text, as the recording keeps it); ``{"result": value}`` alone, as google-genai's automatic
  function calling sends a function's value, is that value's.

Compared with the other side (``like``: the schema at the same place on the other side),
what both sides say is kept too: a keyword that both hold (``format``, ``minimum``,
``default``, ``additionalProperties``, as google-genai sends them) is compared, and a union
(``anyOf``) is kept whole but where the request sends none there, where the recorded one is
its last alternative (as LangChain's client sends a union with null, or an item's union).

What still differs in these terms (a changed type, description or enum, a parameter added
or removed, another output) is a difference; what differs only in what Gemini's clients
leave out is none.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tcbreplay._replay.fingerprint import content as message_content
from tcbreplay._replay.fingerprint import normalized

# the schema keywords every Gemini client sends
KEPT = ("type", "properties", "required", "items", "enum", "description", "anyOf", "nullable")
# what langchain-google-genai sends of an item's union's alternative: its type alone
_ITEM_UNION_UNSENT = ("properties", "required", "items", "enum", "description")


def _camel(name: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and str(schema.get("type", "")).lower() == "null"


def _said(like: Any, key: str, k: int | None = None) -> Any:
    """The other side's schema under ``key`` (its ``k``-th where a list) or None."""
    found = like.get(key) if isinstance(like, dict) else None
    if k is None:
        return found
    return found[k] if isinstance(found, list) and k < len(found) else None


def _merged(like: dict[str, Any] | None) -> dict[str, Any] | None:
    """The other side's schema at a union with null it sends, merged with its last other
    alternative (as a union with null is read)."""
    alternatives = _said(like, "anyOf")
    if like is None or not isinstance(alternatives, list):
        return like
    others = [a for a in alternatives if not _is_null(a) and isinstance(a, dict)]
    merged = {k: v for k, v in like.items() if k != "anyOf"}
    if others:
        merged.update({_camel(str(k)): v for k, v in others[-1].items()})
    return merged


def schema_terms(
    schema: Any, nested: bool = False, like: Any = None, recorded: bool = False,
    item: bool = False,
) -> Any:  # fmt: skip
    """A JSON schema (or Gemini's, in either case of keys and types) in the terms (see the
    module); ``nested``: a property's or an item's (``item``: an array's items);
    ``like``: the schema at its place on the side it is compared with; ``recorded``: the
    recorded side's (compared with a request's)."""
    if not isinstance(schema, dict):
        return normalized(schema)
    given = {_camel(str(k)): v for k, v in schema.items()}
    like = {_camel(str(k)): v for k, v in like.items()} if isinstance(like, dict) else None
    nullable = given.get("nullable") is True
    kind = given.get("type")
    listed = isinstance(kind, list) and len(kind) > 1
    if isinstance(kind, list):
        kinds = [str(k).lower() for k in kind if str(k).lower() != "null"]
        nullable = nullable or len(kinds) < len(kind)
        given["type"] = kinds[-1] if len(kinds) == 1 else kinds or None
    alternatives = given.get("anyOf")
    others = [a for a in alternatives if not _is_null(a)] if isinstance(alternatives, list) else []
    with_null = isinstance(alternatives, list) and len(others) < len(alternatives)
    if like is None:  # (alone: a union with null is its last other alternative)
        last = with_null
    else:  # (see the module; a union of one type with null is that type, nullable)
        sent = isinstance(_said(like, "anyOf"), list)
        last = (with_null and len(others) < 2) or (recorded and bool(others) and not sent)
    if isinstance(alternatives, list) and last:
        nullable = nullable or with_null
        given = {k: v for k, v in given.items() if k != "anyOf"}
        if others and isinstance(others[-1], dict):
            alternative = {_camel(str(k)): v for k, v in others[-1].items()}
            if recorded and item and like is not None and not sent:  # (see the module)
                alternative = {k: v for k, v in alternative.items()
                               if k not in _ITEM_UNION_UNSENT or k in like}  # fmt: skip
            given.update(alternative)
            merged = _merged(like)
            return _with_null(schema_terms(given, nested, merged, recorded, item), nullable)
    out: dict[str, Any] = {}
    for key in KEPT:
        value = given.get(key)
        if value is None or value == "" or key == "nullable":
            continue
        if key == "type":
            out[key] = value.lower() if isinstance(value, str) else normalized(value)
        elif key == "properties" and isinstance(value, dict):
            if value:
                said = _said(like, key)
                out[key] = {str(n): schema_terms(_undescribed(str(n), s), True,
                                                 _said(said, str(n)), recorded)
                            for n, s in value.items()}  # fmt: skip
        elif key == "required" and isinstance(value, list):
            if value:
                out[key] = sorted(str(r) for r in value)
        elif key in ("items", "anyOf"):
            out[key] = (
                [schema_terms(s, True, _said(like, key, k), recorded) for k, s in enumerate(value)]
                if isinstance(value, list)
                else schema_terms(value, True, _said(like, key), recorded, key == "items")
            )
        else:
            out[key] = normalized(value)
    for key, value in given.items():  # (what both sides say: see the module)
        if key not in KEPT and like is not None and key in like and value is not None:
            schema = key == "additionalProperties" and isinstance(value, dict)  # (no default)
            out[key] = (schema_terms(value, True, like[key], recorded) if schema
                        else normalized(value))  # fmt: skip
    if nested and "type" not in out and "anyOf" not in out:
        out["type"] = "string"
    if recorded and nested and like is not None:
        said = str(like.get("type", "")).lower()
        if listed and said == "string" and like.get("nullable") is not True:
            out, nullable = {**out, "type": "string"}, False  # (a list of types: see the module)
        out = _as_langchain_sends(out, given, like)
    return _with_null(out, nullable)


def _as_langchain_sends(out: dict[str, Any], given: dict[str, Any], like: dict[str, Any]) -> Any:
    """A recorded property's terms as langchain-google-genai sends it, where the request has
    it so: an object with neither properties nor ``additionalProperties`` as a string, and an
    object's ``required`` as its properties without a default (see the module)."""
    properties = given.get("properties")
    if (out.get("type") == "object" and not properties and not given.get("additionalProperties")
            and str(like.get("type", "")).lower() == "string"):  # fmt: skip
        return {**{k: v for k, v in out.items() if k not in ("properties", "required")},
                "type": "string"}  # fmt: skip
    said = like.get("required")
    if isinstance(properties, dict) and isinstance(said, list):
        made = sorted(str(r) for r in said)
        # (those without a default; deeper down, where it dropped the defaults, all)
        undefaulted = [n for n, p in properties.items() if not (isinstance(p, dict)
                                                                and "default" in p)]  # fmt: skip
        if made in (sorted(map(str, undefaulted)), sorted(map(str, properties))):
            out = {k: v for k, v in out.items() if k != "required"}
            out.update({"required": made} if made else {})
    return out


def _undescribed(name: str, schema: Any) -> Any:
    """A property's schema without the description LangChain's client makes up for a
    property named ``title`` (see the module)."""
    if name != "title" or not isinstance(schema, dict):
        return schema
    said = schema.get("description")
    if isinstance(said, str) and said.startswith("title is {"):
        return {k: v for k, v in schema.items() if k != "description"}
    return schema


def _with_null(terms: Any, nullable: bool) -> Any:
    if nullable and isinstance(terms, dict):
        return {**terms, "nullable": True}
    return terms


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    schema = {k: v for k, v in tool.items() if k not in ("description", "parameters", *_DEFS)}
    schema.update(type=tool.get("type", "object"), properties=tool.get("parameters") or {})
    defs: dict[str, Any] = {}
    for key in _DEFS:
        found = tool.get(key)
        defs.update(found if isinstance(found, dict) else {})
    return _resolved(schema, defs, ()) if defs else schema


# where a JSON schema keeps the schemas its $refs name (pydantic's model_json_schema)
_DEFS = ("$defs", "definitions")


def _resolved(schema: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    """A schema with its local ``$ref``s (``#/$defs/Name``) replaced by what they name, as
    the recording keeps it (a reference to itself, a recursive model, is left as it is)."""
    if isinstance(schema, list):
        return [_resolved(s, defs, seen) for s in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None
    if (name is not None and ref in (f"#/$defs/{name}", f"#/definitions/{name}")
            and name in defs and name not in seen):  # fmt: skip
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _resolved({**defs[name], **rest}, defs, (*seen, name))
    return {k: _resolved(v, defs, seen) for k, v in schema.items()}


def tool_terms(
    tool: dict[str, Any], like: dict[str, Any] | None = None, recorded: bool = False
) -> dict[str, Any]:
    """A tool in the canonical form (:func:`~tcbreplay._replay.fingerprint.canonical_tools`'
    value) in the terms, in the same form: its description, its parameters by name and its
    required ones (so a difference has the path it has in the canonical form); ``like``: the
    tool it is compared with; ``recorded``: the recorded one (compared with a request's)."""
    terms = schema_terms(_schema(tool), False, None if like is None else _schema(like), recorded)
    return {
        "description": str(tool.get("description") or ""),
        "parameters": terms.get("properties", {}),
        "required": terms.get("required", []),
    }


def output_terms(content: Any) -> Any:
    """A tool message's content (canonical: text, or the JSON value its text holds) as the
    ``functionResponse.response`` a Gemini client sends for it; a list of text blocks (an
    MCP tool's content, which LangChain's client sends as that list) as its text, as the
    recording keeps it; ``{"result": value}`` alone (what google-genai's automatic function
    calling sends for a function's value) as that value."""
    value = content = message_content(content) if isinstance(content, list) else content
    if isinstance(content, str):
        try:
            value = json.loads(content)
        except (ValueError, RecursionError):
            value = content
    value = normalized(value)
    if isinstance(value, dict) and set(value) == {"result"}:  # (google-genai's own loop's)
        return output_terms(value["result"])
    return value if isinstance(value, dict) else {"output": value}
