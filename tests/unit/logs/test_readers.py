"""Reader robustness: line numbers across chunks, gzip (also truncated), stdin, junk bytes."""

from __future__ import annotations

import gzip
import subprocess

from llmdiag.logs import analyze_paths
from tests.conftest import cli_env, llmdiag_argv

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB"


def test_line_numbers_survive_small_chunks(tmp_path):
    p = tmp_path / "a.log"
    lines = [f"noise line {i} NCCL INFO ok" for i in range(500)]
    lines[333] = OOM
    p.write_text("\n".join(lines) + "\n")
    for chunk in (64, 1000, 1 << 20):
        doc = analyze_paths([str(p)], chunk=chunk)
        assert [f["line"] for f in doc["findings"]] == [334], chunk
        assert doc["read"]["lines"] == 500


def test_gzip_directory_and_truncated_gzip(tmp_path):
    (tmp_path / "d").mkdir()
    with gzip.open(tmp_path / "d" / "r0.log.gz", "wt") as fh:
        fh.write("x\n" * 10 + OOM + "\n")
    data = gzip.compress(("step=1 loss=2.0\n" * 20000).encode())
    (tmp_path / "d" / "cut.log.gz").write_bytes(data[: len(data) // 2])
    doc = analyze_paths([str(tmp_path / "d")])
    assert [f["kind"] for f in doc["findings"]] == ["cuda_oom"]
    assert any(p["kind"] == "truncated" for p in doc["read"]["problems"])


def test_binary_junk_non_utf8_and_huge_line(tmp_path):
    p = tmp_path / "junk.log"
    p.write_bytes(b"\x00\xff\xfe loss \x80\x81\n" + b"A" * (3 << 20) + b" loss\n" + OOM.encode() + b"\n")
    doc = analyze_paths([str(p)])
    kinds = {x["kind"] for x in doc["read"]["problems"]}
    assert {"binary", "encoding", "long-line"} <= kinds
    assert [f["kind"] for f in doc["findings"]] == ["cuda_oom"]


def test_stdin_and_exit_codes(tmp_path):
    r = subprocess.run(llmdiag_argv("analyze-log", "-", "-f", "json"), input=OOM + "\n", env=cli_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    r = subprocess.run(llmdiag_argv("analyze-log", str(tmp_path / "missing.log")), env=cli_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
