"""A rich console that renders to a string: fixed width and no colour make output deterministic."""

from __future__ import annotations

import io
import os
import shutil

from llmdiag.reports.base import RenderOptions
from llmdiag.vocab import Status

STATUS_STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}
STATUS_LABEL = {s: s.label for s in Status}


def make_console(opts: RenderOptions):
    from rich.console import Console  # lazy: keeps `llmdiag --help` fast

    width = opts.width or int(os.environ.get("COLUMNS", 0) or 0) or shutil.get_terminal_size((100, 24)).columns
    return Console(
        file=io.StringIO(),
        width=width,
        color_system="standard" if opts.color else None,
        force_terminal=opts.color,
        no_color=not opts.color,
        highlight=False,
        emoji=False,
        legacy_windows=False,
        soft_wrap=False,
    )


def captured(console) -> str:
    """The rendered text, without the padding rich leaves at the end of table lines."""
    return "\n".join(line.rstrip() for line in console.file.getvalue().split("\n"))


def status_text(status: str):
    from rich.text import Text

    return Text(STATUS_LABEL.get(status, status.upper()), style=STATUS_STYLE.get(status, ""))
