"""Tool schemas from a Python ``module:attr`` or a JSON file of function schemas.

A tool schema is what scoring needs to know about a tool: its name, description and
JSON-schema parameters (with ``default`` where one is declared). Tools loaded
from Python also carry LangChain tool objects that recording can execute.
LangChain is imported only when Python tools are loaded, never by scoring.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcbreplay._inputs import limits
from tcbreplay._inputs.limits import lone_surrogate
from tcbreplay.errors import ToolSchemaError

_NO_DEFAULT = object()


@dataclass(frozen=True)
class ToolSchema:
    """A tool's name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    @property
    def param_names(self) -> set[str]:
        return set(self.parameters.get("properties", {}))

    def defaults(self) -> dict[str, Any]:
        """Parameters with a declared default, and that default."""
        props = self.parameters.get("properties", {})
        return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], place: str = "tool") -> ToolSchema:
        """Validate one function schema ``{"name", "description", "parameters"}``."""
        if not isinstance(obj, Mapping):
            raise ToolSchemaError(f"{place}: expected an object with name and parameters")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ToolSchemaError(f"{place}: name must be a non-empty string")
        description = obj.get("description", "")
        if not isinstance(description, str):
            raise ToolSchemaError(f"{place} ({name}): description must be a string")
        params = obj.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, Mapping):
            raise ToolSchemaError(f"{place} ({name}): parameters must be a JSON-schema object")
        props = params.get("properties", {})
        if not isinstance(props, Mapping) or not all(
            isinstance(v, Mapping) for v in props.values()
        ):
            raise ToolSchemaError(
                f"{place} ({name}): parameters.properties must map names to JSON schemas"
            )
        return cls(name=name, description=description, parameters=dict(params))


@dataclass
class Toolset:
    """The tools of a benchmark: their schemas, and runnable tools when loaded from Python."""

    schemas: list[ToolSchema]
    source: str
    sha256: str | None = None
    tools: list[Any] | None = field(default=None, repr=False)

    def params(self) -> dict[str, set[str]]:
        return {s.name: s.param_names for s in self.schemas}

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.schemas]


def load_toolset(source: str) -> Toolset:
    """Load tools from ``module:attr`` or from a JSON file of function schemas."""
    path = Path(source)
    if source.endswith(".json") or (path.is_file() and ":" not in source):
        return _from_json(path)
    if ":" not in source:
        raise ToolSchemaError(
            f"{source}: not a JSON file or module:attr",
            hint="give the tools as package.module:TOOLS or as tools.json",
        )
    return _from_module(source)


def toolset_from_dicts(items: list[Mapping[str, Any]], source: str) -> Toolset:
    """Rebuild the tool schemas stored in a run manifest."""
    schemas = [ToolSchema.from_dict(obj, f"{source}: tool {i}") for i, obj in enumerate(items)]
    return Toolset(schemas=schemas, source=source)


def _from_json(path: Path) -> Toolset:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ToolSchemaError(f"{path}: cannot read tools file: {exc.strerror or exc}") from exc
    try:
        items = limits.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ToolSchemaError(f"{path.name}: not valid JSON: {exc}") from exc
    except limits.LimitError as exc:
        raise ToolSchemaError(f"{path.name}: {exc}", hint=limits.HINT) from None
    surrogate = lone_surrogate(items)
    if surrogate:
        raise ToolSchemaError(
            f"{path.name}: holds a lone surrogate {surrogate}, which is not valid Unicode"
        )
    schemas = schemas_from_items(items, path.name)
    return Toolset(schemas=schemas, source=str(path), sha256=hashlib.sha256(data).hexdigest())


def schemas_from_items(items: Any, label: str) -> list[ToolSchema]:
    """The tool schemas of a tools file's JSON (an array of function schemas, or an object
    with one under ``tools``), or of a dataset entry's ``tools``; ``label`` names the place.
    A name declared twice with the same schema is one tool; with different ones, refused."""
    if isinstance(items, dict) and "tools" in items:
        items = items["tools"]
    if not isinstance(items, list):
        raise ToolSchemaError(f"{label}: expected a JSON array of function schemas")
    schemas = [ToolSchema.from_dict(obj, f"{label}: tool {i}") for i, obj in enumerate(items)]
    return _one_per_name(schemas, label)


def _from_module(source: str) -> Toolset:
    module_name, _, attr = source.partition(":")
    if not module_name or not attr:
        raise ToolSchemaError(f"{source}: expected module:attr")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolSchemaError(f"{source}: cannot import module {module_name!r}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # the user's module raised while importing
        raise ToolSchemaError(
            f"{source}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ToolSchemaError(f"{source}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    items = list(obj.values()) if isinstance(obj, Mapping) else obj
    if not isinstance(items, (list, tuple)) or not items:
        raise ToolSchemaError(
            f"{source}: expected a non-empty list of functions or LangChain tools, "
            f"got {type(obj).__name__}"
        )
    tools = [_as_langchain_tool(item, f"{source}[{i}]") for i, item in enumerate(items)]
    schemas = [_schema_of(tool, f"{source}[{i}]") for i, tool in enumerate(tools)]
    _check_unique(schemas, source)
    return Toolset(schemas=schemas, source=source, sha256=_module_sha256(module), tools=tools)


def _as_langchain_tool(item: Any, place: str) -> Any:
    from langchain_core.tools import BaseTool, tool

    if isinstance(item, BaseTool):
        return item
    if callable(item):
        try:
            return tool(item)
        except Exception as exc:
            raise ToolSchemaError(f"{place}: cannot be used as a tool: {exc}") from exc
    raise ToolSchemaError(f"{place}: not a function or LangChain tool ({type(item).__name__})")


def _schema_of(tool: Any, place: str) -> ToolSchema:
    from langchain_core.utils.function_calling import convert_to_openai_function

    fn = convert_to_openai_function(tool)
    schema = ToolSchema(
        name=fn["name"],
        description=fn.get("description", ""),
        parameters=fn.get("parameters", {"type": "object", "properties": {}}),
    )
    # a default such as 10**1000 or a deeply nested list: the manifest could not hold it
    problem = limits.value_problem(schema.to_dict())
    if problem is not None:
        raise ToolSchemaError(
            f"{place} ({schema.name}): its parameters hold {problem}", hint=limits.HINT
        )
    return schema


PER_SAMPLE_HINT = (
    "a tool whose parameters differ between samples goes into each dataset entry that uses "
    'it, as "tools": [...] (the format of a tools file); declare it once here'
)


def _one_per_name(schemas: list[ToolSchema], label: str) -> list[ToolSchema]:
    """The schemas with a repeated identical declaration dropped; a name declared again with
    another description or other parameters is refused."""
    seen: dict[str, ToolSchema] = {}
    out = []
    for s in schemas:
        if s.name not in seen:
            seen[s.name] = s
            out.append(s)
        elif s != seen[s.name]:
            raise ToolSchemaError(
                f"{label}: two tools are named {s.name!r}, with different "
                + ("parameters" if s.parameters != seen[s.name].parameters else "descriptions"),
                hint=PER_SAMPLE_HINT,
            )
    return out


def _check_unique(schemas: list[ToolSchema], label: str) -> None:
    seen = set()
    for s in schemas:
        if s.name in seen:
            raise ToolSchemaError(f"{label}: two tools are named {s.name!r}", hint=PER_SAMPLE_HINT)
        seen.add(s.name)


def _module_sha256(module: Any) -> str | None:
    path = getattr(module, "__file__", None)
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
