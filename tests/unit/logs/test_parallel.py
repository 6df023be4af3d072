"""Splitting one file over worker processes gives the same document as one sequential pass."""

from __future__ import annotations

import pytest

from llmdiag.logs import analyze_paths, parallel


@pytest.mark.parametrize("range_bytes", [1 << 30, 4096])  # a range per worker pair; ~80 ranges
def test_parallel_equals_sequential(tmp_path, monkeypatch, range_bytes):
    big = tmp_path / "run.log"
    lines = []
    for s in range(1, 3001):
        lines.append(f"[rank{s % 2}]: step={s} loss={3 - s * 1e-4:.4f} grad_norm=1.0 step_time_ms=40.0")
        lines.append(f"node-1:11:22 [{s % 8}] NCCL INFO Channel {s % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC")
        if s == 2100:
            lines.append("node-1:11:22 [3] NCCL WARN garbled \udcff byte")
        if s == 1500:
            lines.append("node-1:11:22 [3] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1> failed")
    lines += [f"[rank{r}]:[E ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: "
              f"WorkNCCL(SeqNum=99, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600001 "
              "milliseconds before timing out." for r in (1, 0)]
    big.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    seq = analyze_paths([str(big)], workers=1)
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "RANGE_BYTES", range_bytes)
    par = analyze_paths([str(big)], workers=3)
    for key in ("findings", "metrics", "steps", "root_causes"):
        assert par[key] == seq[key], key
    for key in ("bytes", "lines", "candidate_lines", "problems"):
        assert par["read"][key] == seq["read"][key], key
    assert par["read"]["lines"] == seq["read"]["lines"] == len(lines)
    assert [p["kind"] for p in seq["read"]["problems"]] == ["encoding"]
    assert sorted(f["kind"] for f in par["findings"]) == ["nccl_timeout", "nccl_warn"]


def test_parallel_learned_prefixes_equal_sequential(tmp_path, monkeypatch):
    """A job runner's prefix (learned from the file's head, once per worker) is stripped in every range."""
    big = tmp_path / "job.log"
    lines = []
    for s in range(1, 2001):
        pre = f"job42.node{s % 4} [stderr] "
        lines.append(pre + f"[rank{s % 2}]: step={s} loss={3 - s * 1e-4:.4f} grad_norm=1.0")
        lines.append(pre + f"node-1:11:22 [{s % 8}] NCCL INFO Channel {s % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC")
        if s == 1700:
            lines.append(pre + "node-1:11:22 [3] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect failed")
    lines += ["job42.node1 [stderr] [rank1]:[E ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective "
              "operation timeout: WorkNCCL(SeqNum=99, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) "
              "ran for 600001 milliseconds before timing out."]
    big.write_text("\n".join(lines) + "\n")
    seq = analyze_paths([str(big)], workers=1)
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "RANGE_BYTES", 4096)
    par = analyze_paths([str(big)], workers=3)
    for key in ("findings", "metrics", "steps", "root_causes"):
        assert par[key] == seq[key], key
    assert sorted(f["kind"] for f in par["findings"]) == ["nccl_timeout", "nccl_warn"]
    assert next(f for f in par["findings"] if f["kind"] == "nccl_timeout")["rank"] == 1
