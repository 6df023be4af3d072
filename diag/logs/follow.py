"""``--follow``: read a growing log like ``tail -f`` (surviving rotation) and alert at once.

Lines go through the same analyzer as a full read. After each batch of new lines, new
findings (by kind, rank and line) become alerts: printed as one JSON line on stdout and,
with ``--on-alert CMD``, written as JSON to CMD's stdin (CMD gets 30 s). No new step for
``no_progress_s`` seconds is an alert too. Rotation: when the path's inode changes or the
file shrinks, the old handle is drained and the new file is read from its start. ``on_doc``
gets the whole document after each batch (``--prometheus-file``: the metrics an alerting rule
reads, rewritten as the log grows).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable

from llmdiag.logs.analyzer import LogAnalyzer
from llmdiag.logs.readers import ReadStats



def _alerts(doc: dict, seen: set) -> list[dict]:
    out = []
    for f in doc["findings"]:
        key = (f["kind"], f["rank"], f.get("facts", {}).get("spike_first_step") or f["line"])
        if key in seen or f["kind"] == "hang_no_progress":
            continue
        seen.add(key)
        out.append({k: f[k] for k in ("kind", "severity", "rank", "step", "line", "file", "message", "runbook")})
    return out


def _send(alert: dict, on_alert: str | None, out=sys.stdout) -> None:
    text = json.dumps(alert, default=str)
    out.write(text + "\n")
    out.flush()
    if on_alert:
        try:
            subprocess.run(shlex.split(on_alert), input=text + "\n", text=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            sys.stderr.write(f"llmdiag: --on-alert failed: {exc}\n")


def follow_file(path: str, settings, *, on_alert: str | None = None, no_progress_s: float = 600.0,
                poll_s: float = 0.5, max_seconds: float | None = None, out=sys.stdout,
                on_doc: Callable[[dict], None] | None = None) -> None:
    from llmdiag.logs.diagnosis import build_document

    an = LogAnalyzer(settings)
    stats = ReadStats()
    seen: set = set()
    fh = None
    inode = None
    lineno = 0
    buf = b""
    last_step_at = time.monotonic()
    steps_before = 0
    hang_sent = False
    started = time.monotonic()
    while max_seconds is None or time.monotonic() - started < max_seconds:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and (fh is None or st.st_ino != inode or st.st_size < fh.tell()):
            if fh is not None:
                fh.close()
            fh, inode, lineno, buf = open(path, "rb"), st.st_ino, 0, b""  # noqa: SIM115
        data = fh.read(1 << 20) if fh is not None else b""
        if data:
            buf += data
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                lineno += 1
                text = raw.decode("utf-8", errors="replace")
                an(path, lineno, text)  # every line: following lines of a block must be seen
            an.finish(end_of_input=False)  # the file grows: a traceback being written is not cut off
            doc = build_document(an, stats, settings)
            if on_doc is not None:
                on_doc(doc)
            for a in _alerts(doc, seen):
                _send(a, on_alert, out)
            if len(an.table) > steps_before:
                steps_before = len(an.table)
                last_step_at = time.monotonic()
                hang_sent = False
            continue
        if not hang_sent and steps_before and time.monotonic() - last_step_at > no_progress_s:
            hang_sent = True
            _send({"kind": "hang_no_progress", "severity": "error", "rank": None, "step": None, "line": lineno,
                   "file": path, "message": f"no training progress for {no_progress_s / 60:.1f} min",
                   "runbook": "hang-no-progress"}, on_alert, out)
        time.sleep(poll_s)
