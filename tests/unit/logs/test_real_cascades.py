"""Real multi-rank failure excerpts, where one failure sets off others on many ranks, through the real
``analyze-log`` command: the labels exactly (a cascade symptom that has its own label is listed, one that has
none must not appear as an extra kind), the exit code, the first failing rank, the suspects, the root cause
ranked first and key facts.

The files are under ``data/cascades/`` and ``data/cascades/README.md`` names each one's source (repository and
issue number). Labels use the vocabulary of ``shared/logs/README.md`` and ``shared/logs-real/README.md``. Facts
are read from the JSON document's ``facts`` (numbers compare rounded to the precision given, as in
``test_manifest.py``); ``first_failing_rank``, ``suspect_ranks``, ``ranks_not_in_excerpt`` from its top level.
Judgement calls: srun's ``task N: Killed`` is ``sigkill`` (as in ``test_real_wordings_host.py``), and the agent's
``failed (exitcode: 1) local_rank: N`` with nothing else in the excerpt is ``child_failed`` (a worker failed and
the launcher stopped the job); a communicator abort whose reason is a watchdog timeout is both
``nccl_communicator_aborted`` and, when a timeout line of its own is present, ``nccl_timeout``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from llmdiag.cli import cli
from tests.unit.logs.test_manifest import same

DATA = Path(__file__).parent / "data" / "cascades"
_UNSET = object()


class Case(NamedTuple):
    file: str
    labels: list[str]
    root: str | None = None  # the kind ranked first in root_causes
    first_failing_rank: object = _UNSET
    suspects: object = _UNSET
    absent: object = _UNSET  # ranks_not_in_excerpt
    facts: dict = {}
    exit_code: int = 1


CASES = [
    Case("oom_zero3_multinode.log", ["cuda_oom"], "cuda_oom", 11,
         facts={"oom_tried_to_allocate_gib": 4.35, "oom_gpu_index": 3}),
    # the page cut both watchdog lines before "WorkNCCL(": the watchdog's own notice ("Some NCCL operations have
    # failed or timed out ... taking the entire process down") still says the job dies in a collective
    Case("timeout_flightrecorder_viewer.log", ["nccl_timeout", "zero_loss"], "zero_loss"),
    Case("timeout_wrapped_terminal.log", ["nccl_timeout"], "nccl_timeout", None,
         facts={"seq_num": 1522789, "op_type": "_ALLGATHER_BASE", "numel_out": 4783360, "last_completed_work": 1522788,
                "first_reporting_rank": 4}),
    Case("sigsegv_megatron_b200.log", ["segfault"], "segfault",
         facts={"exitcode": -11, "failed_local_rank": 0, "signal": "SIGSEGV"}),
    Case("mpirun_comm_aborted.log", ["nccl_communicator_aborted"], "nccl_communicator_aborted", None,
         facts={"aborted_rank": 19}),
    Case("timeouts_then_aborted_gcd.log", ["nccl_timeout"], "nccl_timeout", None, [], [0],
         facts={"seq_num": 56693, "op_type": "BROADCAST", "timeout_ms": 1800000, "first_reporting_rank": 3,
                "ranks_reporting": [3, 2, 1]}),
    Case("aborted_then_timeouts_mmdet.log", ["nccl_communicator_aborted", "nccl_timeout"], "nccl_timeout", None,
         facts={"seq_num": 2511984, "op_type": "ALLREDUCE"}),
    Case("timeouts_internlm_terminate.log", ["nccl_timeout"], "nccl_timeout", None, [], [1, 2],
         facts={"seq_num": 316, "first_reporting_rank": 0, "ranks_reporting": [0, 3]}),
    Case("childfailed_four_ranks.log", ["child_failed"], "child_failed", 0,
         facts={"exitcode": 1, "root_cause_pid": 69811, "failed_ranks": [0, 1, 2, 3]}),
    Case("internal_error_rc3_chain.log", ["nccl_internal_error"], "nccl_internal_error", None,
         facts={"nccl_return_code": 3, "nccl_version": "2.21.5"}),
    Case("ray_worker_internal_error.log", ["nccl_internal_error"], "nccl_internal_error",
         facts={"nccl_return_code": 3, "nccl_version": "2.18.6"}),
    Case("timeouts_aborted_shine.log", ["nccl_communicator_aborted", "nccl_timeout"], "nccl_timeout", None, [], [0],
         facts={"seq_num": 86645, "first_reporting_rank": 2, "timeout_ms": 1800000}),
    Case("timeout_zero3_v26.log", ["nccl_timeout"], "nccl_timeout", None, [0],
         facts={"seq_num": 3497, "op_type": "_ALLGATHER_BASE", "rank0_last_enqueued_work": 3499,
                "rank1_last_enqueued_work": 3500}),
    Case("terminate_broadcast_frames.log", ["nccl_timeout"], "nccl_timeout", None,
         facts={"seq_num": 880, "op_type": "BROADCAST", "numel_in": 131137536, "first_reporting_rank": 6}),
    Case("sigkill_colossal.log", ["sigkill"], "sigkill",
         facts={"exitcode": -9, "failed_local_rank": 3, "pid": 812917}),
    Case("sigterm_exit1_accelerate_stderr.log", ["child_failed"], "child_failed", None,
         facts={"exitcode": 1, "failed_local_rank": 7, "pid": 153932}),
    Case("sigabrt_reversed_summary.log", ["child_failed", "sigabrt"], "sigabrt",
         facts={"exitcode": -6, "signal": "SIGABRT"}),
    Case("two_nodes_two_summaries.log", ["child_failed"], "child_failed", 4,
         facts={"root_cause_ranks": [4, 0], "time": "2023-06-03_22:45:01"}),
    # the kills follow task 5's exit: the finding names it (srun tasks are not torchrun ranks: not first_failing_rank)
    Case("srun_task_exit_then_killed.log", ["sigkill"], "sigkill", None,
         facts={"first_failed_task": "5", "first_failed_task_exitcode": 1}),
    Case("nccl_oom_on_one_gpu_peer_closed.log", ["cuda_oom", "nccl_internal_error", "nccl_remote_error",
                                                 "nccl_unhandled_cuda_error", "nccl_warn"], "cuda_oom", None,
         facts={"nccl_warn_lines": 5, "ranks_local": [0, 3], "oom_tried_to_allocate_gib": None}),
    Case("timeout_mismatched_collectives.log", ["nccl_timeout"], "nccl_timeout", None, [0], [1, 2],
         facts={"op_types": ["_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE"], "rank3_seq_num": 619727}),
]


def analyze(path: Path) -> tuple[dict, int]:
    r = CliRunner().invoke(cli, ["analyze-log", str(path), "-f", "json"], catch_exceptions=False)
    return json.loads(r.output), r.exit_code


@pytest.mark.parametrize("case", CASES, ids=[c.file.removesuffix(".log") for c in CASES])
def test_real_cascade(case):
    doc, code = analyze(DATA / case.file)
    assert sorted({f["kind"] for f in doc["findings"]}) == sorted(case.labels)
    assert code == case.exit_code
    if case.root:
        assert doc["root_causes"][0]["kind"] == case.root
    for key, want in (("first_failing_rank", case.first_failing_rank), ("suspect_ranks", case.suspects),
                      ("ranks_not_in_excerpt", case.absent)):
        if want is not _UNSET:
            assert doc[key] == want, f"{key}: expected {want!r}, got {doc[key]!r}"
    for key, want in case.facts.items():
        assert key in doc["facts"], f"fact {key} missing"
        assert same(want, doc["facts"][key]), f"{key}: expected {want!r}, got {doc['facts'][key]!r}"


def test_srun_label_does_not_hide_the_torchrun_rank(tmp_path):
    """``srun -l`` numbers the task (one torchrun per node): the ``[rankN]:`` behind it is the rank. Lines of
    modelscope/ms-swift#6301 (rank 11's OOM) and #3154 (a watchdog timeout), labelled the way srun -l does."""
    oom = (DATA / "oom_zero3_multinode.log").read_text().splitlines()[4]
    tmo = (DATA / "timeout_zero3_v26.log").read_text().splitlines()[0]
    log = tmp_path / "srun.log"
    log.write_text(f"2: {oom}\n0: {tmo}\n1: {tmo.replace('rank0', 'rank5').replace('Rank 0', 'Rank 5')}\n")
    doc, code = analyze(log)
    assert code == 1
    assert [r["kind"] for r in doc["root_causes"]][:2] == ["cuda_oom", "nccl_timeout"]
    assert doc["first_failing_rank"] == 11
    assert doc["facts"]["ranks_reporting"] == [0, 5]


