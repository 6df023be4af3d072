"""Plots for the HTML report, drawn with matplotlib (Agg) and embedded as SVG data URIs.

matplotlib is imported lazily (it costs ~0.5 s). The SVG has text as paths and no external
references, and it is embedded through ``<img src="data:...">`` so it cannot run script or
fetch anything. Output is deterministic (fixed hash salt, no date) so reports diff cleanly.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from llmdiag.reports import docview as dv

_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


#: shown in place of the plots when matplotlib is absent (it is the optional extra ``plots``)
MISSING = ("Plots omitted: matplotlib is not installed (pip install 'llmdiag[plots]'). "
           "Every number is in the tables of this report.")


def missing() -> str | None:
    """None when plots can be drawn, else the note to show instead."""
    import importlib.util

    return None if importlib.util.find_spec("matplotlib") is not None else MISSING


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "llmdiag", "svg.fonttype": "path", "font.size": 9})
    return plt


def _uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _pyplot().close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _size_label(n: float, _pos=None) -> str:
    for unit, div in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= div:
            return f"{n / div:g}{unit}"
    return f"{n:g}"


def bandwidth(rows: Sequence[Mapping[str, Any]], collective: str, plateau: float | None = None) -> str | None:
    """busbw vs message size for one collective, out-of-place and in-place; None when no data."""
    if missing():
        return None
    pts = {p: [(r["size_bytes"], r[p].get("busbw")) for r in rows if r.get("size_bytes") and r[p].get("busbw") is not None
               and math.isfinite(r[p]["busbw"])] for p in dv.PLACEMENTS}
    if not any(pts.values()):
        return None
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(6.0, 3.0))
    for (placement, data), color, marker in zip(pts.items(), _COLORS, ("o", "s")):
        if data:
            data.sort()
            ax.plot([d[0] for d in data], [d[1] for d in data], marker=marker, ms=3, color=color,
                    label=placement.replace("_", "-"))
    if plateau is not None:
        ax.axhline(plateau, color="#444", ls="--", lw=0.8, label=f"plateau {plateau:.3g} GB/s")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(collective)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return _uri(fig)


def training_curves(rows: Sequence[Mapping[str, Any]], anomalies: Sequence[Mapping[str, Any]]) -> str | None:
    """Loss and grad-norm per step (one line per rank, at most 8), anomalies as red markers."""
    if missing():
        return None
    series = [k for k in ("loss", "grad_norm") if any(dv.number(r.get(k)) is not None for r in rows)]
    if not series:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(series), 1, figsize=(7.0, 2.4 * len(series)), sharex=True, squeeze=False)
    by_rank: dict[Any, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_rank.setdefault(r.get("rank"), []).append(r)
    ranks = sorted(by_rank, key=lambda x: (x is None, x))[:8]
    for ax, key in zip(axes[:, 0], series):
        finite_vals = []
        for rank, color in zip(ranks, _COLORS):
            data = sorted((dv.number(r["step"]), dv.number(r.get(key))) for r in by_rank[rank]
                          if dv.number(r.get(key)) is not None)
            xs = [d[0] for d in data]
            ys = [d[1] if math.isfinite(d[1]) else float("nan") for d in data]
            finite_vals += [y for y in ys if math.isfinite(y)]
            label = f"rank {rank}" if rank is not None else key
            ax.plot(xs, ys, color=color, lw=1.0, label=label)
            bad = [x for x, d in zip(xs, data) if not math.isfinite(d[1])]
            if bad:
                top = max(finite_vals) if finite_vals else 1.0
                ax.scatter(bad, [top] * len(bad), marker="x", color="#d62728", zorder=5, label=f"non-finite {key}")
        for a in anomalies:
            step = dv.number(a.get("step"))
            if step is not None:
                ax.axvline(step, color="#d62728", lw=0.8, ls=":", alpha=0.8)
        ax.set_ylabel(key.replace("_", " "))
        ax.grid(True, alpha=0.3)
        if len(ranks) > 1 or any(a.get("step") is not None for a in anomalies):
            ax.legend(loc="upper right", fontsize=7)
    marked = [a for a in anomalies if dv.number(a.get("step")) is not None]
    for a in marked[:12]:
        axes[0, 0].annotate(str(a.get("kind", "")), (dv.number(a["step"]), 1.0), xycoords=("data", "axes fraction"),
                            fontsize=7, color="#d62728", rotation=90, va="top", ha="right")
    axes[-1, 0].set_xlabel("step")
    return _uri(fig)


def timeline(series: Mapping[str, Mapping[str, Sequence[Any]]], title: str, unit: str) -> str | None:
    """Lines of ``{label: {"t": [...], "v": [...]}}`` over time (seconds from the start)."""
    if missing():
        return None
    if not any(s.get("v") for s in series.values()):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 2.4))
    for (label, s), color in zip(series.items(), _COLORS * 4):
        ax.plot(s.get("t") or [], [dv.number(v) if v is not None else float("nan") for v in s.get("v") or []],
                color=color, lw=1.0, label=label)
    ax.set_title(title)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel(unit)
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend(loc="upper left", fontsize=7)
    return _uri(fig)
