"""Fallback renderers for documents whose kind has no dedicated renderer yet."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llmdiag.documents import GenericDoc
from llmdiag.reports.base import RenderOptions


def _walk(doc: Any, indent: int = 0) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(doc, Mapping):
        for k, v in doc.items():
            if isinstance(v, (Mapping, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.extend(_walk(v, indent + 1))
            else:
                lines.append(f"{pad}{k}: {json.dumps(v) if not isinstance(v, str) else v}")
    elif isinstance(doc, list):
        for item in doc:
            if isinstance(item, (Mapping, list)):
                lines.append(f"{pad}-")
                lines.extend(_walk(item, indent + 1))
            else:
                lines.append(f"{pad}- {item}")
    else:
        lines.append(f"{pad}{doc}")
    return lines


def terminal(d: GenericDoc, opts: RenderOptions) -> str:
    return "\n".join(_walk(d.content)) + "\n"


def markdown(d: GenericDoc, opts: RenderOptions) -> str:
    return f"# llmdiag {d.command or ''}\n\n```\n" + "\n".join(_walk(d.content)) + "\n```\n"
