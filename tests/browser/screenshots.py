"""Screenshots of the HTML report of every real document, for docs/img/ and the README.

    python -m tests.browser.screenshots [OUT_DIR]     # default docs/img

Runs the real commands (tests/reports/realdocs.py), renders each document as HTML and takes a
full-page PNG in headless Chromium at 1400 px and at 800 px wide.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from llmdiag.reports.base import render
from tests.browser import headless
from tests.reports import realdocs

SHOWN = ("preflight", "merge", "nccl-bench", "analyze-log", "analyze-log-ranks", "estimate-memory-oom", "monitor")


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in SHOWN:
            page = Path(tmp) / f"{name}.html"
            page.write_text(render(realdocs.doc(name), "html"), encoding="utf-8")
            for width in (1400, 800):
                res = headless.load(page, screenshot=True, width=width, height=900)
                if res.errors or res.requests:
                    print(f"{name}: errors {res.errors}, requests {res.requests}", file=sys.stderr)
                    return 1
                shot = out / f"report-{name}-{width}.png"
                shot.write_bytes(res.screenshot or b"")
                print(shot, len(res.screenshot or b""))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img")))
