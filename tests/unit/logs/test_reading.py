"""Reading logs of any shape, and what the verdict says: learned prefixes, wrapped and glued lines,
torchrun blocks, the ranks of a timeout, OOM process lists, NaN advice by precision."""

from __future__ import annotations

import pytest

from llmdiag.logs import analyze_paths

WATCHDOG = ("[rank{r}]:[E1107 10:50:18.780482185 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
            "operation timeout: ")
WORK = ("WorkNCCL(SeqNum=25980, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600027 "
        "milliseconds before timing out.")


def run(tmp_path, text: str, name: str = "job.log") -> dict:
    p = tmp_path / name
    p.write_text(text)
    return analyze_paths([str(p)])


def test_learned_launcher_prefix_and_wrap_after_timeout(tmp_path):
    lines = []
    for r in (3, 2):
        lines += [f"llm7b.node-3 [stderr] {WATCHDOG.format(r=r)}", f"llm7b.node-3 [stderr] "
                  f"{WORK.format(op='ALLREDUCE', n=4194304)}"]
    lines += ["llm7b.node-3 [stderr] some unrelated output"] * 3
    doc = run(tmp_path, "\n".join(lines) + "\n")
    (f,) = doc["findings"]
    assert f["kind"] == "nccl_timeout" and f["facts"]["op_type"] == "ALLREDUCE" and f["line"] == 1
    assert f["facts"]["ranks_reporting"] == [3, 2] and f["facts"]["timeout_ms"] == 600000
    # ranks 0 and 1 are simply not in this excerpt: not suspects
    assert doc["suspect_ranks"] == [] and doc["ranks_not_in_excerpt"] == [0, 1]
    assert doc["first_reporting_rank"] == 3 and doc["first_failing_rank"] is None


def test_prefix_learning_leaves_plain_lines_alone(tmp_path):
    text = "".join(f"iteration {i}/100 | lm loss: 2.{i:02d} |\n" for i in range(1, 30))
    text += "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    doc = run(tmp_path, text)
    assert [f["kind"] for f in doc["findings"]] == ["cuda_error"]
    assert doc["metrics"]["num_steps_with_loss"] == 29


def test_two_ranks_glued_in_one_line(tmp_path):
    text = ("[rank0]:step 5 loss=2.1[rank1]:[E1107 10:50:18.780482185 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog "
            f"caught collective operation timeout: {WORK.format(op='ALLREDUCE', n=8)}\n")
    doc = run(tmp_path, text)
    (f,) = doc["findings"]
    assert f["kind"] == "nccl_timeout" and f["rank"] == 1 and f["line"] == 1


def test_diverged_collectives_at_one_seqnum_name_both_sides(tmp_path):
    lines = []
    for r, op, n in ((3, "ALLREDUCE", 4096), (7, "BROADCAST", 1), (2, "ALLREDUCE", 4096), (5, "ALLREDUCE", 4096)):
        lines.append(WATCHDOG.format(r=r) + WORK.format(op=op, n=n))
    doc = run(tmp_path, "\n".join(lines) + "\n")
    f = doc["findings"][0]
    assert f["facts"]["collective_mismatch"] == [
        {"op_type": "ALLREDUCE", "numel_in": 4096, "ranks": [2, 3, 5]},
        {"op_type": "BROADCAST", "numel_in": 1, "ranks": [7]}]
    assert doc["suspect_ranks"] == [7] and "diverged" in doc["suspect_reason"]
    assert "suspect rank(s) [7]" in doc["root_causes"][0]["summary"]


def test_absent_rank_is_suspect_only_when_world_known_and_covered(tmp_path):
    progress = "".join(f"[rank{r}]:step 10 loss=2.0\n" for r in range(4))
    timeouts = "".join(WATCHDOG.format(r=r) + WORK.format(op="ALLREDUCE", n=8) + "\n" for r in (0, 1, 3))
    doc = run(tmp_path, "world_size=4\n" + progress + timeouts)
    assert doc["suspect_ranks"] == [2] and doc["ranks_not_in_excerpt"] == []
    doc = run(tmp_path, timeouts, "other.log")
    assert doc["suspect_ranks"] == [] and doc["ranks_not_in_excerpt"] == [2]


