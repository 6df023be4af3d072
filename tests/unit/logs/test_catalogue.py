"""The signature catalogue: every example line is recognised as exactly its own kind, through the
real reader and analyzer; every runbook it names exists; the number tables are complete."""

from __future__ import annotations

import pytest

from llmdiag import runbooks
from llmdiag.logs import analyze_paths, catalogue

EXAMPLES = [(e.kind, line) for e in catalogue.ENTRIES for line in e.examples]
#: kinds that an example line may bring along besides its own: an NCCL WARN line is also counted as
#: a warning, and a dead worker's "Killed" is its signal
COMPANIONS = {"nccl_warn"}


@pytest.mark.parametrize("kind,line", EXAMPLES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(EXAMPLES)])
def test_example_is_its_own_kind(tmp_path, kind, line):
    log = tmp_path / "one.log"
    log.write_text(line + "\n")
    doc = analyze_paths([str(log)])
    kinds = {f["kind"] for f in doc["findings"]}
    assert kind in kinds, (line, kinds)
    assert kinds - {kind} <= COMPANIONS - {kind}, (line, kinds)
    if catalogue.CATALOGUE[kind].fatal:
        assert doc["status"] == "fail"


def test_every_runbook_exists():
    for rb in catalogue.runbook_ids():
        assert runbooks.exists(rb), rb


def test_entries_are_complete():
    for e in catalogue.ENTRIES:
        assert e.meaning and e.causes and e.fix and e.runbook, e.kind
        assert e.severity in (catalogue.ERROR, catalogue.WARNING)
        assert not e.patterns or e.keywords, e.kind  # a pattern needs a prefilter word
    assert set(catalogue.NCCL_RETURN_CODES) >= {1, 2, 3, 4, 5, 6}
    assert catalogue.IB_WC_STATUS[12][0] == "IBV_WC_RETRY_EXC_ERR"
    for x in (13, 31, 43):
        assert catalogue.XIDS[x][1] == "application"
    for x in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert catalogue.XIDS[x][1] == "hardware"


@pytest.mark.parametrize("line,name", [
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cudaErrorIllegalAddress"),
    ("RuntimeError: CUDA error: unspecified launch failure", "cudaErrorLaunchFailure"),
    ("RuntimeError: CUDA error: misaligned address", "cudaErrorMisalignedAddress"),
    ("RuntimeError: CUDA error: device-side assert triggered", "cudaErrorAssert"),
])
def test_cuda_errors_say_which_and_why(tmp_path, line, name):
    log = tmp_path / "c.log"
    log.write_text(line + "\n")
    f = analyze_paths([str(log)])["findings"][0]
    assert f["facts"]["cuda_error_name"] == name and f["cause"] == catalogue.CUDA_ERRORS[f["facts"]["cuda_error"]
                                                                                        .lower()][2]


@pytest.mark.parametrize("xid,origin", [(13, "application"), (79, "hardware"), (109, "driver")])
def test_xid_origin(tmp_path, xid, origin):
    log = tmp_path / "x.log"
    log.write_text(f"[Tue Mar  5 10:11:12 2024] NVRM: Xid (PCI:0000:b1:00): {xid}, pid=1234, name=python, Ch 0010\n")
    f = analyze_paths([str(log)])["findings"][0]
    assert f["kind"] == "ecc_xid" and f["facts"]["xid_origin"] == origin
    assert ("application" in f["cause"]) == (origin == "application")


@pytest.mark.parametrize("codes,kinds", [
    ([6, 6, 6], {"nccl_remote_error"}), ([2, 2, 3], {"nccl_internal_error", "nccl_system_error"}),
    ([2, 6, 3], {"nccl_internal_error", "nccl_system_error"}), ([5], {"nccl_invalid_usage"}),
    ([4], {"nccl_invalid_argument"}), ([1, 1], {"nccl_unhandled_cuda_error"}),
])
def test_return_code_chains(tmp_path, codes, kinds):
    log = tmp_path / "rc.log"
    log.write_text("".join(f"node-1:100:200 [0] NCCL INFO init.cc:{10 + i} -> {c}\n" for i, c in enumerate(codes)))
    doc = analyze_paths([str(log)])
    assert {f["kind"] for f in doc["findings"]} == kinds and doc["status"] == "fail"


def test_benign_exit_warning_of_a_healthy_run_is_no_finding(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text("step=1 loss=2.0\nstep=2 loss=1.9\n[rank1]:[W1107 10:50:18.780482185 ProcessGroupNCCL.cpp:1250] "
                   "[PG 0 Rank 1] Failed to check the \"should dump\" flag on TCPStore, (maybe TCPStore server has "
                   "shut down too early), with error: Connection reset by peer\n")
    doc = analyze_paths([str(log)])
    assert doc["findings"] == [] and doc["status"] == "pass"


@pytest.mark.parametrize("line,kinds", [
    ("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
     {"nccl_remote_error"}),
    ("node-1:100:200 [0] NCCL WARN Call to recv failed : Connection reset by peer", {"nccl_remote_error", "nccl_warn"}),
    ("torch.distributed.DistNetworkError: Connection reset by peer", {"connection_reset"}),
    ("RuntimeError: DataLoader worker (pid 1234) is killed by signal: Segmentation fault.",
     {"dataloader_worker_killed"}),
    ("Exception: process 1 terminated with signal SIGKILL", {"sigkill"}),
    ("srun: error: node-7: task 3: Killed", {"sigkill"}),
    ("torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGSEGV", {"segfault"}),
    ("E0410 10:47:58.118000 61420 torch/distributed/elastic/multiprocessing/api.py:870] failed (exitcode: -7) "
     "local_rank: 0 (pid: 61556) of binary: /usr/bin/python", {"sigbus"}),
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", {"cuda_error"}),
    ("[rank2]:[E1107 10:50:18.7 ProcessGroupNCCL.cpp:1224] [PG 0 Rank 2] NCCL watchdog thread terminated with "
     "exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5",
     {"nccl_remote_error"}),
    ("gpu-3:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.1.1.1<1234> with "
     "status=5 opcode=129 len=0 vendor err 249 (Recv) localGid ::ffff:10.1.1.2", {"ib_completion_error", "nccl_warn"}),
    ("/bin/bash: line 1: 12345 Killed                  python train.py", {"sigkill"}),
    ("node-1:9621:9688 [3] NCCL INFO transport/shm.cc:114 -> 2", {"nccl_system_error"}),
])
def test_wordings_across_versions(tmp_path, line, kinds):
    log = tmp_path / "w.log"
    log.write_text(line + "\n")
    doc = analyze_paths([str(log)])
    assert {f["kind"] for f in doc["findings"]} == kinds and doc["status"] == "fail"


@pytest.mark.parametrize("line", [
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 12, for key: "
    "store_based_barrier_key:1 (world_size=2048, worker_count=1792, timeout=0:30:00)",
    "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1792/2048 clients joined.",
])
def test_init_barrier_timeouts_say_how_many_ranks_never_joined(tmp_path, line):
    log = tmp_path / "b.log"
    log.write_text(line + "\n")
    (f,) = analyze_paths([str(log)])["findings"]
    assert f["kind"] == "rendezvous_timeout" and f["facts"]["ranks_not_joined"] == 256
