"""A progress bar's line read by the C kernel (``_fastscan.bars``) gives what the regexes give.

``analyzer._bar_columns`` reads every redraw of a tqdm bar's line at once; with the kernel it must
give the regexes' columns exactly (counter, epoch, total, each postfix value, where each is present),
or no answer (the regexes then read the line). Lines are drawn from the pieces real bars print and
from the pieces that make a regex read differently (Unicode spaces and digits, thousands separators,
signs, a non-bar redraw, a key glued to a longer one, a head split by a carriage return).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmdiag.logs import analyzer, bulk
from llmdiag.logs.formats import bar_reader
from llmdiag.logs.progress import progress_of

pytestmark = pytest.mark.skipif(bulk._fastscan is None, reason="the C kernel is not built in this install")

NUMS = ["3.018", "nan", "NaN", "-inf", "inf", "1e-05", "2.5E+3", "0", "-0.0", "7.", ".5", "1,234.5", "12,3",
        "+-1", "--2", "12345678901234567", "4.0\u0663", "\u0663", "3e", "3.1e-", "1.5\u00a0"]
KEYS = ["train_loss", "loss", "grad_norm", "lr", "v_num", "train/loss", "val_loss"]
SPACES = [" ", "  ", "\u00a0", "\u2003", "\t", "", "\u0663"]


@st.composite
def bar_lines(draw):
    epochs = draw(st.booleans())
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    if "train_loss" not in keys and "loss" not in keys:
        keys.append("train_loss")
    total = draw(st.sampled_from([10, 200, 1000]))
    segs = []
    for i in range(draw(st.integers(1, 12))):
        count = draw(st.integers(0, total))
        sp = draw(st.sampled_from(SPACES)) if draw(st.integers(0, 9)) == 0 else " "
        lead = f"Epoch {draw(st.integers(0, 3))}:{sp} 42%|\u2588\u258c  " if epochs else " 42%|\u2588\u258c  "
        post = ", ".join(f"{k}={draw(st.sampled_from(NUMS)) if draw(st.integers(0, 5)) == 0 else f'{3 + i / 7:.3f}'}"
                         for k in keys if draw(st.integers(0, 7)))
        seg = f"{lead}| {count}/{total}{sp}[00:01<00:08, 10.5it/s{', ' + post if post else ''}]"
        kind = draw(st.integers(0, 30))
        if kind == 0:
            seg = "   "  # a blank redraw (the bar's clearing)
        elif kind == 1:
            seg = "some other text"
        elif kind == 2:
            seg = seg + seg  # two heads in one redraw
        elif kind == 3:
            seg = seg.replace("| ", "|\r ", 1)  # a head cut by a carriage return
        elif kind == 4:
            seg = "x" + seg.replace("train_loss=", "xtrain_loss=")
        segs.append(seg)
    return "\r" + "\r".join(segs), keys


def _reader(line: str):
    first = next((s for s in line.split("\r") if "oss" in s), None)
    rec = progress_of(first) if first else None
    if rec is None or rec.get("open"):
        return None
    return bar_reader(first, rec)


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    ep1, c1, t1, v1, p1 = a
    ep2, c2, t2, v2, p2 = b
    if not (np.array_equal(ep1, ep2) and np.array_equal(c1, c2) and np.array_equal(t1, t2)) or v1.keys() != v2.keys():
        return False
    if any(not np.array_equal(v1[k], v2[k], equal_nan=True) for k in v1):
        return False
    used = {k for k in p1 if p1[k].any()} | {k for k in p2 if p2[k].any()}
    return all(k in p1 and k in p2 and np.array_equal(p1[k], p2[k]) for k in used)


@settings(max_examples=400, deadline=None)
@given(bar_lines())
def test_kernel_columns_equal_the_regexes(case):
    line, _keys = case
    got = _reader(line)
    if got is None:
        return
    head, fields, epochs = got
    raw = line.encode()
    fast = analyzer._bar_columns(raw, head, fields, epochs)
    kernel = bulk._fastscan
    try:
        bulk._fastscan = None
        slow = analyzer._bar_columns(raw, head, fields, epochs)
    finally:
        bulk._fastscan = kernel
    assert _same(fast, slow), (line, fast, slow)


def test_kernel_reads_a_plain_lightning_line_and_declines_what_it_cannot_be_sure_of():
    segs = [f"\rEpoch 2:  {n}%|\u2588         | {n}/50 [00:01<00:08, 10.5it/s, v_num=0, train_loss={3 - n / 100:.3f}]"
            for n in range(1, 51)]
    got = bulk._fastscan.bars("".join(segs).encode(), True, (b"train_loss",))
    assert got is not None
    cols, vals, present, n = got
    ep, count, total = np.frombuffer(cols, dtype=np.int64).reshape(3, n)
    assert n == 50 and set(ep.tolist()) == {2} and count.tolist() == list(range(1, 51)) and set(total.tolist()) == {50}
    assert np.frombuffer(vals, dtype=np.float64).tolist() == [float(f"{3 - n / 100:.3f}") for n in range(1, 51)]
    assert bytes(present) == b"\x01" * 50
    nan = "".join(segs).replace("train_loss=2.750", "train_loss=nan").encode()
    v = np.frombuffer(bulk._fastscan.bars(nan, True, (b"train_loss",))[1], dtype=np.float64)
    assert math.isnan(v[24]) and not np.isnan(np.delete(v, 24)).any()  # one NaN redraw among 50 is kept
    for odd in ("train_loss=1,234", "train_loss=3\u0663", "Epoch 2:\u00a0"):  # thousands, a Unicode digit
        line = "".join(segs).replace("train_loss=2.750" if "loss" in odd else "Epoch 2: ", odd, 1)
        assert bulk._fastscan.bars(line.encode(), True, (b"train_loss",)) is None or "\u00a0" in odd
    glued = "".join(segs) + "\rRuntimeError: CUDA error"
    assert bulk._fastscan.bars(glued.encode(), True, (b"train_loss",)) is None