def test_an_error_after_the_ranks_own_timeout_is_its_consequence(tmp_path):
    """NVIDIA/nccl#1284: a BROADCAST timed out, then the same rank printed 'CUDA out of memory. Tried to allocate
    more than 1EB memory'; the NCCL maintainer: focus on the timeout, the OOM follows from it. An OOM on a rank that
    never reported the timeout stays the root cause (the first test of this file)."""
    tmo = (DATA / "terminate_broadcast_frames.log").read_text().splitlines()[8].split("exception: ", 1)[1]
    log = tmp_path / "after.log"
    log.write_text(f"[rank6]: {tmo}\n"
                   "[rank6]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.\n")
    doc, code = analyze(log)
    assert code == 1
    assert sorted({f["kind"] for f in doc["findings"]}) == ["cuda_oom", "nccl_timeout"]
    assert doc["root_causes"][0]["kind"] == "nccl_timeout"
    assert doc["first_failing_rank"] is None  # rank 6 only reported the hang
    oom = next(f for f in doc["findings"] if f["kind"] == "cuda_oom")
    assert oom["facts"]["after_own_timeout"] is True and "consequence" in oom["cause"]


def test_every_file_is_named_in_the_readme():
    readme = (DATA / "README.md").read_text()
    files = sorted(p.name for p in DATA.glob("*.log"))
    assert len(files) >= 15
    assert all(f"`{f}`" in readme for f in files)
    assert {c.file for c in CASES} == set(files)


