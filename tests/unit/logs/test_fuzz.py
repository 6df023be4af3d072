"""Fuzzing the parser: arbitrary bytes and mutated real lines never crash it.

Inputs that once broke it live in tests/fixtures/logs/fuzz-corpus/ and are replayed here.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from llmdiag.logs import analyze_paths
from tests.conftest import SHARED

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "fuzz-corpus"
SEEDS = [line for p in sorted((SHARED / "logs").glob("*.log")) for line in p.read_bytes().splitlines()[:4]] or [b"loss 1"]


def _analyze(tmp_path: Path, data: bytes) -> dict:
    p = tmp_path / "f.log"
    p.write_bytes(data)
    doc = analyze_paths([str(p)], chunk=256)
    import json

    json.dumps(doc, allow_nan=False, default=str)
    return doc


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes(tmp_path_factory, data):
    _analyze(tmp_path_factory.mktemp("fz"), data)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SEEDS), st.integers(0, 400), st.binary(max_size=8)), max_size=12))
def test_mutated_real_lines(tmp_path_factory, edits):
    out = []
    for line, cut, junk in edits:
        cut = min(cut, len(line))
        out.append(line[:cut] + junk + line[cut:])
    _analyze(tmp_path_factory.mktemp("fz"), b"\n".join(out))


def test_regression_corpus(tmp_path):
    for p in sorted(CORPUS.glob("*")):
        if p.name != "README.md":
            _analyze(tmp_path, p.read_bytes())


PROGRESS = [
    "[rank0]: step={i} loss=3.{i}5 lr=3.0e-04 grad_norm=1.{i} step_time_ms=41.5 tokens_per_s=12{i}",
    "2024-05-01 10:00:{s:02d},{i} INFO step={i} loss=2.{i} lr=1.0e-04",
    " iteration {i:8d}/ 100000 | consumed samples: {i}0 | elapsed time per iteration (ms): 150{i}.2 | "
    "learning rate: 1.500E-04 | global batch size: 512 | lm loss: 3.{i}E+00 | loss scale: 65536.0 | grad norm: 1.0 |",
]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(PROGRESS), st.lists(st.tuples(st.integers(0, 120), st.binary(max_size=6)), max_size=40),
       st.randoms(use_true_random=False))
def test_bulk_path_equals_line_by_line_on_mutated_progress_lines(tmp_path_factory, fmt, edits, rnd):
    """Template lines with bytes spliced in (a digit more, a NUL, a '\\r', junk) and clean ones."""
    import json

    from llmdiag.logs import bulk

    lines = [fmt.format(i=i, s=i % 60).encode() for i in range(1, 400)]
    for cut, junk in edits:
        k = rnd.randrange(len(lines))
        c = min(cut, len(lines[k]))
        lines[k] = lines[k][:c] + junk + lines[k][c:]
    p = tmp_path_factory.mktemp("fz") / "rank0.log"
    p.write_bytes(b"\n".join(lines) + b"\n")
    fast = analyze_paths([str(p)], chunk=1 << 12, workers=1)
    saved = bulk.learn
    bulk.learn = lambda *a, **k: None
    try:
        slow = analyze_paths([str(p)], chunk=1 << 12, workers=1)
    finally:
        bulk.learn = saved
    for d in (fast, slow):
        d["read"].pop("elapsed_s")
    assert json.loads(json.dumps(fast, default=str)) == json.loads(json.dumps(slow, default=str))
