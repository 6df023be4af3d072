"""Markdown in HTML reports (runbooks, remediations) through markdown-it-py, raw HTML off."""

from __future__ import annotations

import re

from llmdiag import runbooks
from llmdiag.reports.base import render
from llmdiag.reports.htmlkit import md, md_inline, runbook_html
from tests.reports import realdocs

SAMPLE = """# Title

1. first
   - nested under first
   - second nested
2. `code` and **bold**

> a quote

| a | b |
|---|---|
| 1 | 2 |

<script>alert(1)</script>
"""


def test_nested_lists_quotes_tables_and_no_raw_html():
    out = md(SAMPLE)
    assert "<ol>" in out and out.index("<ol>") < out.index("<ul>") < out.index("</ol>")  # the list nests
    assert "<blockquote>" in out and "<table>" in out and "<td>2</td>" in out
    assert "<code>code</code>" in out and "<strong>bold</strong>" in out
    assert "<script>" not in out and "&lt;script&gt;" in out


def test_remediation_backticks_become_code():
    assert md_inline("Run `ss -ltnp` <b>now</b>") == "Run <code>ss -ltnp</code> &lt;b&gt;now&lt;/b&gt;"


def test_every_runbook_renders_without_literal_markdown():
    for rid in runbooks.ids():
        out = runbook_html(rid)
        prose = re.sub(r"<(code|pre)>.*?</\1>", "", out, flags=re.S)  # code may hold ``**`` or backticks
        assert "<details" in out and "```" not in prose and "**" not in prose and "`" not in prose, rid


def test_report_remediation_is_rendered_markdown():
    page = render(realdocs.doc("merge"), "html")
    assert "<code>* - nofile 1048576</code>" in page and "`* - nofile" not in page
