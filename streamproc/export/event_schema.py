"""The schema of an events-topic record as one self-contained Avro schema, for a registry.

`schemas/` keeps one file per named type (`Record` names `JobRecord`, `FailureRecord` ...);
a registry takes one document, so each named type is written out in full where it is first
used and referred to by name after that, as Avro requires. Docs and defaults are kept: the
registry's compatibility checks read the defaults.
"""

from __future__ import annotations

import json
from typing import Any

from streamproc.protocol.codec import SCHEMA_FILES, SCHEMAS


def inline_named_types(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """The last of `schemas` with every named type it uses (defined by the others) inlined."""
    named = {_full_name(s["name"], s.get("namespace")): s for s in schemas}
    defined: set[str] = set()

    def walk(schema: Any, namespace: str | None) -> Any:
        if isinstance(schema, str):
            full = _full_name(schema, namespace)
            if full in named and full not in defined:
                return walk(named[full], namespace)
            return schema
        if isinstance(schema, list):  # a union
            return [walk(branch, namespace) for branch in schema]
        if not isinstance(schema, dict):
            return schema
        out = dict(schema)
        kind = schema.get("type")
        if kind in ("record", "enum", "fixed"):
            namespace = schema.get("namespace", namespace)
            defined.add(_full_name(schema["name"], namespace))
        if kind == "record":
            out["fields"] = [{**f, "type": walk(f["type"], namespace)} for f in schema["fields"]]
        elif kind == "array":
            out["items"] = walk(schema["items"], namespace)
        elif kind == "map":
            out["values"] = walk(schema["values"], namespace)
        elif isinstance(kind, (dict, list)):
            out["type"] = walk(kind, namespace)
        return out

    last = schemas[-1]
    return walk(last, last.get("namespace"))


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def record_schema_text() -> str:
    """`streamproc.Record`, self-contained, as JSON text (the same text on every call, so a
    registry finds the version it has instead of adding one)."""
    assert SCHEMA_FILES[-1] == "Record"
    return json.dumps(inline_named_types(SCHEMAS), separators=(",", ":"))