_SIGTERM_AGENT = """\
W0101 10:44:57.785000 4026234 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4026329 closing signal SIGTERM
Traceback (most recent call last):
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 4026234 got signal: 15
"""


def test_the_agents_sigterm_is_the_echo_of_a_slurm_cancel(tmp_path):
    """Composed of two real wordings: torchrun's agent stopped by SIGTERM (its ``SignalException: Process N got
    signal: 15``, as quoted in a public run log) and srun's step cancellation of facebookresearch/deit#102. With
    nothing else failing the cancel is the finding; the agent's exception only says it was stopped."""
    cancel = (DATA / "srun_task_exit_then_killed.log").read_text().splitlines()[2]
    log = tmp_path / "cancel.log"
    log.write_text(_SIGTERM_AGENT + cancel + "\n")
    doc, code = analyze(log)
    assert code == 1
    assert [f["kind"] for f in doc["findings"]] == ["slurm_cancelled"]
    # without the cancel the stop is still reported, as a stop from outside (a time limit, a kill), not as an
    # exception of the training script: a dead job never passes
    alone = tmp_path / "alone.log"
    alone.write_text(_SIGTERM_AGENT)
    doc, code = analyze(alone)
    assert code == 1 and [f["kind"] for f in doc["findings"]] == ["launcher_stopped"]
    assert doc["findings"][0]["facts"]["signal"] == 15


@pytest.mark.parametrize("source,lines", [("sigkill_colossal.log", slice(2, 5)), ("oom_zero3_multinode.log", slice(5, 6))])
def test_the_launcher_stopping_workers_is_a_dead_job(tmp_path, source, lines):
    """Only the agent's "Sending process N closing signal SIGTERM" lines (hpcaitech/ColossalAI#3514 in Python
    logging's "WARNING:logger:message" form, modelscope/ms-swift#6301 in glog form): the failure that made torchrun
    stop the workers is above the excerpt, but the job is dying, so the excerpt must not pass."""
    log = tmp_path / "stops.log"
    text = "\n".join((DATA / source).read_text().splitlines()[lines]) + "\n"
    assert text.count("closing signal SIGTERM") == lines.stop - lines.start
    log.write_text(text)
    doc, code = analyze(log)
    assert code == 1
    assert [f["kind"] for f in doc["findings"]] == ["child_failed"]
    assert len(doc["facts"]["stopped_pids"]) == lines.stop - lines.start