MODULE_BLOCK = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
llava.train.train_mem FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-03-02_10:11:12
  host      : gpu-node-1
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4321)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4321
"""


def test_failures_only_block_with_a_module_header(tmp_path):
    doc = run(tmp_path, MODULE_BLOCK)
    kinds = sorted(f["kind"] for f in doc["findings"])
    assert kinds == ["child_failed", "sigkill"]
    cf = next(f for f in doc["findings"] if f["kind"] == "child_failed")
    assert cf["facts"]["exitcode"] == -9 and cf["facts"]["failed_ranks"] == [1] and "?" not in cf["message"]


def test_oom_with_six_processes_on_one_gpu_is_device_selection(tmp_path):
    others = " ".join(f"Process {p} has 0.39 GiB memory in use." for p in range(1001, 1006))
    text = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            f"79.15 GiB of which 20.12 MiB is free. {others} Including non-PyTorch memory, this process has 76.90 GiB "
            "memory in use. Of the allocated memory 75.1 GiB is allocated by PyTorch\n")
    (f,) = run(tmp_path, text)["findings"]
    assert f["facts"]["oom_process_in_use_gib"] == 76.9 and f["facts"]["oom_processes_on_gpu"] == 6
    assert "device-selection" in f["cause"] and "micro batch" not in f["next_step"]


def test_nccl_cuda_failure_out_of_memory_is_an_oom(tmp_path):
    text = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
            "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'out of memory'\n")
    kinds = sorted(f["kind"] for f in run(tmp_path, text)["findings"])
    assert kinds == ["cuda_oom", "nccl_unhandled_cuda_error"]


def test_nan_advice_follows_the_precision(tmp_path):
    steps = "".join(f"step={i} loss={2.0 - i * 0.01:.3f} grad_norm={'nan' if i > 20 else '1.0'}\n" for i in range(1, 30))
    bf = run(tmp_path, "args: bf16=True\n" + steps, "bf.log")
    f = next(f for f in bf["findings"] if f["kind"] == "nan_grad_norm")
    assert "bf16" in f["cause"] and "loss scal" not in f["next_step"]
    fp = run(tmp_path, "args: fp16=True\n" + steps, "fp.log")
    f = next(f for f in fp["findings"] if f["kind"] == "nan_grad_norm")
    assert "fp16" in f["cause"] and "loss scaler" in f["next_step"]


def test_padded_wrapped_dmesg_line_is_rejoined(tmp_path):
    text = ("[2059991.491542] Out of memory: Killed process 38127 (python3) total-vm:53312244" + " " * 60 +
            "kB, anon-rss:31451456kB, file-rss:74816kB\n")
    (f,) = run(tmp_path, text)["findings"]
    assert f["kind"] == "host_oom_kill" and f["facts"]["killed_pid"] == 38127 and f["facts"]["anon_rss_kb"] == 31451456


def test_summary_block_without_its_childfailederror_line(tmp_path):
    """The excerpt starts at the header that names the module: the block is still read."""
    doc = run(tmp_path, MODULE_BLOCK.split("\n", 1)[1])
    cf = next(f for f in doc["findings"] if f["kind"] == "child_failed")
    assert cf["facts"]["exitcode"] == -9 and cf["facts"]["failed_rank"] == 1


WATCHDOG_LINE = WATCHDOG.format(r=0) + WORK.format(op="ALLREDUCE", n=8)


@pytest.mark.parametrize("prefix", ["trainer-1  | ", "2024-05-01T10:00:00.123456789Z stdout F ", "pytorchjob-worker-0 ",
                                    "llm.n3 [stderr] ", "ip-10-0-0-1.ec2.internal [stdout] "])
def test_prefix_shapes_learned_from_the_file(tmp_path, prefix):
    lines = [f"{prefix}step={i} loss=2.{i}" for i in range(1, 4)]
    lines += [prefix + WATCHDOG_LINE, f"{prefix}Traceback (most recent call last):", f"{prefix}RuntimeError: boom"]
    doc = run(tmp_path, "\n".join(lines) + "\n")
    (f,) = doc["findings"]
    assert f["kind"] == "nccl_timeout" and f["rank"] == 0 and f["line"] == 4
    assert f["facts"]["exception_type"] == "RuntimeError" and doc["metrics"]["num_steps_with_loss"] == 3


def test_terminal_capture_cut_at_a_fixed_width_is_rejoined(tmp_path):
    """A capture cut at 100 columns: the watchdog line continues mid-word on the next line."""
    lines = [f"[rank0]:step={i} loss=2.{i:02d} lr=1.0e-04 grad_norm=1.{i:02d} tokens_per_s=12400 mem_gib=0.41 samples_per_s=96.0 tflops=101.5"
             for i in range(1, 12)]
    lines.append(WATCHDOG.format(r=2) + WORK.format(op="BROADCAST", n=5496064))
    text = "".join(piece + "\n" for line in lines for piece in (line[i:i + 100] for i in range(0, len(line), 100)))
    assert max(map(len, text.splitlines())) == 100
    doc = run(tmp_path, text)
    (f,) = doc["findings"]
    assert f["kind"] == "nccl_timeout" and f["facts"]["op_type"] == "BROADCAST" and f["facts"]["numel_in"] == 5496064
    assert doc["metrics"]["num_steps_with_loss"] == 11


def test_fixed_width_records_are_not_taken_for_a_wrapped_capture():
    from llmdiag.logs.analyzer import terminal_width

    fixed = [f" iteration {i:8d}/ 5000000 | lm loss: 3.0{i % 10}E+00 | grad norm: 1.000 |" for i in range(50)]
    assert terminal_width(fixed) is None
    wrapped = []
    for i in range(20):
        line = f"[rank0]: step={i} " + "x" * 150
        wrapped += [line[:100], line[100:]]
    assert terminal_width(wrapped) == 100


def _entry(i: int, rank: int, traceback: str = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"):
    return (f"[{i}]:\n  time      : 2024-03-05_07:01:51\n  host      : node-a\n  rank      : {rank} (local_rank: {rank})\n"
            f"  exitcode  : 1 (pid: {7000 + rank})\n  error_file: <N/A>\n  traceback : {traceback}\n")


def test_summary_cut_inside_its_failures_keeps_the_ranks_above_the_cut(tmp_path):
    """An excerpt that starts inside ``Failures:`` (header cut off) still lists the ranks above Root Cause."""
    long_tb = "Traceback (most recent call last):\n" + "".join(f'    File "train.py", line {n}, in f\n' for n in range(20))
    cut = ("  exitcode  : 1 (pid: 7005)\n" + _entry(2, 6, long_tb) + _entry(3, 7) + "-" * 60 + "\n"
           "Root Cause (first observed failure):\n" + _entry(0, 4) + "=" * 60 + "\n")
    (cf,) = [f for f in run(tmp_path, cut)["findings"] if f["kind"] == "child_failed"]
    assert cf["facts"]["failed_ranks"] == [4, 6, 7] and cf["facts"]["first_failing_rank"] == 4
    # a rank row far above the summary (an earlier, unrelated report) is not one of its failures
    stray = "  rank      : 9 (local_rank: 1)\n" + "".join(f"step {i} loss 2.0\n" for i in range(1, 100)) + cut
    (cf,) = [f for f in run(tmp_path, stray)["findings"] if f["kind"] == "child_failed"]
    assert cf["facts"]["failed_ranks"] == [4, 6, 7]
