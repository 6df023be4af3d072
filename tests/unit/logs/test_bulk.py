"""Progress lines in bulk (diag/logs/bulk.py) give exactly what the line-by-line path gives."""

from __future__ import annotations

import importlib.util
import json
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmdiag.logs import bulk
from llmdiag.logs.analyzer import prefilter_regex
from llmdiag.logs.engine import analyze, analyze_paths


def _learn(line: str, rank=None):
    return bulk.learn(line, rank, prefilter_regex("re"))


@pytest.mark.parametrize("line", [
    "[rank0]: step=12 loss=3.4512 lr=3.0e-04 grad_norm=1.234 step_time_ms=41.3 tokens_per_s=12400",
    "iter 100: loss 3.2000, time 101.23ms, mfu 30.12%",
    "step=12 loss=3.1 loss_scale=65536.0 grad_norm=1.2 time=40.0ms",
    " iteration 10/ 100000 | consumed samples: 5120 | elapsed time per iteration (ms): 1503.2 | learning rate:"
    " 1.500E-04 | global batch size: 512 | lm loss: 3.012345E+00 | loss scale: 65536.0 | grad norm: 1.034 |",
    "2024-05-01 10:00:00,123 INFO step=12 loss=3.1",
    "2022-12-21 04:04:21 iter 5920: loss 3.6244, time 954.68ms, mfu 17.66%",
    "[2024-05-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[3e-05], loss=2.5",
    "2024-05-01T10:00:00.123456Z step=5 loss=2.0",
])
def test_templates_for_common_progress_lines(line):
    tpl = _learn(line)
    assert tpl is not None and ("loss" in tpl.fields)
    if line.startswith(("2", "[2")):
        assert tpl.ts_slot is not None


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 24), st.integers(0, 60),
       st.integers(0, 60))
def test_epoch_seconds_equals_the_per_line_timestamp(y, mo, d, h, mi, sec):
    from llmdiag.logs import prefixes

    text = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{sec:02d}"
    want = prefixes.parse_timestamp(prefixes.TS_ANYWHERE.match(text))
    got, ok = bulk.epoch_seconds(*(np.array([v]) for v in (y, mo, d, h, mi, sec)))
    assert bool(ok[0]) == (want is not None)
    if want is not None:
        assert float(got[0]) == want


@pytest.mark.parametrize("line", [
    "step: 12 | tps: 5,580 | loss: 3.1",  # a thousands separator changes meaning with the digit count
    "2024-05-01 10:00:00+02:00 INFO step=12 loss=3.1",  # a numeric time zone (ignored by the per-line path)
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
    for _ in range(rnd.randint(200, 4000)):
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
        elif r < 0.56:
            step += 1
            day = rnd.choice([1, 2, 30, 31])  # 30 and 31 February are no dates: those lines take the slow path
            out.append(f"2024-02-{day:02d} 1{rnd.randint(0, 9)}:0{rnd.randint(0, 9)}:{rnd.randint(10, 59)},"
                       f"{rnd.randint(0, 999):03d} INFO step={step} loss={2 + rnd.random():.4f} lr=1.0e-04")
        elif r < 0.58:
            step += 1
            out.append(f"2024-03-01T00:00:{rnd.randint(10, 59)}.{rnd.randint(0, 99999)}Z step={step} "
                       f"loss={2 + rnd.random():.3f}")
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


KERNELS = ["re"] + (["c"] if bulk._fastscan is not None else [])


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("seed", range(6))
def test_bulk_equals_line_by_line(tmp_path, monkeypatch, seed, kernel):
    p = tmp_path / "rank0.log"
    p.write_text(_mixed_log(seed))
    slow = _doc(p, 1 << 12, monkeypatch, templates=False)
    if kernel == "re":
        monkeypatch.setattr(bulk, "_fastscan", None)
    for chunk in (1 << 12, 1 << 14, None):
        assert _doc(p, chunk, monkeypatch, templates=True) == slow


def test_the_c_kernel_is_built_where_a_compiler_is():
    """setup.py builds it (optional); CI has gcc, so a missing kernel there is a packaging bug."""
    import shutil

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the pure-Python path is used")
    assert bulk._fastscan is not None, "diag/logs/_fastscan.c was not built (pip install -e . builds it)"


# -- the C kernel against the regex path -------------------------------------------------------
_TOKENS = {
    "int": st.from_regex(r"[0-9]{1,17}", fullmatch=True),
    "dec": st.from_regex(r"[0-9]{1,9}\.[0-9]{1,9}", fullmatch=True),
    "exp": st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,12})?[eE][-+]?[0-9]{1,3}", fullmatch=True),
}


