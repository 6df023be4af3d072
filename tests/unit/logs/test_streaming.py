"""Streaming step table and detectors: the same findings as the full-series rules, bounded memory.

``reference_anomalies`` is the pre-streaming implementation (every step kept, rules run over
the whole series at the end); random series with spikes, NaNs, explosions, drops and loss-
scale collapses, fed in batches of random sizes, must give identical findings.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmdiag.logs import analyzer as analyzer_mod
from llmdiag.logs import table
from llmdiag.logs.analyzer import _add_seen
from llmdiag.logs.engine import analyze_paths
from llmdiag.logs.config import Settings
from llmdiag.logs.window import MedianSketch
from llmdiag.logs.table import StepStore, rows_to_batch

from . import reference_anomalies as ref


def _series(seed: int, n: int) -> list[dict]:
    rnd = random.Random(seed)
    recs, loss, scale = [], 3.0 + rnd.random() * 5, 65536.0
    for s in range(1, n + 1):
        loss = max(0.1, loss + rnd.gauss(0, 0.05))
        r: dict = {"step": s}
        kind = rnd.random()
        v = loss
        if kind < 0.03:
            v = loss * rnd.choice([2, 5, 20])  # spike
        elif kind < 0.04:
            v = math.nan
        elif kind < 0.045:
            v = 0.0
        if rnd.random() < 0.95:
            r["loss"] = v
        if rnd.random() < 0.9:
            g = 1 + rnd.random() * 0.2
            r["grad_norm"] = g * rnd.choice([1, 1, 1, 1, 1, 1, 1, 1, 8, 300]) if rnd.random() < 0.1 else g
        if rnd.random() < 0.9:
            r["tokens_per_s"] = 12000.0 * (0.3 if rnd.random() < 0.08 else 1.0) + rnd.random() * 50
        if rnd.random() < 0.1:
            scale = scale / 2 if rnd.random() < 0.8 else scale * 2
        r["loss_scale"] = scale
        if rnd.random() < 0.02:
            r["skipped"] = 1.0
        if rnd.random() < 0.01:
            r["nan_iters"] = 1.0
        recs.append(r)
    return recs


def _reference(recs: list[dict], s: Settings) -> list[dict]:
    t = ref.StepTable()
    for i, r in enumerate(recs):
        t.add(r, "f.log", i + 1, None, None)
    idx = list(range(len(t)))
    spikes = ref.loss_spikes(t, idx, s)
    out = ref.nan_values(t, idx) + spikes + ref.grad_norm_jumps(t, idx, s, spikes) + ref.throughput_drop(t, idx, s)
    c = ref.loss_scale_collapse(t, idx, s)
    return out + ([c] if c else [])


def _streamed(recs: list[dict], s: Settings, cuts: list[int]) -> list[dict]:
    store = StepStore(s)
    fid = store.file_id("f.log")
    rows = [(r, i + 1, None, None, fid) for i, r in enumerate(recs)]
    pos = 0
    for cut in sorted(set(cuts)) + [len(rows)]:
        if cut > pos:
            store.add_batch(rows_to_batch(rows[pos:cut]))
            pos = cut
    ser = store.series_of(None)
    if ser is None:
        return []
    spikes = ser.spikes.result()
    out = ser.nan.result() + spikes + ser.grad.result({f["line"] for f in spikes}) + ser.drop.result()
    c = ser.scale.result()
    return out + ([c] if c else [])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(0, 400), window=st.integers(3, 30),
       drop_min=st.integers(1, 5), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_streaming_detectors_match_the_full_series_rules(seed, n, window, drop_min, cuts):
    s = Settings(window=window, drop_min_records=drop_min)
    recs = _series(seed, n)
    assert _streamed(recs, s, cuts) == _reference(recs, s)


def test_a_spike_is_found_identically_in_batches_of_one_and_in_one_batch():
    recs = [{"step": i, "loss": 2.0 + 0.01 * (i % 3), "grad_norm": 1.0} for i in range(1, 200)]
    recs[120]["loss"] = 9.0
    s = Settings()
    one = _streamed(recs, s, list(range(len(recs))))
    whole = _streamed(recs, s, [])
    assert one == whole == _reference(recs, s)
    assert [f["kind"] for f in whole] == ["loss_spike"] and whole[0]["facts"]["spike_first_step"] == 121


def test_step_store_memory_is_bounded(monkeypatch):
    """Structural: what the store and a rank's detectors hold does not grow with the steps."""
    monkeypatch.setattr(MedianSketch, "CAP", 1000)
    s = Settings()
    store = StepStore(s)
    fid = store.file_id("f.log")
    n = 60_000
    for start in range(0, n, 5000):
        b = table.empty_batch(5000)
        steps = np.arange(start + 1, start + 5001)
        b["step"], b["line"], b["file"][:] = steps, steps, fid
        b["loss"] = 3.0 + np.sin(steps / 100.0) * 0.01
        b["has_loss"][:] = 1
        b["grad_norm"], b["has_grad_norm"][:] = np.full(5000, 1.0), 1
        b["step_time_ms"] = 40.0 + (steps % 7)
        b["ts"] = steps * 0.5
        store.add_batch(b)
    ser = store.series_of(None)
    assert len(store) == n and len(store.head) == table.HEAD_ROWS
    assert len(store.plot_sample()["x"]) <= table.PLOT_ROWS
    assert len(ser.spikes.window) <= s.window and len(ser.grad.window) <= s.window
    assert len(ser.drop.window) <= s.window
    assert len(ser.metrics.st_rest) <= 1000 and len(ser.stall.gaps) <= 1000
    assert sum(len(t.diffs) for t in ser.tails.values()) <= 1000
    assert ser.metrics.summary()["iter_time_ms_typical"] in {40.0 + k for k in range(7)}


