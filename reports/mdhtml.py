"""The Markdown subset runbooks use, converted to safe HTML.

Supported: ``#``..``####`` headings, paragraphs, ``-``/``*`` and ``1.`` lists (with indented
continuation lines), fenced code blocks, ``inline code``, ``**bold**``, ``*italic*`` and
``[text](http...)`` links. Everything else is text. Every piece of input is escaped before any
tag is added, so a runbook (or anything else fed here) cannot inject markup; links are kept
only for http(s) URLs and never load anything by themselves.
"""

from __future__ import annotations

import html
import re

_HEADING = re.compile(r"^(#{1,4})\s+(.*)$")
_BULLET = re.compile(r"^(\s*)[-*]\s+(.*)$")
_NUMBERED = re.compile(r"^(\s*)\d+[.)]\s+(.*)$")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")


def _inline_text(text: str) -> str:
    out = []
    pos = 0
    for m in _LINK.finditer(text):
        out.append(_emphasis(html.escape(text[pos:m.start()])))
        out.append(f'<a href="{html.escape(m.group(2), quote=True)}" rel="noopener noreferrer">'
                   f"{_emphasis(html.escape(m.group(1)))}</a>")
        pos = m.end()
    out.append(_emphasis(html.escape(text[pos:])))
    return "".join(out)


def _emphasis(escaped: str) -> str:
    escaped = _BOLD.sub(r"<strong>\1</strong>", escaped)
    return _ITALIC.sub(r"<em>\1</em>", escaped)


def inline(text: str) -> str:
    """One line of Markdown → HTML: code spans first, so ``**`` inside code stays literal."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if len(part) >= 2 and part.startswith("`") and part.endswith("`"):
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        else:
            out.append(_inline_text(part))
    return "".join(out)


def to_html(markdown: str, heading_offset: int = 0) -> str:
    """Convert a Markdown document; ``heading_offset`` demotes headings (``#`` → ``h1+offset``)."""
    lines = markdown.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []
    list_tag: str | None = None
    item: list[str] | None = None

    def flush_para() -> None:
        if para:
            out.append("<p>" + inline(" ".join(s.strip() for s in para)) + "</p>")
            para.clear()

    def flush_item() -> None:
        nonlocal item
        if item is not None:
            out.append("<li>" + inline(" ".join(s.strip() for s in item)) + "</li>")
            item = None

    def close_list() -> None:
        nonlocal list_tag
        flush_item()
        if list_tag:
            out.append(f"</{list_tag}>")
            list_tag = None

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("```"):
            flush_para()
            close_list()
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            out.append("<pre><code>" + html.escape("\n".join(body)) + "</code></pre>")
            i += 1
            continue
        m = _HEADING.match(line)
        bullet = _BULLET.match(line)
        numbered = _NUMBERED.match(line)
        if m:
            flush_para()
            close_list()
            level = min(6, len(m.group(1)) + heading_offset)
            out.append(f"<h{level}>{inline(m.group(2).strip())}</h{level}>")
        elif bullet or numbered:
            flush_para()
            tag = "ul" if bullet else "ol"
            if list_tag != tag:
                close_list()
                out.append(f"<{tag}>")
                list_tag = tag
            flush_item()
            item = [(bullet or numbered).group(2)]
        elif not line.strip():
            flush_para()
            close_list()
        elif item is not None and (line.startswith(" ") or line.startswith("\t")):
            item.append(line)
        else:
            close_list()
            para.append(line)
        i += 1
    flush_para()
    close_list()
    return "\n".join(out)
