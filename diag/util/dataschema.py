"""Dataclasses as JSON documents: a JSON Schema generated from the type hints, and a reader that
builds the dataclass from a parsed JSON value.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``Literal[...]``,
unions (``X | None``), ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]`` and nested dataclasses.
A field's ``metadata={"doc": "..."}`` becomes its schema ``description``.

Schemas allow additional properties: documents grow by additive changes, and a reader of
version 1.N must accept what 1.N+1 writes. Required fields are those without a default.
:func:`read` is lenient the other way round: a missing field takes its default and a value of
the wrong type is kept as it is (the schema test, not the renderer, is where a producer that
breaks its contract is caught).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

_SCALAR = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any:
        return {}
    if tp in _SCALAR:
        return {"type": _SCALAR[tp]}
    if dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: recursion stops here
            defs[name] = _object_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if _is_union(tp):
        parts = [_type_schema(a, defs) for a in args]
        if all(set(p) == {"type"} for p in parts):  # ["number", "null"] rather than anyOf
            return {"type": [p["type"] for p in parts]}
        return {"anyOf": parts}
    if origin in (list, tuple):
        item = args[0] if args else Any
        return {"type": "array", "items": _type_schema(item, defs)}
    if origin is dict:
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _type_schema(value, defs)}
    raise TypeError(f"no JSON Schema for the type {tp!r}")


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required: list[str] = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        s = dict(_type_schema(hints[f.name], defs))
        if f.metadata.get("doc"):
            s["description"] = f.metadata["doc"]
        props[f.name] = s
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    doc = (cls.__doc__ or "").strip()
    if doc and not doc.startswith(cls.__name__ + "("):
        out["description"] = " ".join(doc.split())
    return out


def json_schema(cls: type, *, title: str, schema_id: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of documents of the dataclass ``cls``."""
    defs: dict[str, Any] = {}
    body = _object_schema(cls, defs)
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": schema_id, "title": title, **body}
    if defs:
        out["$defs"] = dict(sorted(defs.items()))
    return out


def _read_value(tp: Any, value: Any) -> Any:
    if value is None or tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return read(tp, value) if isinstance(value, Mapping) else value
    origin, args = get_origin(tp), get_args(tp)
    if _is_union(tp):
        for a in args:  # the first dataclass member that fits a mapping, else the value itself
            if dataclasses.is_dataclass(a) and isinstance(value, Mapping):
                return read(a, value)
        return value
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        item = args[0] if args else Any
        return [_read_value(item, v) for v in value]
    if origin is dict and isinstance(value, Mapping):
        vt = args[1] if len(args) == 2 else Any
        return {str(k): _read_value(vt, v) for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def read(cls: type, data: Mapping[str, Any]) -> Any:
    """``cls`` built from the mapping ``data``: known fields only, missing ones at their default."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _read_value(hints[f.name], data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            # a required field the document lacks (the schema test reports it): an empty
            # container for a list or mapping, so a partial document still renders
            origin = get_origin(hints[f.name])
            kwargs[f.name] = [] if origin in (list, tuple) else {} if origin is dict else None
    return cls(**kwargs)
