"""Dataclasses as JSON documents: a JSON Schema generated from the type hints, and a reader that
builds the dataclass from a parsed JSON value.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``, ``Literal[...]``,
str-valued enums (their values), unions (``X | None``), ``list[X]``, ``tuple[X, ...]``,
``dict[str, X]`` and nested dataclasses. A field's ``metadata={"doc": "..."}`` becomes its
schema ``description``, ``metadata={"pattern": "..."}`` its ``pattern``.

Schemas allow additional properties: documents grow by additive changes, and a reader of
version 1.N must accept what 1.N+1 writes. Required fields are those without a default.
:func:`read` builds what it can (a missing field takes its default, a value of the wrong type
is kept as it is, a word outside an enum stays a string) and lists in ``problems`` every
unknown key, missing required field and unknown enum word, with its path: the caller decides
whether they are errors (llmdiag.documents). A class that sets ``OPEN_KEYS = True`` names only
part of an open mapping (a summary with one entry per measured column): its other keys are read
as no problem and dropped.
"""

from __future__ import annotations

import dataclasses
import enum
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
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
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
        if f.metadata.get("pattern"):
            s["pattern"] = f.metadata["pattern"]
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


def _read_value(tp: Any, value: Any, problems: list[str], path: str) -> Any:
    if value is None or tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            problems.append(f"{path}: {value!r} is not one of {', '.join(repr(m.value) for m in tp)}")
            return value
    if dataclasses.is_dataclass(tp):
        return read(tp, value, problems, path) if isinstance(value, Mapping) else value
    origin, args = get_origin(tp), get_args(tp)
    if _is_union(tp):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:  # X | None with a value: read it as X (list[Row] | None reads its rows)
            return _read_value(rest[0], value, problems, path)
        for a in args:  # the first dataclass member that fits a mapping, else the value itself
            if dataclasses.is_dataclass(a) and isinstance(value, Mapping):
                return read(a, value, problems, path)
        for a in args:  # an enum member of the union reads its words
            if isinstance(a, type) and issubclass(a, enum.Enum):
                return _read_value(a, value, problems, path)
        return value
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        item = args[0] if args else Any
        return [_read_value(item, v, problems, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict and isinstance(value, Mapping):
        vt = args[1] if len(args) == 2 else Any
        return {str(k): _read_value(vt, v, problems, f"{path}.{k}") for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def read(cls: type, data: Mapping[str, Any], problems: list[str] | None = None, path: str = "",
         open_keys: bool = False) -> Any:
    """``cls`` built from the mapping ``data``: known fields only, missing ones at their default.
    ``problems`` (when given) gets one line per unknown key (unless ``open_keys``: the class
    describes only part of the mapping), missing required field and unknown enum word."""
    problems = [] if problems is None else problems
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    prefix = f"{path}." if path else ""
    if not open_keys and not getattr(cls, "OPEN_KEYS", False):
        problems.extend(f"{prefix}{k}: unknown key" for k in data if k not in names)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _read_value(hints[f.name], data[f.name], problems, prefix + f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            # a required field the document lacks: an empty container for a list or mapping,
            # so a partial document still renders where the caller accepts it
            problems.append(f"{prefix}{f.name}: missing (required)")
            origin = get_origin(hints[f.name])
            kwargs[f.name] = [] if origin in (list, tuple) else {} if origin is dict else None
    return cls(**kwargs)