@pytest.mark.skipif(bulk._fastscan is None, reason="C kernel not built")
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_c_kernel_matches_a_subset_of_the_regex_with_equal_values(data):
    shapes = data.draw(st.lists(st.sampled_from(["int", "dec", "exp"]), min_size=1, max_size=6))
    seps = data.draw(st.lists(st.sampled_from([" ", "=", " loss=", ": ", " | ", "/", "-", "e", "  x  ", "   "]),
                              min_size=len(shapes) + 1, max_size=len(shapes) + 1))
    seps[0] = data.draw(st.sampled_from(["", "[rank]: step=", "it "]))
    seps[-1] = data.draw(st.sampled_from(["", " |", "ms"]))
    own = [data.draw(_TOKENS[s].filter(lambda t: len(t) <= 12)) for s in shapes]
    flex = data.draw(st.booleans())
    rank = ("slot", 0, "int") if shapes[0] == "int" else ("const", None)
    tpl = bulk.Template(seps, shapes, {f"f{i}": (i, "id") for i in range(len(shapes))}, {}, rank, own, flex=flex)
    lines = []
    for _ in range(data.draw(st.integers(1, 40))):
        kind = data.draw(st.sampled_from(["tpl", "tpl", "noise", "junk"]))
        if kind == "tpl":
            line = tpl.line([data.draw(_TOKENS[s]) for s in shapes])
            if data.draw(st.booleans()):  # padding that differs from the template's
                line = line.replace(" ", data.draw(st.sampled_from(["", "  ", "   "])))
            lines.append(line)
        elif kind == "noise":
            lines.append(data.draw(st.text(alphabet="0123456789 .e-=x|\r", max_size=30)))
        else:
            lines.append(tpl.line([data.draw(_TOKENS[s]) for s in shapes]) + data.draw(st.sampled_from(["\r", "1", "x"])))
    buf = ("\n".join(lines) + "\n").encode()
    assert tpl._split_fast((tpl.line(own) + "\n").encode()) is not None  # its own line always matches
    fast = tpl._split_fast(buf)
    if fast is None:
        return
    rest, fl, fvals, nl = fast
    assert nl == buf.count(b"\n")
    def segment(line: bytes) -> tuple[int, int]:
        """Where the kernel reads a line: whole, else its last carriage-return segment without trailing '\\r's
        (as the reader cuts it)."""
        if slow_split(line) is not None:
            return 0, len(line)
        end = len(line.rstrip(b"\r"))
        return line.rfind(b"\r", 0, end) + 1, end

    saved, tpl.pieces = tpl.pieces, None
    slow_split = lambda line: tpl.split(b"\n" + line + b"\n")  # noqa: E731 (the regex never takes line 1)
    try:
        for row, i in enumerate(fl.tolist()):  # each line the kernel took, as the regex path takes it
            a, b = segment(lines[i - 1].encode())
            slow = slow_split(lines[i - 1].encode()[a:b])
            assert slow is not None
            for k in fvals:
                assert fvals[k][row].item() == slow[2][k][0].item() and fvals[k].dtype == slow[2][k].dtype
        out = buf.split(b"\n")
        for i in fl.tolist():
            a, b = segment(out[i - 1])
            out[i - 1] = out[i - 1][:a] + b"\r" * (b - a) + out[i - 1][b:]
    finally:
        tpl.pieces = saved
    assert rest == b"\n".join(out)


def _reference_match(line: bytes, pieces: tuple, flex: tuple) -> bool:
    def lit(p: bytes, f: bool) -> bytes:
        return bulk._literal_rx(p.decode("latin-1"), f).encode("latin-1")

    rx = b"".join(lit(p, f) + (rb"([0-9]+)" if i < len(pieces) - 1 else b"")
                  for i, (p, f) in enumerate(zip(pieces, flex)))
    return re.fullmatch(rx, line) is not None


@pytest.mark.skipif(bulk._fastscan is None, reason="C kernel not built")
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"1", b"23", b" ", b"  ", b"a", b"\n", b"x=", b"\xff", b"\r", b"."]), max_size=80),
       st.lists(st.sampled_from([b"", b"a", b" x=", b".", b"\r", b"\xff", b"e-", b"  ", b" a  b ", b"x "]),
                min_size=1, max_size=6), st.lists(st.booleans(), min_size=6, max_size=6))