def test_duplicate_keys_are_forgotten_like_one_by_one():
    for s0 in (0, 1, 100, 4096, 4097):
        for n in (0, 1, 5, 4096, 4097, 9000):
            seen_bulk = set(range(-s0, 0))
            seen_arr = set(seen_bulk)
            seen_one = set(seen_bulk)
            keys = list(range(1, n + 1))
            _add_seen(seen_bulk, keys)
            _add_seen(seen_arr, np.array(keys, dtype=np.int64))
            for k in keys:
                if len(seen_one) > analyzer_mod.SEEN_KEYS:
                    seen_one.clear()
                seen_one.add(k)
            assert seen_bulk == seen_one == seen_arr, (s0, n)
            assert all(type(k) is int for k in seen_arr)


def test_csv_export_streams_every_record(tmp_path):
    import pandas as pd

    from llmdiag.logs.engine import analyze
    from llmdiag.logs.export import export_table

    log = tmp_path / "run.log"
    log.write_text("".join(f"step={i} loss={3 + (i % 5) * 0.01:.2f} lr=1e-4\n" for i in range(1, 7001)))
    doc, an = analyze([str(log)], spill=True)
    try:
        export_table(an.table, csv_path=str(tmp_path / "t.csv"), parquet_path=str(tmp_path / "t.parquet"))
    finally:
        an.table.close()
    assert len(doc["steps"]) == 5000 and doc["steps_total"] == 7000
    csv = pd.read_csv(tmp_path / "t.csv")
    assert len(csv) == 7000 and csv["step"].iloc[-1] == 7000 and csv["loss"].iloc[-1] == 3.0
    assert len(pd.read_parquet(tmp_path / "t.parquet")) == 7000


def test_healthy_long_log_has_no_findings(tmp_path):
    log = tmp_path / "run.log"
    rnd = random.Random(1)
    log.write_text("".join(f"[rank0]: step={i} loss={2 + rnd.random() * 0.05:.4f} grad_norm={1 + rnd.random() * 0.1:.3f}"
                           f" tokens_per_s={12000 + rnd.randint(-50, 50)}\n" for i in range(1, 30001)))
    doc = analyze_paths([str(log)], chunk=1 << 16)
    assert doc["findings"] == [] and doc["metrics"]["num_steps_with_loss"] == 30000


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, width=64), max_size=30),
       st.lists(st.floats(allow_nan=False, width=64), max_size=200), st.integers(1, 40),
       st.sampled_from(["min", "max"]))
def test_rolling_blocks_equal_the_direct_windows(prev, v, w, fn):
    from llmdiag.logs.window import rolling, rolling_direct

    f = np.min if fn == "min" else np.max
    arr = np.array(v, dtype=np.float64)
    assert rolling(prev, arr, w, f).tolist() == rolling_direct(prev, arr, w, f).tolist()


def _dedup_one_by_one(batches: list[dict]) -> list[list[int]]:
    """The rows each batch keeps, by the rule applied row by row (the reference)."""
    seen: dict = {}
    out = []
    for b in batches:
        keys = np.where(b["iter"] != table.NONE, b["iter"], b["step"]).tolist()
        keep = []
        for i, (key, rk) in enumerate(zip(keys, b["rank"].tolist())):
            if key != table.NONE:
                s = seen.setdefault(rk, set())
                if key in s:
                    continue
                if len(s) > analyzer_mod.SEEN_KEYS:
                    s.clear()
                s.add(key)
            keep.append(i)
        out.append(keep)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_interleaved_ranks_dedup_like_one_by_one(seed):
    """Eight ranks' lines interleaved (torchrun's [rankN]:), tee'd repeats, restarts, keyless rows:
    the per-rank vectorised check keeps exactly the rows the one-by-one rule keeps."""
    rnd = random.Random(seed)
    an = analyzer_mod.LogAnalyzer()
    batches, step = [], {r: 0 for r in range(8)}
    for _ in range(12):
        n = rnd.choice([1, 50, 3000, 9000])
        rows = []
        for _ in range(n):
            r = rnd.choice([0, 1, 2, 3, 4, 5, 6, 7, table.NONE]) if seed % 2 else rnd.randrange(8)
            rr = 0 if r == table.NONE else r
            u = rnd.random()
            if u < 0.03:
                step[rr] = max(0, step[rr] - rnd.randint(1, 50))  # a repeat or a restart from a checkpoint
            elif u > 0.01 or seed < 4:
                step[rr] += 1
            rows.append((r, step[rr] if u > 0.02 else table.NONE))
        b = table.empty_batch(n)
        b["rank"] = np.array([r for r, _ in rows], dtype=np.int64)
        b["step"] = np.array([s for _, s in rows], dtype=np.int64)
        b["line"] = np.arange(n, dtype=np.int64)
        batches.append(b)
    want = _dedup_one_by_one(batches)
    for b, keep in zip(batches, want):
        got = an._dedup(b)
        assert got["line"].tolist() == keep
