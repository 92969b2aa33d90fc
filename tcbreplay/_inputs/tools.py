"""Tool schemas from a Python ``module:attr`` or a JSON file of function schemas.

A JSON file may hold tools in any of the common shapes, each read into the bare one: a bare
function schema ``{"name", "description", "parameters"}``, OpenAI's wrapped form
``{"type": "function", "function": {...}}``, Anthropic's ``{"name", "description",
"input_schema"}`` and MCP's ``{"name", "description", "inputSchema"}`` (a list, or an object
with a ``tools`` list as MCP's ``tools/list`` answers). A shape that is almost one of them is
refused with a hint naming the shape it resembles.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._inputs.parameters import extra_arguments
from tcbreplay._inputs.roles import check_role
from tcbreplay._json import lone_surrogate
from tcbreplay.errors import ToolSchemaError

_NO_DEFAULT = object()


@dataclass(frozen=True)
class ToolSchema:
    """A tool's name, description and JSON-schema parameters, and its role (None: none)."""

    name: str
    description: str
    parameters: dict[str, Any]
    role: str | None = None

    @property
    def param_names(self) -> set[str]:
        return set(self.parameters.get("properties", {}))

    @property
    def free_form(self) -> bool:
        """Whether the tool takes arguments besides its declared ones (see
        :func:`tcbreplay._inputs.parameters.extra_arguments`)."""
        return extra_arguments(self.parameters) is not None

    def defaults(self) -> dict[str, Any]:
        """Parameters with a declared default, and that default."""
        props = self.parameters.get("properties", {})
        return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "description": self.description, "parameters": self.parameters}
        if self.role is not None:  # only then: a tool without one is stored as before
            out["role"] = self.role
        return out

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], place: str = "tool") -> ToolSchema:
        """Validate one tool schema in any shape the module names (read as the bare one)."""
        if not isinstance(obj, Mapping):
            raise ToolSchemaError(f"{place}: expected an object with name and parameters")
        obj, place = _bare(obj, place)
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ToolSchemaError(
                f"{place}: name must be a non-empty string",
                hint="tools are read as bare function schemas {name, description, parameters}, "
                'OpenAI\'s {"type": "function", "function": {...}}, Anthropic\'s {name, '
                "input_schema} or MCP's {name, inputSchema}",
            )
        description = obj.get("description") or ""  # SDK models write a missing one as null
        if not isinstance(description, str):
            raise ToolSchemaError(f"{place} ({name}): description must be a string")
        params = obj.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, Mapping):
            raise ToolSchemaError(f"{place} ({name}): parameters must be a JSON-schema object")
        props = params.get("properties", {})
        if not isinstance(props, Mapping) or not all(
            isinstance(v, Mapping) for v in props.values()
        ):
            raise ToolSchemaError(
                f"{place} ({name}): parameters.properties must map names to JSON schemas"
            )
        role = check_role(obj.get("role"), f"{place} ({name})")
        return cls(name=name, description=description, parameters=dict(params), role=role)


# where each shape keeps the parameters' JSON schema
_PARAMETER_KEYS = {"parameters": "a bare function schema", "input_schema": "Anthropic's tool",
                   "inputSchema": "an MCP tool"}  # fmt: skip
# keys that look like a place for parameters, but are none of those
_NEAR_PARAMETERS = (
    "params", "arguments", "args", "schema", "input", "args_schema", "json_schema",
    "inputschema", "input-schema", "parameter", "properties",
)  # fmt: skip


def _bare(obj: Mapping[str, Any], place: str) -> tuple[Mapping[str, Any], str]:
    """The bare function schema of one tool in any accepted shape (see the module), and the
    place of the object it was read from."""
    if "function" in obj:  # OpenAI's wrapped form
        inner = obj["function"]
        hint = 'OpenAI\'s wrapped form is {"type": "function", "function": {"name", ...}}'
        if not isinstance(inner, Mapping):
            raise ToolSchemaError(
                f"{place}: function is {type(inner).__name__}, not an object", hint=hint
            )
        if obj.get("type", "function") != "function":
            raise ToolSchemaError(
                f"{place}: type {obj.get('type')!r} beside function: OpenAI's wrapped form has "
                'type "function"',
                hint=hint,
            )
        if "name" in obj or "parameters" in obj:
            raise ToolSchemaError(
                f"{place}: name or parameters both beside and inside function", hint=hint
            )
        bare, where = _bare(inner, f"{place}: function")
        if "role" in obj:  # beside type and function, or inside function: one of them
            if "role" in bare and bare["role"] != obj["role"]:
                raise ToolSchemaError(f"{place}: role both beside and inside function")
            bare = {**bare, "role": obj["role"]}
        return bare, where
    given = [key for key in _PARAMETER_KEYS if key in obj]
    if len(given) > 1:
        raise ToolSchemaError(
            f"{place}: gives both {' and '.join(given)}: give a tool's parameters one way",
            hint=f"{given[0]} is how {_PARAMETER_KEYS[given[0]]} names them",
        )
    if not given:
        near = [key for key in _NEAR_PARAMETERS if key in obj]
        if near:
            raise ToolSchemaError(
                f"{place}: has {near[0]!r} but no parameters: did you mean parameters "
                "(a function schema), input_schema (Anthropic) or inputSchema (MCP)?",
                hint="a tool read without its parameters would make every argument invented",
            )
    if "name" not in obj and isinstance(obj.get("type"), str) and obj["type"] != "function":
        raise ToolSchemaError(
            f"{place}: a {obj['type']!r} tool without a name: only function tools are read",
            hint='OpenAI\'s function tools are {"type": "function", "function": {"name", ...}}',
        )
    if not given:
        return obj, place
    key = given[0]
    return {**{k: v for k, v in obj.items() if k != key}, "parameters": obj[key]}, place