def test_c_kernel_fuzz(parts, pieces, flex):
    """Arbitrary bytes: no crash, and exactly the lines the reference regex matches (ints only)."""
    buf = b"".join(parts)
    pieces = [p for p in pieces]
    for i in range(1, len(pieces) - 1):
        pieces[i] = pieces[i] or b" "
    flex = tuple(flex[:len(pieces)])
    spec = tuple((i, i, 0) for i in range(len(pieces) - 1))
    idx, _offs, vals, rest, nl = bulk._fastscan.scan(buf, tuple(pieces), spec, (0,) * len(spec), flex)
    got = np.frombuffer(idx, dtype=np.int64).tolist()
    lines = buf.split(b"\n")[:-1]  # the unterminated tail is never matched
    want = [i for i, ln in enumerate(lines) if _reference_match(ln, tuple(pieces), flex)
            and all(len(m) <= 15 for m in re.findall(rb"[0-9]+", ln))]
    assert got == want and nl == buf.count(b"\n") and len(rest) == len(buf)
    vv = np.frombuffer(vals, dtype=np.float64).reshape(len(got), len(spec)) if spec else None
    for row, i in enumerate(got):
        nums = [float(m) for m in re.findall(rb"[0-9]+", lines[i])]
        if spec:
            assert vv[row].tolist() == nums


@pytest.mark.skipif(bulk._fastscan is None, reason="C kernel not built")
def test_c_kernel_rejects_bad_templates():
    with pytest.raises(ValueError):
        bulk._fastscan.scan(b"1\n", (b"a1", b""), ((0, 0, 0),))
    with pytest.raises(ValueError):
        bulk._fastscan.scan(b"1\n", (b"", b"", b""), ((0, 0, 0),))
    with pytest.raises(ValueError):
        bulk._fastscan.scan(b"1\n", (b"", b""), ((0, 1, 0),))
    with pytest.raises(ValueError):
        bulk._fastscan.scan(b"1\n", (b"", b""), ((0, 0, 0),), (0,), (True,))


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


def _count_bulk_lines(monkeypatch) -> list[int]:
    """The sizes of the template-line batches the analyzer takes (a list that fills during a run)."""
    from llmdiag.logs import analyzer as analyzer_mod

    sizes: list[int] = []
    orig = analyzer_mod.LogAnalyzer.bulk
    monkeypatch.setattr(analyzer_mod.LogAnalyzer, "bulk",
                        lambda self, tpl, values, lns, fid: (sizes.append(len(lns)), orig(self, tpl, values, lns, fid)))
    return sizes


def _assert_same_as_line_by_line(doc: dict, path, monkeypatch) -> None:
    with monkeypatch.context() as m:
        m.setattr(bulk, "learn", lambda *a, **k: None)
        slow = analyze_paths([str(path)], chunk=1 << 16, workers=1)
    for key in ("findings", "metrics", "steps"):
        assert doc[key] == slow[key]


def test_interleaved_shapes_each_get_a_template(tmp_path, monkeypatch):
    rnd = random.Random(3)
    lines = []
    for s in range(1, 30000):
        if s % 3:
            lines.append(f"[rank0]: step={s} loss={3 + rnd.random():.4f} lr=3.0e-04")
        else:
            lines.append(f"2024-05-01 10:{s // 600 % 60:02d}:{s // 10 % 60:02d} iter {s}: loss {2 + rnd.random():.4f}, "
                         f"time 95{s % 10}.12ms")
        lines.append("node-1:11:22 [3] NCCL INFO Connected all rings")
    p = tmp_path / "run.log"
    p.write_text("\n".join(lines) + "\n")
    bulk_lines = _count_bulk_lines(monkeypatch)
    doc, an = analyze([str(p)], chunk=1 << 16, workers=1)
    assert len(an._templates[str(p)]) == 2
    assert sum(bulk_lines) > 28000
    _assert_same_as_line_by_line(doc, p, monkeypatch)


def test_a_later_dominant_progress_shape_is_learned_again(tmp_path, monkeypatch):

    lines = [f"step={s} note=1 loss={3 + s % 7 * 0.01:.4f}" for s in range(1, 3)]
    lines += [f"[rank0]: step={s} loss={3 + s % 7 * 0.01:.4f} lr=3.0e-04" for s in range(3, 20000)]
    p = tmp_path / "run.log"
    p.write_text("\n".join(lines) + "\n")
    bulk_lines = _count_bulk_lines(monkeypatch)
    doc = analyze_paths([str(p)], chunk=1 << 16, workers=1)
    assert doc["metrics"]["num_steps_with_loss"] == 19997  # rank 0 (the first two lines have no rank)
    assert sum(bulk_lines) > 15000


