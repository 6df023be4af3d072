"""Renderers: turn a report document (a plain, redacted dict) into text. They never run checks.

Every document has ``schema_version``, ``command``, ``kind`` and ``status``. A renderer for
format F of kind K is found by convention, so each subsystem owns its own module:

1. ``reports.<K>.<F>(doc, opts)`` — e.g. ``reports.cluster.terminal``;
2. ``reports.<F>.<K>(doc, opts)`` — e.g. ``reports.html.cluster`` (one module per format);
3. ``reports.<F>.generic(doc, opts)`` or ``reports.generic.<F>(doc, opts)`` — fallbacks.

(K and F with ``-`` written ``_``.) JSON is the same for every kind. :func:`emit` is the one
way commands write output: redaction, rendering, stdout or an atomically written ``-o`` file.
"""

from __future__ import annotations

from reports.base import FORMATS, RenderOptions, emit, render

__all__ = ["FORMATS", "RenderOptions", "emit", "render"]
