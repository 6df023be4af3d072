"""A loss spike is judged against the run's own noise (detectors.LossSpikeDetector, window.step_noise).

A small-batch run's loss moves some 10 % from one record to the next, and now and then a hard batch lifts it by a quarter:
measured over the 20-record baseline alone, the spread is often a third too small, and a 6-sigma rule fired on
those batches. The noise is measured over a longer history, on first differences (a falling curve's trend cancels),
so the same run with a real spike still names its step.
"""

from __future__ import annotations

import math
import random

from llmdiag.logs import analyze_paths
from llmdiag.logs.window import step_noise


def noisy_run(spike_at: int | None = None, seed: int = 7) -> str:
    rnd = random.Random(seed)
    rows = []
    for s in range(1, 2001):
        loss = (2.0 + 8 * math.exp(-s / 300)) * math.exp(rnd.gauss(0, 0.10))
        if rnd.random() < 0.01:
            loss *= 1.25  # a hard batch
        if s == spike_at:
            loss *= 4
        rows.append(f"step {s} | loss {loss:.4f} | lr 3.00e-04")
    return "\n".join(rows) + "\n"


def test_step_noise_is_the_record_to_record_spread_without_the_trend():
    rnd = random.Random(1)
    falling = [(2 + 8 * math.exp(-s / 50)) * math.exp(rnd.gauss(0, 0.1)) for s in range(200)]
    level = falling[-1]
    assert 0.07 * level < step_noise(falling, level) < 0.14 * level
    assert 0.6 * level < step_noise(falling, level, 6) < 1.2 * level  # six sigmas: exp(0.6) - 1 of the level
    assert step_noise([5.0] * 5, 5.0) == 0.0  # too short to say
    signed = [rnd.gauss(0, 0.5) for _ in range(100)]  # a loss that is not positive (an RL objective): own units
    assert 0.3 < step_noise(signed, 0.0) < 0.7


def test_hard_batches_of_a_noisy_run_are_no_spike(tmp_path):
    for seed in range(1, 21):
        p = tmp_path / f"train{seed}.log"
        p.write_text(noisy_run(seed=seed))
        doc = analyze_paths([str(p)])
        assert [f for f in doc["findings"] if f["kind"] == "loss_spike"] == [], (seed, doc["findings"])


def test_a_real_spike_in_the_same_noise_is_named_at_its_step(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(noisy_run(spike_at=1200))
    doc = analyze_paths([str(p)])
    spikes = [f for f in doc["findings"] if f["kind"] == "loss_spike"]
    assert [f["facts"]["spike_first_step"] for f in spikes] == [1200], spikes
