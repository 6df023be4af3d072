"""Small line charts drawn as inline SVG by our own code: no matplotlib, no script, no fetch.

A report is complete on a default install: every plot is a few hundred bytes of ``<svg>``
markup in the page. :func:`chart` draws one panel: lines (faint raw values with an optional
bold smoothed copy), log or linear axes, horizontal reference lines (a plateau, an expected
value, a capacity), vertical event marks and markers for non-finite values.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Sequence

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


@dataclasses.dataclass
class Line:
    label: str
    xs: Sequence[float]
    ys: Sequence[float | None]  # None or NaN: a gap (and a marker when ``bad`` lists it)
    color: str = ""
    faint: bool = False
    dashed: bool = False


@dataclasses.dataclass
class Mark:
    """A vertical (``x``) or horizontal (``y``) reference line with a short label."""

    label: str
    x: float | None = None
    y: float | None = None
    color: str = "#c62828"


def smooth(ys: Sequence[float | None], window: int = 0) -> list[float | None]:
    """Centred moving average over ``window`` points (default: a twentieth of the series), so
    the smoothed line does not lag the raw one; gaps stay gaps."""
    w = max(1, window or len(ys) // 20) // 2
    out: list[float | None] = []
    for i, y in enumerate(ys):
        if y is None or not math.isfinite(y):
            out.append(None)
            continue
        near = [v for v in ys[max(0, i - w):i + w + 1] if v is not None and math.isfinite(v)]
        out.append(sum(near) / len(near))
    return out


def _fmt(v: float) -> str:
    a = abs(v)
    if a and (a >= 1e7 or a < 1e-3):
        return f"{v:.1e}"
    if a >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def size_label(n: float) -> str:
    for unit, div in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= div:
            return f"{n / div:g}{unit}"
    return f"{n:g}"


def _ticks(lo: float, hi: float, log: bool, base: int = 10) -> list[float]:
    if log:
        a, b = math.floor(math.log(lo, base) + 1e-9), math.ceil(math.log(hi, base) - 1e-9)
        step = max(1, math.ceil((b - a) / 7))
        return [float(base) ** k for k in range(a, b + 1, step) if lo * 0.999 <= base ** k <= hi * 1.001] or [lo, hi]
    span = hi - lo
    raw = span / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def chart(lines: Sequence[Line], *, title: str = "", xlabel: str = "", ylabel: str = "", logx: bool = False,
          logy: bool = False, marks: Sequence[Mark] = (), bad_x: Sequence[float] = (), xfmt=None,
          width: int = 560, height: int = 220, y0: bool = False, xbase: int = 10) -> str:
    """One panel as an ``<svg>`` element; empty string when there is nothing to draw."""
    pts = [(x, y) for ln in lines for x, y in zip(ln.xs, ln.ys)
           if y is not None and math.isfinite(y) and (not logx or x > 0) and (not logy or y > 0)]
    if not pts:
        return ""
    xs = [p[0] for p in pts] + [m.x for m in marks if m.x is not None] + list(bad_x)
    ys = [p[1] for p in pts] + [m.y for m in marks if m.y is not None and (not logy or m.y > 0)]
    xlo, xhi = min(xs), max(xs)
    ylo, yhi = min(ys), max(ys)
    if y0 and not logy:
        ylo = min(0.0, ylo)
    if xlo == xhi:
        xlo, xhi = xlo - 1, xhi + 1
    if ylo == yhi:
        pad = abs(ylo) * 0.1 or 1.0
        ylo, yhi = (ylo / 2, yhi * 2) if logy else (ylo - pad, yhi + pad)
    L, R, T, B = 58, 26, 22 if title else 8, 34
    pw, ph = width - L - R, height - T - B

    def tx(x: float) -> float:
        f = (math.log10(x) - math.log10(xlo)) / (math.log10(xhi) - math.log10(xlo)) if logx else (x - xlo) / (xhi - xlo)
        return L + f * pw

    def ty(y: float) -> float:
        f = (math.log10(y) - math.log10(ylo)) / (math.log10(yhi) - math.log10(ylo)) if logy else (y - ylo) / (yhi - ylo)
        return T + ph - f * ph

    e = html.escape
    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{e(title or ylabel)}">',
           f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="#fff" stroke="#bbb"/>']
    if title:
        out.append(f'<text x="{L}" y="14" font-size="12" font-weight="600">{e(title)}</text>')
    for v in _ticks(ylo, yhi, logy):
        y = ty(v)
        out.append(f'<line x1="{L}" x2="{L + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{L - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{e(_fmt(v))}</text>')
    for v in _ticks(xlo, xhi, logx, xbase):
        x = tx(v)
        lab = xfmt(v) if xfmt else _fmt(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{T + ph}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{T + ph + 13}" font-size="10" text-anchor="middle">{e(lab)}</text>')
    if xlabel:
        out.append(f'<text x="{L + pw / 2}" y="{height - 4}" font-size="10" text-anchor="middle">{e(xlabel)}</text>')
    if ylabel:
        out.append(f'<text x="12" y="{T + ph / 2}" font-size="10" text-anchor="middle" '
                   f'transform="rotate(-90 12 {T + ph / 2})">{e(ylabel)}</text>')
    for i, ln in enumerate(lines):
        color = ln.color or COLORS[i % len(COLORS)]
        segs, cur = [], []
        for x, y in zip(ln.xs, ln.ys):
            if y is None or not math.isfinite(y) or (logx and x <= 0) or (logy and y <= 0):
                if cur:
                    segs.append(cur)
                cur = []
                continue
            cur.append(f"{tx(x):.1f},{ty(y):.1f}")
        if cur:
            segs.append(cur)
        style = ' stroke-opacity="0.3"' if ln.faint else ""
        style += ' stroke-dasharray="4 3"' if ln.dashed else ""
        for s in segs:
            if len(s) == 1:
                px, py = s[0].split(",")
                out.append(f'<circle cx="{px}" cy="{py}" r="2.5" fill="{color}"/>')
            else:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{style} points="{" ".join(s)}"/>')
    for m in marks:
        if m.y is not None and (not logy or m.y > 0) and ylo <= m.y <= yhi:
            y = ty(m.y)
            out.append(f'<line x1="{L}" x2="{L + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="{m.color}" stroke-dasharray="6 3"/>'
                       f'<text x="{L + pw - 2}" y="{y - 3:.1f}" font-size="10" text-anchor="end" fill="{m.color}">'
                       f'{e(m.label)}</text>')
        if m.x is not None and (not logx or m.x > 0):
            x = tx(m.x)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{T}" y2="{T + ph}" stroke="{m.color}" stroke-dasharray="2 2"/>'
                       f'<text x="{x + 2:.1f}" y="{T + 24}" font-size="9" fill="{m.color}">{e(m.label)}</text>')
    for bx in bad_x:
        x = tx(bx)
        out.append(f'<text x="{x:.1f}" y="{T + ph - 3}" font-size="12" text-anchor="middle" fill="#c62828">×</text>')
    named = [(ln, ln.color or COLORS[i % len(COLORS)]) for i, ln in enumerate(lines)
             if ln.label and not ln.faint and any(y is not None and math.isfinite(y) for y in ln.ys)]
    if len(named) > 1 or any(ln.faint for ln in lines):
        lx = L + 6
        for ln, color in named[:8]:
            out.append(f'<rect x="{lx}" y="{T + 5}" width="10" height="3" fill="{color}"/>'
                       f'<text x="{lx + 13}" y="{T + 10}" font-size="10">{e(ln.label)}</text>')
            lx += 22 + 6 * len(ln.label)
    out.append("</svg>")
    return "".join(out)