def test_padded_numbers_that_grow_keep_their_template(tmp_path, monkeypatch):
    """Megatron pads its numbers ("iteration       9/", "iteration      10/"): one template, with
    the spaces around numbers stretching, takes them all."""
    rnd = random.Random(5)
    lines = [f" iteration {s:8d}/ 5000000 | consumed samples: {s * 512:12d} | elapsed time per iteration (ms): "
             f"{1500 + rnd.random() * 10:.1f} | learning rate: 1.500E-04 | global batch size:   512 | lm loss: "
             f"{3 + rnd.random() * 0.05:.6E} | loss scale: 65536.0 | grad norm: {1 + rnd.random():.3f} | "
             "number of skipped iterations:   0 | number of nan iterations:   0 |" for s in range(1, 12000)]
    p = tmp_path / "megatron.log"
    p.write_text("\n".join(lines) + "\n")
    bulk_lines = _count_bulk_lines(monkeypatch)
    doc, an = analyze([str(p)], chunk=1 << 16, workers=1)
    tpls = an._templates[str(p)]
    assert len(tpls) == 1 and tpls[0].flex
    assert sum(bulk_lines) > 11000
    _assert_same_as_line_by_line(doc, p, monkeypatch)


@pytest.mark.skipif(bulk._fastscan is None, reason="C kernel not built")
@settings(max_examples=400, deadline=None)
@given(st.from_regex(r"[0-9]{1,10}(\.[0-9]{1,10})?[eE][-+]?[0-9]{1,3}", fullmatch=True))
def test_c_kernel_exponent_values_equal_float(tok):
    """The exponent fast path (mantissa and power of ten exact) and its fallback give float()."""
    parts = re.split(r"(\d+)", tok)[1:-1]
    pieces = (b"lr=",) + tuple(p.encode() for p in parts[1::2]) + (b"",)
    runs = (len(parts) + 1) // 2
    _idx, _offs, vals, _rest, _nl = bulk._fastscan.scan(f"lr={tok}\n".encode(), pieces, ((0, runs - 1, 2),))
    got = np.frombuffer(vals, dtype=np.float64).tolist()
    # a token past 24 characters that needs the slow conversion is left to the per-line path
    assert got == [float(tok)] or (got == [] and len(tok) > 24)


def _tqdm_write_log(seed: int) -> str:
    """A Trainer-style log as a file gets it: tqdm's bar updates, each record written with
    ``tqdm.write`` after them on the same physical line; some bars carry a keyword of their own
    (a ``loss=`` postfix, a watchdog note), some lines end in CRLF."""
    rnd = random.Random(seed)
    out, step = [], 0
    for _ in range(3000):
        segs = []
        for _ in range(rnd.randint(0, 4)):
            step += 1
            post = rnd.choice(["", "", ", loss=3.21", ", watchdog ok"])
            segs.append(f"\r {step % 100:2d}%|\u2588\u258c        | {step}/300000 [00:0{step % 10}<9:99:99, 14.8it/s{post}]")
        loss = "nan" if step == 4000 else f"{3 + rnd.random():.4f}"
        rec = (f"{{'loss': {loss}, 'grad_norm': {1 + rnd.random():.4f}, 'learning_rate': {2e-4 * (1 - step / 1e6):.6e}, "
               f"'epoch': {step / 5000:.2f}}}")
        r = rnd.random()
        if r < 0.1:
            out.append("".join(segs) + "\r" + " " * 40 + "\r" + rec + "\r")  # CRLF
        elif r < 0.15:
            out.append(f"gpu-1:11:22 [{step % 8}] NCCL INFO Channel {step % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC")
        else:
            out.append("".join(segs) + "\r" + " " * 40 + "\r" + rec)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("seed", range(3))
def test_records_after_carriage_returns_equal_line_by_line(tmp_path, monkeypatch, seed, kernel):
    """The kernel takes a line's last carriage-return segment in bulk (the record after a bar's
    updates, a CRLF line); the document is the line-by-line one, a keyword in an earlier segment included."""
    p = tmp_path / "trainer.log"
    p.write_bytes(_tqdm_write_log(seed).encode())
    slow = _doc(p, 1 << 14, monkeypatch, templates=False)
    assert slow["metrics"]["num_steps_with_loss"] > 1000
    if kernel == "re":
        monkeypatch.setattr(bulk, "_fastscan", None)
    bulk_lines = _count_bulk_lines(monkeypatch)
    for chunk in (1 << 14, None):
        assert _doc(p, chunk, monkeypatch, templates=True) == slow
    if kernel == "c":
        assert sum(bulk_lines) > 1000  # the records whose line has no keyword before them (CRLF ones too)
