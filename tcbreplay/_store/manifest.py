"""A run's manifest: a new run's (:func:`new_manifest`), and one read back, checked for the
shape its readers rely on (:func:`read_manifest`). Its fields are documented in docs/store.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tcbreplay import _json
from tcbreplay._store.schema import MANIFEST, READABLE_VERSIONS
from tcbreplay._version import __version__
from tcbreplay.errors import StoreError

# the manifest's fields that readers rely on, and the JSON type each must have when present
_MANIFEST_FIELDS: dict[str, type] = {
    "run_id": str,
    "status": str,
    "created_at": str,
    "finished_at": str,
    "benchmark": dict,
    "dataset": dict,
    "tools": dict,
    "system_prompt": dict,
    "model": dict,
    "runner": dict,
    "files": dict,
    "totals": dict,
}


_JSON_TYPES: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def read_manifest(path: Path) -> dict[str, Any]:
    """A run's manifest, checked for the shape its readers rely on."""
    where = path / MANIFEST
    try:
        manifest = _json.loads(where.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise StoreError(
            f"{where}: unreadable manifest: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from exc
    except (OSError, ValueError) as exc:  # not JSON, or beyond the limits of JSON input
        raise StoreError(f"{where}: unreadable manifest: {exc}") from exc
    if not isinstance(manifest, dict):
        raise StoreError(f"{where}: not a manifest: {_json_type(manifest)}, not an object")
    version = manifest.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise StoreError(
            f"{where}: schema_version {version!r}, this tcbreplay reads "
            f"{' and '.join(map(str, READABLE_VERSIONS))}"
        )
    if "status" not in manifest:  # every writer sets it first: recording, then how it ended
        raise StoreError(f"{where}: no status")
    for key, kind in _MANIFEST_FIELDS.items():
        value = manifest.get(key)
        if value is not None and not isinstance(value, kind):
            raise StoreError(f"{where}: {key} is {_json_type(value)}, not {_JSON_TYPES[kind]}")
    schemas = (manifest.get("tools") or {}).get("specs", [])
    if not isinstance(schemas, list) or not all(
        isinstance(schema, dict) and isinstance(schema.get("name"), str) for schema in schemas
    ):
        raise StoreError(f"{where}: tools.specs is not a list of tool schemas, each with a name")
    for schema in schemas:  # scoring and the tools view read each tool's parameter properties
        field, value = "parameters", schema.get("parameters")
        if isinstance(value, dict):
            field, value = "parameters.properties", value.get("properties")
        if not isinstance(value, dict | None):
            raise StoreError(
                f"{where}: tools.specs: tool {schema['name']!r}: {field} is {_json_type(value)}, "
                "not an object"
            )
    return manifest


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def new_manifest(
    run_id: str,
    created_at: str,
    inputs: dict[str, Any],
    model: dict[str, Any],
    **fields: Any,
) -> dict[str, Any]:
    """A new run's manifest: its id and time, the toolkit, its inputs (``manifest_fields`` of
    the benchmark inputs: benchmark, dataset, tools, system prompt), its model and any other
    fields (``source``, ``runner``, ``traces`` ...). ``schema_version`` and ``status`` are
    set when the run is created."""
    return {
        "run_id": run_id,
        "created_at": created_at,
        "toolkit": {"name": "tcbreplay", "version": __version__},
        **inputs,
        "model": model,
        **fields,
    }
