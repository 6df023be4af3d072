"""A slow rank that stops no one: every rank's step waits for it at the all-reduce, so only its own
data-loading time (``data_time``) says which rank it is."""

from __future__ import annotations

from llmdiag.logs import analyze_paths


def _log(tmp_path, slow: dict[int, float]) -> dict:
    lines = []
    for step in range(1, 41):
        for rank in (0, 1, 2, 3):
            dt = slow.get(rank, 0.004) if step > 20 else 0.004
            t = 1.3 if step > 20 and slow else 0.3
            lines.append(f"[rank{rank}]: Epoch [1][{step}/500]\tlr: 1.000e-02, data_time: {dt:.3f}, "
                         f"loss: {2.0 - step / 100:.4f}, step_time_ms: {t * 1000:.1f}")
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    return analyze_paths([str(p)])


def test_the_rank_whose_batches_load_slowly_is_the_suspect(tmp_path):
    doc = _log(tmp_path, {2: 1.0})  # mmcv prints data_time in seconds: 1000 ms against 4 ms
    assert doc["suspect_ranks"] == [2]
    assert "rank 2's batches take 1000 ms" in doc["suspect_reason"]
    drop = next(f for f in doc["findings"] if f["kind"] == "throughput_drop")
    assert drop["facts"]["straggler_rank"] == 2


def test_no_suspect_when_every_rank_loads_alike(tmp_path):
    assert _log(tmp_path, {})["suspect_ranks"] == []
    doc = _log(tmp_path, {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0})  # slow storage for all: nobody to drain
    assert "throughput_drop" in {f["kind"] for f in doc["findings"]} and doc["suspect_ranks"] == []


def _timed(tmp_path, times_ms: list[float]) -> dict:
    p = tmp_path / "t.log"
    p.write_text("".join(f"step {i + 1:4d}/{len(times_ms)} | loss {4.4 - i / 100:.4f} | {t:.1f} ms\n"
                         for i, t in enumerate(times_ms)))
    return analyze_paths([str(p)])


def test_millisecond_jitter_is_no_throughput_drop(tmp_path):
    """The live matrix's healthy DDP run on a busy CI host: steps of 2-3 ms, then three of 7-9 ms. Below
    STEP_TIME_FLOOR_MS a step time is timer and scheduler noise; a real slow-down of long steps is still one."""
    noisy = [12.9, 3.0, 2.5, 2.2, 2.2, 5.8, 2.9, 9.1, 8.2, 7.5, 4.0, 4.2]
    assert _timed(tmp_path, noisy)["findings"] == []
    slow = [100.0] * 10 + [180.0] * 5
    assert [f["kind"] for f in _timed(tmp_path, slow)["findings"]] == ["throughput_drop"]
