"""Our own cases per framework and failure kind; healthy logs of each framework give nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdiag.logs import analyze_paths

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
EXPECTED = {
    "failing/cuda_error.log": ["cuda_error"],
    "failing/hang.log": ["hang_no_progress"],
    "failing/hang_no_ts.log": ["hang_no_progress"],
    "failing/heartbeat.log": ["nccl_heartbeat_stuck"],
    "failing/megatron_nan.log": ["nan_grad_norm", "nan_loss"],  # both printed NaN: both named
    "failing/mpirun_segv.log": ["segfault"],
    "failing/oom_old.log": ["cuda_oom"],
    "failing/rdzv_new.log": ["rendezvous_address_in_use"],
    "failing/slurm_oom_kill.log": ["sigkill", "slurm_time_limit"],
    "failing/spike_zero.log": ["zero_loss"],
    "failing/throughput.log": ["throughput_drop"],
    "failing/timeout_absent_rank.log": ["nccl_communicator_aborted", "nccl_timeout"],
}


@pytest.mark.parametrize("name", sorted(p.name for p in (FIX / "healthy").iterdir()))
def test_healthy_logs_have_no_finding(name):
    doc = analyze_paths([str(FIX / "healthy" / name)])
    assert doc["findings"] == []
    assert doc["metrics"]["num_steps_with_loss"] > 40
    assert doc["status"] == "pass"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_failing_logs(name):
    doc = analyze_paths([str(FIX / name)])
    assert sorted({f["kind"] for f in doc["findings"]}) == EXPECTED[name]
    for f in doc["findings"]:
        assert f["runbook"] and f["cause"] and f["next_step"] and f["line"] >= 1


def test_absent_rank_is_not_in_the_excerpt_not_a_suspect():
    """Without the world size and lines of every rank, a rank the excerpt lacks is only said to be absent."""
    doc = analyze_paths([str(FIX / "failing/timeout_absent_rank.log")])
    t = next(f for f in doc["findings"] if f["kind"] == "nccl_timeout")
    assert "suspect_ranks" not in t["facts"] and t["facts"]["ranks_not_in_excerpt"] == [2]
    assert t["facts"]["ranks_reporting"] == [0, 1, 3] and "not in this excerpt" in t["message"]


def test_the_rank_that_never_enqueued_the_collective_is_the_suspect(tmp_path):
    """PyTorch 2.3+ status lines: every rank completed 12344 and timed out in 12345, but rank 2
    never enqueued 12345 (it was elsewhere): rank 2 is the culprit, the others are victims."""
    lines = [f"[rank{r}]:[E1203 10:04:0{r}.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
             f"Rank {r}] Exception (either an error or timeout) detected by watchdog at work: 12345, last enqueued "
             f"NCCL work: {12344 if r == 2 else 12345}, last completed NCCL work: 12344." for r in range(4)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n")
    (f,) = analyze_paths([str(p)])["findings"]
    assert f["kind"] == "nccl_timeout" and f["facts"]["suspect_ranks"] == [2]
    assert f["facts"]["rank2_last_enqueued_work"] == 12344 and "never reached it" in f["cause"]


def test_an_exception_is_told_to_the_error_it_reports(tmp_path):
    """The traceback's exception belongs to the error of its rank just before it, not to the
    first error of the log."""
    p = tmp_path / "train.log"
    p.write_text("RuntimeError: The server socket has failed to listen on any local network address. "
                 "code: -98, name: EADDRINUSE, message: address already in use\n"
                 "[rank7]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    by_kind = {f["kind"]: f for f in analyze_paths([str(p)])["findings"]}
    assert by_kind["cuda_error"]["facts"]["exception_message"].startswith("CUDA error: an illegal memory")
    # each rank's exception stays with its own error
    assert by_kind["rendezvous_address_in_use"]["facts"]["exception_message"].startswith("The server socket")


def test_old_oom_converts_mib_to_gib():
    f = analyze_paths([str(FIX / "failing/oom_old.log")])["findings"][0]
    assert f["facts"]["oom_tried_to_allocate_raw"] == "110.33 MiB"
    assert abs(f["facts"]["oom_tried_to_allocate_gib"] - 110.33 / 1024) < 1e-9
    assert f["facts"]["oom_gpu_index"] == 3


def test_trainer_contract_line_parses_as_key_value():
    from llmdiag.logs.formats import parse_progress
    from llmdiag.logs.prefixes import split_prefix

    line = ("[rank0]: step=12 loss=3.4512 lr=3.0e-04 grad_norm=1.234 loss_scale=65536 step_time_ms=41.2 "
            "tokens_per_s=12400 mem_gib=0.41")
    pre = split_prefix(line)
    rec = parse_progress(pre.message)
    assert pre.rank == 0
    assert rec == {"step": 12, "loss": 3.4512, "lr": 3.0e-04, "grad_norm": 1.234, "loss_scale": 65536.0,
                   "step_time_ms": 41.2, "tokens_per_s": 12400.0, "memory_gib": 0.41, "format": "key-value"}
    assert parse_progress("step=3 loss=nan")["loss"] != parse_progress("step=3 loss=nan")["loss"]


@pytest.mark.parametrize("line,kind", [
    ("NVRM: Xid (0000:3b:00): 48, pid=12, DBE (double bit error) ECC error", "ecc_xid"),
    ("[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 65536, reducing to 32768",
     "grad_overflow"),
    ("[c10d] The client socket has failed to connect to [node-0]:29500 (errno: 111 - Connection refused).",
     "rendezvous_timeout"),
    ("torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to connect to "
     "(10.1.1.1, 29500).", "rendezvous_timeout"),
    ("[PG 0 Rank 3] Timeout at NCCL work: 1234, last enqueued NCCL work: 1235, last completed NCCL work: 1233.",
     "nccl_timeout"),
    ("[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: "
     "12345, last enqueued NCCL work: 12345, last completed NCCL work: 12344.", "nccl_timeout"),
    ("[PG ID 0 PG GUID 0(default_pg) Rank 3]  failure detected by watchdog at work sequence id: 59958 PG status: "
     "last enqueued work: 59998, last completed work: 59957", "nccl_timeout"),
    ("[rank0]: Exception detected by watchdog at work: 233625", "nccl_timeout"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "rendezvous_timeout"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "rendezvous_timeout"),
    ("[E ProcessGroupNCCL.cpp:587] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, "
     "TensorShape=[13172736], Timeout(ms)=1800000) ran for 1806986 milliseconds before timing out.", "nccl_timeout"),
    ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system error, "
     "NCCL version 2.14.3", "nccl_system_error"),
    ("torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled cuda error, NCCL version 2.18.1",
     "nccl_unhandled_cuda_error"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc_xid"),
    ("RuntimeError: CUDA error: out of memory", "cuda_oom"),
    ("slurmstepd: error: *** STEP 1234.0 ON node01 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***",
     "slurm_time_limit"),
    ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 1234) of binary: "
     "/usr/bin/python", "sigkill"),
    ("[1234567.1] Out of memory: Killed process 4242 (python) total-vm:1000kB", "host_oom_kill"),
    ("ValueError: the tokenizer has no pad token", "python_exception"),
])
def test_single_line_signatures(tmp_path, line, kind):
    p = tmp_path / "one.log"
    p.write_text(line + "\n")
    assert [f["kind"] for f in analyze_paths([str(p)])["findings"]] == [kind]


def test_prefilter_engines_agree():
    from llmdiag.logs.analyzer import LogAnalyzer, prefilter_regex
    from llmdiag.logs.readers import ReadStats, scan

    import importlib.util

    engines = ["re", "auto"] + [e for e, mod in (("re2", "re2"), ("hyperscan", "hyperscan"),
                                                 ("kernel", "llmdiag.logs._fastscan"))
                                if importlib.util.find_spec(mod)]
    results = []
    for engine in engines:
        an, stats = LogAnalyzer(), ReadStats()
        for p in sorted(FIX.rglob("*.log")):
            scan(str(p), prefilter_regex(engine), an, stats)
            an.finish()
        results.append(([(e.kind, e.file, e.line) for e in an.events], len(an.table), stats.lines,
                        stats.candidate_lines))
    assert all(r == results[0] for r in results[1:])


@pytest.mark.parametrize("line", [
    "    ECC Errors",
    "        Volatile Uncorr. ECC : 0",
    "wandb: Network error: HTTPSConnectionPool: Connection timed out, entering retry loop",
    "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "UserWarning: torch.cuda.amp.GradScaler is deprecated",
    "node-1:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 busId 1000 - Init COMPLETE",
])
def test_harmless_lines_give_nothing(tmp_path, line):
    p = tmp_path / "one.log"
    p.write_text(line + "\n")
    assert analyze_paths([str(p)])["findings"] == []


def test_rank_from_per_rank_file_names(tmp_path):
    (tmp_path / "rank0.log").write_text("step=1 loss=2.0\n")
    (tmp_path / "rank1.log").write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    doc = analyze_paths([str(tmp_path)])
    assert [(f["kind"], f["rank"]) for f in doc["findings"]] == [("cuda_error", 1)]
    assert doc["first_failing_rank"] == 1
