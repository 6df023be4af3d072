"""Fuzzing the parser: arbitrary bytes and mutated real lines never crash it.

Inputs that once broke it live in tests/fixtures/logs/fuzz-corpus/ and are replayed here.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from probes.logs import analyze_paths
from tests.conftest import SHARED

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "fuzz-corpus"
SEEDS = [l for p in sorted((SHARED / "logs").glob("*.log")) for l in p.read_bytes().splitlines()[:4]] or [b"loss 1"]


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
