"""Rolling-window helpers shared by the streaming detectors and the metrics of one rank.

A record's position (step, else iteration, else epoch), the location a finding reports,
rolling minima / maxima over the previous ``w`` values of a batch (for the vectorised
"nothing can fire here" bounds), the robust median / MAD spread, and a bounded median.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from llmdiag.logs.columns import NONE


def fmt(v: float) -> str:
    return f"{v:.4g}"


def xval(b: dict, i: int) -> tuple[str, float | int | None, int]:
    """The record's position: its step, else its iteration, else its epoch; and its line."""
    line = int(b["line"][i])
    for col in ("step", "iter"):
        v = int(b[col][i])
        if v != NONE:
            return col, v, line
    e = float(b["epoch"][i])
    return "epoch", None if math.isnan(e) else e, line


def place(x: tuple) -> str:
    """A position from :func:`xval` in words: "step 120", or "line 9" for a record that prints no position."""
    return f"{x[0]} {x[1]}" if x[1] is not None else f"line {x[2]}"


def place_at(at: dict) -> str:
    """The position of a :func:`where` dict in words."""
    return place((at["x_name"], at["x"], at["line"]))


def where(b: dict, i: int, files: list[str]) -> dict:
    name, x, _ = xval(b, i)
    step = int(b["step"][i]) if b["step"][i] != NONE else (int(b["iter"][i]) if b["iter"][i] != NONE else None)
    ts = float(b["ts"][i])
    rank = int(b["rank"][i])
    return {"x_name": name, "x": x, "line": int(b["line"][i]), "file": files[int(b["file"][i])],
            "rank": None if rank == NONE else rank, "step": step, "ts": None if math.isnan(ts) else ts}


def pos_key(key: str, x_name: str) -> str:
    """The name of a fact that holds a position: ``spike_first_step`` holds an epoch where the records print
    only an epoch (and no summary placed them on steps, see epochs.py), so it is ``spike_first_epoch`` there."""
    return key.replace("step", "epoch") if x_name == "epoch" else key


def finding(kind: str, at: dict, message: str, facts: dict) -> dict:
    d = dict(at)
    d.update(kind=kind, message=message, facts=facts)
    return d


def xs(b: dict) -> np.ndarray:
    """Positions as floats (NaN = none): step, else iter, else epoch."""
    step, it = b["step"], b["iter"]
    x = np.where(step != NONE, step, it).astype(np.float64)
    return np.where(np.where(step != NONE, step, it) == NONE, b["epoch"], x)


def rolling(prev: list[float], v: np.ndarray, w: int, fn) -> np.ndarray:
    """For each v[p], fn (np.min / np.max) over the ``w`` values before it in prev + v (inf pad).

    Van Herk / Gil-Werman: with the series cut into blocks of ``w``, a window is the suffix of
    one block and the prefix of the next, so two running minima per block give every window
    in O(n) instead of O(n·w) (min and max are exact: the result equals the direct one).
    """
    pad = math.inf if fn is np.min else -math.inf
    acc = np.minimum.accumulate if fn is np.min else np.maximum.accumulate
    c = np.concatenate([np.full(w, pad), np.asarray(prev, dtype=np.float64), v])
    starts = len(prev) + np.arange(len(v))  # window [s, s + w) of c ends just before v[p]
    if not len(v):
        return np.empty(0)
    blocks = -(-len(c) // w)
    c = np.concatenate([c, np.full(blocks * w - len(c), pad)]).reshape(blocks, w)
    head = acc(c, axis=1).ravel()  # from each block's start
    tail = acc(c[:, ::-1], axis=1)[:, ::-1].ravel()  # to each block's end
    both = np.minimum if fn is np.min else np.maximum
    return both(tail[starts], head[starts + w - 1])


def rolling_direct(prev: list[float], v: np.ndarray, w: int, fn) -> np.ndarray:
    """The plain O(n·w) form of :func:`rolling` (the tests compare the two)."""
    pad = math.inf if fn is np.min else -math.inf
    c = np.concatenate([np.full(w, pad), np.asarray(prev, dtype=np.float64), v])
    win = sliding_window_view(c, w)[len(prev):len(prev) + len(v)]
    return fn(win, axis=1)


def robust(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    mad = statistics.median([abs(v - med) for v in values])
    return med, 1.4826 * mad


#: losses the run's noise is measured over (longer than the baseline window: 20 values give a MAD that is
#: often a third too small, and a 6-sigma rule on it fires on an ordinary hard batch of a noisy run)
NOISE_HISTORY = 500

#: An excerpt of a few records: a jump is named before the usual history only when it is far beyond any noise.
#: A loss spike with 1-2 losses before it: at least this many times their median (and spike_min_abs above it).
SHORT_LOSS_RATIO = 10.0
#: Records of history the grad-norm rule normally waits for.
GRAD_HISTORY = 5


def short_grad_ratio(k, spike_ratio: float, explosion_ratio: float):
    """The grad-norm jump ratio needed after ``k`` earlier records (array or int): the usual ``spike_ratio``
    from GRAD_HISTORY on; before, an explosion ten times larger for each record short of three
    (1 record: 100x the explosion ratio, 2: 10x, 3-4: the explosion ratio); none before the first record."""
    k = np.asarray(k)
    short = explosion_ratio * 10.0 ** np.maximum(0, 3 - k)
    return np.where(k >= GRAD_HISTORY, spike_ratio, np.where(k >= 1, short, np.inf))


def step_noise(history, med: float, k: float = 1.0) -> float:
    """How far above ``med`` the loss may go by the run's record-to-record noise: ``k`` sigmas of the robust spread
    of first differences over the last NOISE_HISTORY losses (a difference removes the trend of a falling curve; one
    difference carries two records' noise, hence / sqrt 2). In log space when every loss is positive, a loss's noise
    being a share of its level: ``med·(exp(k·σ) − 1)``; else in the loss's units. 0 with fewer than 10 differences."""
    h = np.asarray(history, dtype=float)[-NOISE_HISTORY:]
    if len(h) < 11:
        return 0.0
    rel = bool(np.all(h > 0)) and med > 0
    d = np.diff(np.log(h) if rel else h)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
    return med * math.expm1(k * sigma) if rel else k * sigma


class MedianSketch:
    """Exact median up to CAP values, then over every 2nd, 4th, ... value."""

    CAP = 1 << 16

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.n = 0
        self.seen = 0
        self.stride = 1

    def add(self, v: np.ndarray) -> None:
        if self.stride > 1:
            idx = np.arange(self.seen, self.seen + len(v))
            self.seen += len(v)
            v = v[idx % self.stride == 0]
        else:
            self.seen += len(v)
        if len(v):
            self.parts.append(np.asarray(v, dtype=np.float64))
            self.n += len(v)
        if self.n > self.CAP:
            allv = np.concatenate(self.parts)[::2]
            self.parts, self.n, self.stride = [allv], len(allv), self.stride * 2

    def __len__(self) -> int:
        return self.n

    def median(self) -> float:
        return statistics.median(np.concatenate(self.parts).tolist())


def opt(v) -> float | None:
    v = float(v)
    return None if math.isnan(v) else v
