"""The C kernel's keyword prefilter (prefilter.KernelPrefilter) finds exactly re's matches."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmdiag.logs import signatures
from llmdiag.logs.analyzer import prefilter_regex
from llmdiag.logs.prefilter import KernelPrefilter, compile_prefilter

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llmdiag.logs._fastscan") is None,
                                reason="the C kernel is not built")

ROOT = Path(__file__).resolve().parents[3]
#: the repository's log fixtures and, where this checkout has them, the labelled logs
LOGS = sorted(p for d in (ROOT / "tests" / "fixtures" / "logs", ROOT.parent / "shared" / "logs",
                          ROOT.parent / "shared" / "logs-real", ROOT / "shared" / "logs",
                          ROOT / "shared" / "logs-real")
              if d.is_dir() for p in d.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".out"))
PIECES = (["\n", "\r", " ", "x", "7", "42", " -> ", " -> 3", " -> 3\n", " -> 12\t", " -> 3x", "-> 3", " ->  3",
           ":", ":4", "cc:47", ": 43", "::", ":47 -> 3",
           "NCCL INFO", "[rank1]: ", "node-3:123:456 [2] "]
          + [k for k in signatures.KEYWORDS] + [k[:-1] for k in signatures.KEYWORDS[::7]])


def _kernel() -> KernelPrefilter:
    """A fresh one: its anchors are chosen from the first text it scans."""
    kp = compile_prefilter([re.escape(k) for k in signatures.KEYWORDS] + list(signatures.PATTERNS), "kernel")
    assert isinstance(kp, KernelPrefilter)
    return kp


def _spans(it) -> list[tuple[int, int]]:
    return [m.span() for m in it]


def test_auto_takes_the_kernel_where_it_is_built():
    kp = prefilter_regex("kernel")
    assert isinstance(kp, KernelPrefilter) and kp.pattern == prefilter_regex("re").pattern
    assert isinstance(prefilter_regex("auto"), KernelPrefilter)


def test_anchors_come_from_a_long_enough_sample():
    kp = _kernel()
    assert _spans(kp.finditer(b"loss 1\n")) == [(0, 4)]
    first = kp.anchors
    noise = b"node-1:22:33 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n" * 2000
    list(kp.finditer(noise))
    assert kp.anchors != first  # chosen again from the longer text
    settled = kp.anchors
    list(kp.finditer(b"loss 1\n" * 100000))
    assert kp.anchors == settled


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=80), st.integers(0, 40))
def test_kernel_yields_re_matches(pieces, pos):
    buf = "".join(pieces).encode()
    kp, rx = _kernel(), prefilter_regex("re")
    assert _spans(kp.finditer(buf, pos)) == _spans(rx.finditer(buf, pos))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES + ["\r"] * 8), max_size=80), st.integers(0, 40))
def test_first_match_per_line_is_re_filtered(pieces, pos):
    """What the reader asks for: of re's matches, the first on each line (a bar's updates on one line)."""
    buf = "".join(pieces).encode()
    kp, rx = _kernel(), prefilter_regex("re")
    want, seen = [], set()
    for m in rx.finditer(buf, pos):
        line = buf.count(b"\n", 0, m.start())
        if line not in seen:
            seen.add(line)
            want.append(m.span())
    assert _spans(kp.finditer(buf, pos, True)) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60), st.binary(max_size=4000), st.integers(0, 40))
def test_any_anchors_give_the_same_matches(pieces, sample, pos):
    """The anchors only decide speed: those of an unrelated sample find the same matches."""
    buf = "".join(pieces).encode()
    kp, rx = _kernel(), prefilter_regex("re")
    kp.use_anchors(sample)
    assert _spans(kp.finditer(buf, pos)) == _spans(rx.finditer(buf, pos))


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_kernel_on_real_logs(path):
    data = path.read_bytes()
    kp, rx = _kernel(), prefilter_regex("re")
    for start in range(0, len(data), 1 << 16):
        chunk = data[start:start + (1 << 16)]
        for pos in (0, 1, len(chunk) // 2):
            assert _spans(kp.finditer(chunk, pos)) == _spans(rx.finditer(chunk, pos)), (path, start, pos)


def test_other_pattern_shapes_use_the_next_engine():
    parts = [re.escape(k) for k in ("loss", "Error")] + [r"foo$"]
    with pytest.raises(ValueError):
        compile_prefilter(parts, "kernel")
    assert not isinstance(compile_prefilter(parts, "auto"), KernelPrefilter)
    for part in (r"a\d", r"a.b", r"x", r"(?:ab)", r"a\nb", "ab\\b"):
        with pytest.raises(ValueError):
            compile_prefilter([part], "kernel")
    kp = compile_prefilter([re.escape("a.b c"), r"\-> \d+(?:\s|$)"], "kernel")
    assert kp.keywords == (b"a.b c", b"-> ") and kp.tails == (0, 1)


def test_no_fastscan_means_no_kernel(monkeypatch):
    monkeypatch.setenv("LLMDIAG_NO_FASTSCAN", "1")
    parts = [re.escape(k) for k in signatures.KEYWORDS] + list(signatures.PATTERNS)
    assert not isinstance(compile_prefilter(parts, "auto"), KernelPrefilter)


def test_return_code_chains_are_candidates_rings_are_not():
    """An NCCL return-code chain follows a source line (``socket.cc:47 -> 3``); a ring or channel printed by
    NCCL INFO (``43 -> 44 [receive]`` of 2.4, ``0[0] -> 1[1] via`` later) is not one, on any engine."""
    chain = b"gpu-7:4410:4470 [3] NCCL INFO misc/socket.cc:47 -> 3\n"
    async_chain = b"gpu-7:4410:4470 [3] NCCL INFO init.cc:1912 -> 3 [Async thread]\n"
    rings = (b"ip-10-1-2-3:45305:45310 [0] NCCL INFO Ring 00 : 43 -> 44 [receive] via NET/Socket/0\n"
             b"gpu-7:4410:4470 [3] NCCL INFO Channel 02 : 3 -> 4 via P2P/IPC\n"
             b"gpu-7:4410:4470 [3] NCCL INFO Channel 02/0 : 3[3] -> 4[4] via P2P/IPC/read\n")
    parts = [re.escape(k) for k in signatures.KEYWORDS] + list(signatures.PATTERNS)
    for engine in ("kernel", "re"):
        rx = compile_prefilter(parts, engine)
        assert _spans(rx.finditer(rings)) == [], engine
        assert len(_spans(rx.finditer(chain + rings + async_chain))) == 2, engine
