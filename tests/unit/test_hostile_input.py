"""Hostile input is refused cleanly (issue 14): damaged archives, binary files, huge lines,
incomplete config entries, malformed launcher variables, impossible sizes, bad trainer paths.
Every case runs the real CLI; none may print a traceback."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess

import pytest

from tests.conftest import cli_env, llmdiag_argv

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.20 GiB is free.\n")


def run(*args, env=None, timeout=120, cwd=None):
    proc = subprocess.run(llmdiag_argv(*args), capture_output=True, text=True, env=env or cli_env(),
                          timeout=timeout, cwd=cwd)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


def analyse(path, *extra):
    proc = run("analyze-log", str(path), "-f", "json", *extra)
    return proc, (json.loads(proc.stdout) if proc.stdout.strip() else None)


def log_text(n=20000, oom_from_end=300) -> bytes:
    lines = [f"[rank0] iteration {i} | lm loss 2.5000 | grad norm 1.000 | elapsed time per iteration (ms): 512.3\n"
             for i in range(n)]
    lines.insert(n - oom_from_end, OOM)
    return "".join(lines).encode()


def kinds(doc) -> set[str]:
    return {f["kind"] for f in doc["findings"]}


@pytest.mark.parametrize("suffix,compress", [(".gz", gzip.compress), (".xz", lzma.compress)])
def test_truncated_archive_read_to_the_last_recoverable_byte(tmp_path, suffix, compress):
    data = compress(log_text())
    path = tmp_path / f"train.log{suffix}"
    path.write_bytes(data[:-200])
    proc, doc = analyse(path)
    assert proc.returncode == 1, proc.stderr
    assert {"cuda_oom", "log_truncated"} <= kinds(doc), kinds(doc)
    assert doc["status"] == "fail"


def test_truncated_bzip2_says_so(tmp_path):
    """bzip2 blocks decompress whole or not at all: the cut block is lost, and the finding says so."""
    path = tmp_path / "train.log.bz2"
    path.write_bytes(bz2.compress(log_text())[:-200])
    proc, doc = analyse(path)
    assert proc.returncode in (0, 1) and "log_truncated" in kinds(doc) and doc["status"] != "pass"


def test_corrupt_and_concatenated_gzip(tmp_path):
    data = bytearray(gzip.compress(log_text(oom_from_end=19000)))
    data[len(data) * 3 // 4] ^= 0xFF
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(bytes(data))
    proc, doc = analyse(bad)
    assert {"cuda_oom", "log_truncated"} <= kinds(doc)  # the OOM is before the damage
    assert "corrupt" in " ".join(f["message"] for f in doc["findings"])
    both = tmp_path / "both.log.gz"  # `cat a.gz b.gz`: two members, both read
    both.write_bytes(gzip.compress(b"step 1 loss 2.0\n") + gzip.compress(OOM.encode()))
    proc, doc = analyse(both)
    assert proc.returncode == 1 and kinds(doc) == {"cuda_oom"}


def test_zstd_read_or_clearly_refused(tmp_path):
    path = tmp_path / "train.log.zst"
    try:
        import zstandard
    except ImportError:
        path.write_bytes(b"\x28\xb5\x2f\xfd" + os.urandom(64))
        proc, _ = analyse(path)
        assert proc.returncode == 2 and "zstandard" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        return
    path.write_bytes(zstandard.ZstdCompressor().compress(log_text())[:-100])
    proc, doc = analyse(path)
    assert {"cuda_oom", "log_truncated"} <= kinds(doc)


@pytest.mark.parametrize("content", [
    lambda: os.urandom(2 << 20),
    lambda: b"\x00" * (1 << 20),
    lambda: gzip.compress(os.urandom(1 << 20)),  # a compressed binary file
    lambda: b"PK\x03\x04" + os.urandom(300000),  # a zip archive
])
def test_binary_file_is_never_pass(tmp_path, content):
    path = tmp_path / "junk.log"
    path.write_bytes(content())
    proc, doc = analyse(path)
    assert proc.returncode != 0, proc.stdout[:500]
    if proc.returncode == 1:
        assert "not_a_text_log" in kinds(doc) and doc["status"] == "fail"


def test_text_with_some_escapes_and_utf8_is_text(tmp_path):
    path = tmp_path / "ok.log"
    path.write_text("".join(f"\x1b[32mINFO\x1b[0m step {i} loss 2.0 — ünïcödé ✓\n" for i in range(2000)))
    proc, doc = analyse(path)
    assert proc.returncode == 0 and "not_a_text_log" not in kinds(doc)


def test_huge_line_reports_its_true_length(tmp_path):
    path = tmp_path / "long.log"
    n = 20 << 20
    path.write_bytes(b"step 1 loss 2.0\n" + b"x" * n + b"\n" + OOM.encode())
    proc, doc = analyse(path)
    assert proc.returncode == 1 and "cuda_oom" in kinds(doc)
    msgs = [p["message"] for p in doc["read"]["problems"] if p["kind"] == "long-line"]
    assert msgs == [f"line of {n} bytes cut to {64 << 10}"], msgs
    assert doc["read"]["lines"] == 3


def test_filesystem_path_entry_without_path_is_a_config_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[[filesystem.paths]]\nwritable = true\n")
    proc = run("preflight", "-c", str(cfg), "--probe", "filesystem")
    assert proc.returncode == 2 and "filesystem.paths[0].path" in proc.stderr and "required" in proc.stderr


@pytest.mark.parametrize("env", [{"MASTER_PORT": "abc"}, {"MASTER_PORT": "70000"},
                                 {"NODE_RANK": "-1", "NNODES": "2", "MASTER_ADDR": "127.0.0.1"},
                                 {"RANK": "0", "WORLD_SIZE": "two"}])
def test_malformed_launcher_variables_are_findings(env):
    proc = run("preflight", "--probe", "launcher", "-f", "json", env=cli_env(**env))
    assert proc.returncode == 1, proc.stderr
    bad = [r for r in json.loads(proc.stdout)["results"] if r["check"] == "variables"]
    assert bad and bad[0]["status"] == "fail", bad
    assert any(f"{k}=" in bad[0]["summary"] for k in env), bad[0]["summary"]


def test_empty_probe_selection_is_a_usage_error():
    proc = run("preflight", "--probe", "system", "--skip", "system")
    assert proc.returncode == 2 and "no probe left" in proc.stderr


def test_nccl_bench_buffer_larger_than_memory_refused_before_ranks_start():
    proc = run("nccl-bench", "--nproc", "2", "--backend", "gloo", "-e", "1T", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "max-bytes" in proc.stderr and "[rank" not in proc.stderr


@pytest.mark.parametrize("args,words", [
    (["--data", "missing.tok"], "no such file"),
    (["--data", "random.bin"], "not an llmdiag token file"),
    (["--data", "."], "directory"),
    (["--checkpoint-dir", "afile"], "not a directory"),
    (["--log-file", "nodir/x.log"], "does not exist"),
    (["--summary-file", "."], "directory"),
])
def test_train_checks_its_paths_before_starting_workers(tmp_path, args, words):
    (tmp_path / "random.bin").write_bytes(os.urandom(4096))
    (tmp_path / "afile").write_text("x")
    proc = run("train", "--steps", "2", "--nproc", "2", *args, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert "[rank" not in proc.stderr and "worker" not in proc.stderr.lower()


def test_malformed_node_report_is_a_problem_not_a_crash(tmp_path):
    (tmp_path / "node-00000.json").write_text('{"node": 1, "node_rank": "x", "results": 5}')
    proc = run("report", "merge", str(tmp_path))
    assert proc.returncode == 2 and "not an llmdiag node report" in proc.stderr


@pytest.mark.parametrize("args", [
    ["preflight", "-c", "N"], ["report", "merge", "N"], ["estimate-memory", "--model", "N"],
    ["monitor", "--count", "1", "--heartbeat-dir", "N"], ["prepare-data", "in.txt", "N", "--quiet"],
    ["train", "--data", "N"], ["analyze-log", "x.log", "-o", "N"],
])
def test_names_the_system_refuses_are_usage_errors(tmp_path, args):
    (tmp_path / "in.txt").write_text("hello\n")
    (tmp_path / "x.log").write_text("step 1 loss 2.0\n")
    proc = run(*[("a" * 300 if a == "N" else a) for a in args], cwd=tmp_path)
    assert proc.returncode == 2 and "File name too long" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args", [
    ["monitor", "--interval", "nan", "--duration", "1"], ["monitor", "--count", "1", "--duration", "inf"],
    ["nccl-bench", "--expect-busbw", "nan"], ["preflight", "--timeout", "nan"],
    ["analyze-log", "x.log", "--follow", "--no-progress-minutes", "nan"],
    ["estimate-memory", "--params", "inf"], ["estimate-memory", "--model", "gpt2", "--gpu-memory", "1e400G"],
    ["train", "--lr", "inf"], ["train", "--grad-clip", "nan"], ["train", "--min-lr", "inf"],
    ["preflight", "--probe", "system", "-c", "nan.toml"], ["preflight", "--probe", "system", "-c", "inf.toml"],
])
def test_nan_and_infinity_are_usage_errors(tmp_path, args):
    """NaN passes every range check by comparing false (``--interval nan`` sampled forever)."""
    (tmp_path / "x.log").write_text("step 1 loss 2.0\n")
    (tmp_path / "nan.toml").write_text("[cluster]\ntimeout_s = nan\n")
    (tmp_path / "inf.toml").write_text("[thresholds]\nnofile_min = 1\n[cluster]\nshare_wait_s = inf\n")
    proc = run(*args, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-800:])
    assert any(w in proc.stderr for w in ("nan", "inf", "finite", "out of range")), proc.stderr[-800:]
