"""Building blocks of the self-contained HTML report: page shell, CSS, escaped fragments.

The page loads nothing: CSS is inline, there is no script, plots are inline SVG
(:mod:`llmdiag.reports.plots`), fonts are the system's. Markdown (runbooks, remediations) goes
through markdown-it-py with raw HTML off. Every piece of document text goes through :func:`e` (``html.escape``) — log lines and
evidence are untrusted. Details open on click with ``<details>``; hover shows a ``title``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

from llmdiag.documents import Header
from llmdiag.vocab import Status

CSS = """
:root{--pass:#2e7d32;--warn:#b26a00;--fail:#c62828;--skip:#757575;--bg:#fff;--fg:#1b1b1b;--line:#ddd}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:var(--fg);background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:16px 0 6px}
.banner{padding:14px 18px;border-radius:6px;color:#fff;margin:12px 0}
.banner.pass{background:var(--pass)}.banner.warn{background:var(--warn)}.banner.fail{background:var(--fail)}
.banner.skip{background:var(--skip)}.banner .big{font-size:22px;font-weight:700}
table{border-collapse:collapse;background:var(--bg);margin:6px 0}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.st{font-weight:700;color:#fff;border-radius:3px;padding:1px 6px;font-size:12px}
.st.pass{background:var(--pass)}.st.warn{background:var(--warn)}.st.fail{background:var(--fail)}.st.skip{background:var(--skip)}
.matrix td.cell{min-width:64px;text-align:center;position:relative;padding:0}
.matrix td.cell>details>summary{list-style:none;cursor:pointer;padding:4px 8px;color:#fff;font-weight:700;font-size:12px}
.matrix td.cell>details>summary::-webkit-details-marker{display:none}
.cell.pass summary{background:var(--pass)}.cell.warn summary{background:var(--warn)}
.cell.fail summary{background:var(--fail)}.cell.skip summary{background:#9e9e9e}.cell.none{background:#f5f5f5}
.cell.missing{background:repeating-linear-gradient(45deg,#fbe9e7,#fbe9e7 6px,#ffccbc 6px,#ffccbc 12px);color:var(--fail);font-weight:700}
.pop{position:absolute;z-index:5;left:0;top:100%;width:26em;text-align:left;background:#fff;border:1px solid #999;
 box-shadow:0 2px 8px rgba(0,0,0,.25);padding:8px;font-size:13px}
.matrix td.cell{color:#fff;font-weight:700;font-size:11px;padding:3px 6px}.matrix td.cell.pass{background:var(--pass)}.matrix td.cell.warn{background:var(--warn)}.matrix td.cell.fail{background:var(--fail)}.matrix td.cell.skip{background:#9e9e9e}.matrix td.cell.missing{color:var(--fail)}.matrix th.sub{font-size:11px;font-weight:500}.matrix th.node{white-space:nowrap}.matrix th.check{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-size:12px}
.heat td{width:56px;height:28px;text-align:center;font-size:12px}
.heat .ok{background:#a5d6a7}.heat .refused{background:#ffab91}.heat .timeout{background:#e57373;color:#fff}
.heat .fail{background:#c62828;color:#fff}.heat .self{background:#eee;color:#999}.heat .unknown{background:#fff3c4}
.finding{background:var(--bg);border:1px solid var(--line);border-left:5px solid var(--skip);padding:8px 12px;margin:8px 0}
.finding.fail{border-left-color:var(--fail)}.finding.warn{border-left-color:var(--warn)}.finding.pass{border-left-color:var(--pass)}
.runbook{background:#f7f9fc;border:1px solid #dde3ee;padding:4px 14px;margin-top:6px}
code,pre{font:12px/1.4 ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;background:#f3f3f3}
code{padding:0 3px}pre{padding:8px;overflow:auto;white-space:pre-wrap}
.muted{color:#666}.plot{max-width:100%;background:#fff;border:1px solid var(--line);margin:4px 8px 4px 0}
.bar{display:flex;position:relative;height:26px;border:1px solid #999;width:100%;max-width:900px;background:#fff}
.bar div{height:100%;overflow:hidden;font-size:11px;color:#fff;white-space:nowrap;padding-left:3px;box-sizing:border-box}
footer{margin-top:32px;color:#888;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:8px}.chart{background:#fff;border:1px solid var(--line);max-width:100%;height:auto}
.small .chart{width:340px}.group{flex-basis:100%}.group h3{margin:4px 0}.lead{font-size:15px;margin:8px 0}.cap{position:relative}
.cap .limit{position:absolute;top:-4px;bottom:-4px;border-left:2px dashed var(--fail)}
ul.compact{margin:4px 0;padding-left:18px}ul.compact li{margin:1px 0}
.finding .fix p{display:inline;margin:0}.scroll{overflow-x:auto;max-width:100%}
@media (max-width:900px){main{padding:8px}.small .chart{width:100%}}
"""

STATUS_LABEL = {s: s.label for s in Status}


def e(value: Any) -> str:
    """Escaped text of any value (None → empty)."""
    return html.escape("" if value is None else str(value), quote=True)


def badge(status: str) -> str:
    s = status if status in STATUS_LABEL else Status.SKIP
    return f'<span class="st {s}">{STATUS_LABEL[s]}</span>'


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items())
    return str(value)


def gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "") -> str:
    """``rows`` hold already-escaped HTML fragments; headers are escaped here."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{e(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def json_block(value: Any, title: str) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return f"<details><summary>{e(title)}</summary><pre>{e(text)}</pre></details>"


def md(text: str | None, heading_offset: int = 0) -> str:
    """Markdown as HTML (CommonMark plus tables; raw HTML in the input is shown as text)."""
    if not text:
        return ""
    from markdown_it import MarkdownIt

    out = MarkdownIt("commonmark", {"html": False}).enable("table").render(str(text))
    for level in range(6 - heading_offset, 0, -1) if heading_offset else ():
        out = out.replace(f"<h{level}>", f"<h{level + heading_offset}>").replace(f"</h{level}>", f"</h{level + heading_offset}>")
    return out


def md_inline(text: str | None) -> str:
    """One line of Markdown (a remediation) without the surrounding paragraph."""
    if not text:
        return ""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).renderInline(str(text))


def runbook_html(runbook_id: str | None) -> str:
    """The runbook rendered inline (collapsed), or a note when the id is unknown."""
    if not runbook_id:
        return ""
    from llmdiag import runbooks

    if not runbooks.exists(runbook_id):
        return f'<p class="muted">runbook <code>{e(runbook_id)}</code> is not installed</p>'
    return (f'<details class="runbook"><summary>Runbook: {e(runbooks.title(runbook_id))} '
            f'<code>llmdiag runbook {e(runbook_id)}</code></summary>'
            f"{md(runbooks.text(runbook_id), heading_offset=2)}</details>")


def banner(status: str, headline: str, lines: Iterable[str] = ()) -> str:
    s = status if status in STATUS_LABEL else Status.SKIP
    extra = "".join(f"<div>{line}</div>" for line in lines)
    return f'<div class="banner {s}"><div class="big">{STATUS_LABEL[s]} — {e(headline)}</div>{extra}</div>'


def page(title: str, body: str, d: Header) -> str:
    meta = f"schema {d.schema_version or '?'} · kind {d.kind or '?'}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        # CSP: the page may use only itself and data: images; a stray reference cannot load.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:\">"
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
        f"<title>{e(title)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{e(title)}</h1>{body}<footer>llmdiag report · {e(meta)} · self-contained: no network access"
        "</footer></main></body></html>\n"
    )