@dataclass
class Toolset:
    """The tools of a benchmark: their schemas, and runnable tools when loaded from Python."""

    schemas: list[ToolSchema]
    source: str
    sha256: str | None = None
    tools: list[Any] | None = field(default=None, repr=False)

    def params(self) -> dict[str, set[str] | None]:
        """Each tool's parameter names (None: it takes any argument, see
        :func:`tcbreplay._inputs.parameters.extra_arguments`)."""
        return {s.name: None if s.free_form else s.param_names for s in self.schemas}

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.schemas]


def load_toolset(source: str) -> Toolset:
    """Load tools from ``module:attr`` or from a JSON file of function schemas."""
    if "://" in source:  # (read as a path, its // would collapse into a file not found)
        raise ToolSchemaError(
            f"{source}: a URL; give a file of this machine, or module:attr (a store may be on "
            "object storage, its inputs may not)"
        )
    path = Path(source)
    if source.endswith(".json") or (path.is_file() and ":" not in source):
        return _from_json(path)
    if ":" not in source:
        raise ToolSchemaError(
            f"{source}: not a JSON file or module:attr",
            hint="give the tools as package.module:TOOLS or as tools.json",
        )
    return _from_module(source)


def toolset_from_dicts(items: Sequence[Mapping[str, Any]], source: str) -> Toolset:
    """Rebuild the tool schemas stored in a run manifest."""
    schemas = [ToolSchema.from_dict(obj, f"{source}: tool {i}") for i, obj in enumerate(items)]
    return Toolset(schemas=schemas, source=source)


def _from_json(path: Path) -> Toolset:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ToolSchemaError(f"{path}: cannot read tools file: {exc.strerror or exc}") from exc
    try:
        items = _json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ToolSchemaError(f"{path.name}: not valid JSON: {exc}") from exc
    except _json.LimitError as exc:
        raise ToolSchemaError(f"{path.name}: {exc}", hint=_json.HINT) from None
    surrogate = lone_surrogate(items)
    if surrogate:
        raise ToolSchemaError(
            f"{path.name}: holds a lone surrogate {surrogate}, which is not valid Unicode"
        )
    schemas = schemas_from_items(items, path.name)
    return Toolset(schemas=schemas, source=str(path), sha256=hashlib.sha256(data).hexdigest())


def schemas_from_items(items: Any, label: str) -> list[ToolSchema]:
    """The tool schemas of a tools file's JSON (an array of tools in any shape ToolSchema
    reads, or an object with one under ``tools``, as MCP's tools/list result), or of a
    dataset entry's ``tools``; ``label`` names the place. A name declared twice with the same
    schema is one tool; with different ones, refused."""
    if isinstance(items, dict) and "tools" in items:
        items = items["tools"]
    if not isinstance(items, list):
        single = isinstance(items, dict) and ("name" in items or "function" in items)
        raise ToolSchemaError(
            f"{label}: expected a JSON array of function schemas",
            hint="one tool alone goes in a list: [{...}]" if single else None,
        )
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
    schemas = [
        _schema_of(tool, f"{source}[{i}]", _role_of(item, f"{source}[{i}]"))
        for i, (item, tool) in enumerate(zip(items, tools, strict=True))
    ]
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


def _role_of(item: Any, place: str) -> str | None:
    """A Python tool's role: a function's ``role`` attribute (``book.role = "write"``), or a
    LangChain tool's ``metadata["role"]``."""
    role = getattr(item, "role", None)
    metadata = getattr(item, "metadata", None)
    if role is None and isinstance(metadata, Mapping):
        role = metadata.get("role")
    return check_role(role, place)


def _schema_of(tool: Any, place: str, role: str | None = None) -> ToolSchema:
    from langchain_core.utils.function_calling import convert_to_openai_function

    fn = convert_to_openai_function(tool)
    schema = ToolSchema(
        name=fn["name"],
        description=fn.get("description", ""),
        parameters=fn.get("parameters", {"type": "object", "properties": {}}),
        role=role,
    )
    # a default such as 10**1000 or a deeply nested list: the manifest could not hold it
    problem = _json.value_problem(schema.to_dict())
    if problem is not None:
        raise ToolSchemaError(
            f"{place} ({schema.name}): its parameters hold {problem}", hint=_json.HINT
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
                + (
                    "parameters"
                    if s.parameters != seen[s.name].parameters
                    else "roles"
                    if s.role != seen[s.name].role
                    else "descriptions"
                ),
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


def code_sha256(tools: Sequence[Any], source: str = "") -> dict[str, str]:
    """The sha256 of the source file of each module that defines the tools' code (a tool's
    function or coroutine, else the tool itself) and of the module ``source`` names (the
    tools' ``MODULE:ATTR``), by module name: the code a recording or a replay runs (not
    what those modules import)."""
    module, sep, _ = source.partition(":")
    names = {module} if sep and module else set()
    for tool in tools:
        code = getattr(tool, "func", None) or getattr(tool, "coroutine", None) or tool
        name = getattr(code, "__module__", None)
        if isinstance(name, str):
            names.add(name)
    out = {}
    for name in sorted(names):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path and Path(path).is_file():
            out[name] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out
