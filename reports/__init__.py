"""Renderers: turn a report document into text. They never run checks.

Every document has ``schema_version``, ``command``, ``kind`` and ``status``. The renderer of
each kind and format is listed in one table, :data:`llmdiag.reports.base.RENDERERS`
(kind × format → ``module:function``); JSON is the same for every kind. :func:`emit` is the one
way commands write output: redaction, rendering, stdout or an atomically written ``-o`` file.
Commands hand over the plain dict; :func:`emit` redacts it, :func:`render` reads it once through its
type (:func:`llmdiag.documents.read`) and gives every renderer but JSON the typed document.
"""

from __future__ import annotations

from llmdiag.reports.base import FORMATS, RenderOptions, emit, render

__all__ = ["FORMATS", "RenderOptions", "emit", "render"]
