"""Progress lines in bulk (probes/logs/bulk.py) give exactly what the line-by-line path gives."""

from __future__ import annotations

import importlib.util
import json
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probes.logs import bulk
from probes.logs.analyzer import analyze_paths, prefilter_regex


def _learn(line: str, rank=None):
    return bulk.learn(line, rank, prefilter_regex("re"))


@pytest.mark.parametrize("line", [
    "[rank0]: step=12 loss=3.4512 lr=3.0e-04 grad_norm=1.234 step_time_ms=41.3 tokens_per_s=12400",
    "iter 100: loss 3.2000, time 101.23ms, mfu 30.12%",
    "step=12 loss=3.1 loss_scale=65536.0 grad_norm=1.2 time=40.0ms",
    " iteration 10/ 100000 | consumed samples: 5120 | elapsed time per iteration (ms): 1503.2 | learning rate:"
    " 1.500E-04 | global batch size: 512 | lm loss: 3.012345E+00 | loss scale: 65536.0 | grad norm: 1.034 |",
])
def test_templates_for_common_progress_lines(line):
    tpl = _learn(line)
    assert tpl is not None and ("loss" in tpl.fields)


@pytest.mark.parametrize("line", [
    "step: 12 | tps: 5,580 | loss: 3.1",  # a thousands separator changes meaning with the digit count
    "2024-05-01 10:00:00,123 INFO step=12 loss=3.1",  # timestamps are not templated
    "step=12 loss=nan",  # NaN is literal text: never a template
    "step 100: train loss 3.1, val loss 3.2",  # an eval record
    "step=12 loss=3.1 CUDA error: an illegal memory access",  # a signature on the line
    "step=12 loss=3.1 worker failed (exitcode: -6) local_rank: 0 (pid: 12)",  # fires for -6/-9/-11 only
])
def test_no_template_where_it_would_be_unsafe(line):
    assert _learn(line) is None


def _mixed_log(seed: int) -> str:
    rnd = random.Random(seed)
    out = []
    step = 0
    for _ in range(rnd.randint(200, 3000)):
        r = rnd.random()
        if r < 0.4:
            step += 1
            out.append(f"[rank{rnd.choice([0, 0, 0, 1])}]: step={step} loss={2 + rnd.random():.4f} lr=3.0e-04 "
                       f"grad_norm={rnd.choice([1.1, 1.25, 900.5]):.3f} tokens_per_s={rnd.randint(1, 20000)}")
            if rnd.random() < 0.02:
                out.append(out[-1])  # pasted twice: a duplicate step
        elif r < 0.45:
            step += 1
            out.append(f"[rank0]: step={step} loss=nan lr=3.0e-04 grad_norm=1.0 tokens_per_s=5")
        elif r < 0.47:
            out.append(f"[rank0]: step={step} loss=1234567890123456789.5 lr=3.0e-04 grad_norm=1.0 tokens_per_s=5")
        elif r < 0.48:
            out.append(f"[rank0]: step={step} loss=3.5 lr=3.0e-04 grad_norm=1.0 tokens_per_s=5\rnext ChildFailedError")
        elif r < 0.49:
            out += ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "Root Cause (first observed "
                    "failure):", "[0]:", "  rank      : 3 (local_rank: 3)", "  exitcode  : -9 (pid: 1)",
                    f"[rank0]: step={step + 1} loss=2.5 lr=3.0e-04 grad_norm=1.0 tokens_per_s=5", "=" * 20]
        elif r < 0.5:
            out.append(f"iter {step}: loss {2 + rnd.random():.4f}, time 101.2ms, mfu 30.1%")
        elif r < 0.51:
            out.append("node-1:1:2 [0] misc/socket.cc:1 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1> failed")
        else:
            out.append(f"node-{rnd.randint(1, 9)}:11:22 [3] NCCL INFO Connected all rings")
    return "\n".join(out) + "\n"


def _doc(path, chunk, monkeypatch, templates: bool) -> dict:
    with monkeypatch.context() as m:
        if not templates:
            m.setattr(bulk, "learn", lambda *a, **k: None)
        doc = analyze_paths([str(path)], chunk=chunk, workers=1)
    doc["read"].pop("elapsed_s")
    return json.loads(json.dumps(doc, default=str))


@pytest.mark.parametrize("seed", range(6))
def test_bulk_equals_line_by_line(tmp_path, monkeypatch, seed):
    p = tmp_path / "rank0.log"
    p.write_text(_mixed_log(seed))
    slow = _doc(p, 1 << 12, monkeypatch, templates=False)
    for chunk in (1 << 12, 1 << 14, None):
        assert _doc(p, chunk, monkeypatch, templates=True) == slow


@settings(max_examples=50, deadline=None)
@given(st.lists(st.from_regex(r"[0-9]{1,15}(\.[0-9]{1,15})?", fullmatch=True), min_size=1, max_size=200))
def test_vectorised_numbers_equal_float(texts):
    texts = [t for t in texts if len(t) <= 16]
    if not texts:
        return
    col = [t.encode() for t in texts]
    lens = np.fromiter(map(len, col), dtype=np.int64, count=len(col))
    mant, frac = bulk._decimals(b"".join(col), lens)
    got = (mant / bulk._POW10F[frac]).tolist()
    assert got == [float(t) for t in texts]
    ints = [i for i, t in enumerate(texts) if "." not in t]
    assert [int(mant[i]) for i in ints] == [int(texts[i]) for i in ints]


@pytest.mark.skipif(importlib.util.find_spec("hyperscan") is None, reason="hyperscan (fast-logs extra) not installed")
@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(["loss", "Error", " -> 3", " -> 3\n", "\n", "WorkNCCL", "x", " ", "7", "-> ",
                                 "Loss", "errno", "\r", "Exception"]), max_size=60), st.integers(0, 20))
def test_hyperscan_prefilter_yields_re_matches(pieces, pos):
    buf = "".join(pieces).encode()
    hs, rx = prefilter_regex("hyperscan"), prefilter_regex("re")
    assert [m.span() for m in hs.finditer(buf, pos)] == [m.span() for m in rx.finditer(buf, pos)]
    assert re.compile(rx.pattern).pattern == hs.pattern


def test_a_later_dominant_progress_shape_is_learned_again(tmp_path, monkeypatch):
    from probes.logs import analyzer as analyzer_mod

    lines = [f"step={s} note=1 loss={3 + s % 7 * 0.01:.4f}" for s in range(1, 3)]
    lines += [f"[rank0]: step={s} loss={3 + s % 7 * 0.01:.4f} lr=3.0e-04" for s in range(3, 20000)]
    p = tmp_path / "run.log"
    p.write_text("\n".join(lines) + "\n")
    bulk_lines = []
    orig = analyzer_mod.LogAnalyzer.bulk
    monkeypatch.setattr(analyzer_mod.LogAnalyzer, "bulk",
                        lambda self, tpl, values, lns, fid: (bulk_lines.append(len(lns)), orig(self, tpl, values, lns, fid)))
    doc = analyze_paths([str(p)], chunk=1 << 16, workers=1)
    assert doc["metrics"]["num_steps_with_loss"] == 19997  # rank 0 (the first two lines have no rank)
    assert sum(bulk_lines) > 15000
