"""Ranks: the straggler named from each rank's own progress, and the summary line naming it.

The canonical hang: four ranks, ranks 0, 1, 3 reach step 100 and report the NCCL watchdog timeout,
rank 2 stops at step 80 and says nothing. No world-size line in the trainer's own wording is printed:
the ranks present are the evidence. The same log as one file (``[rankN]:`` prefixes) and as one file
per rank (the rank in the file name).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from llmdiag.cli import cli

WATCHDOG = ("[E1204 10:20:{s:02d}.123456 {pid} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
            "Timeout(ms)=600000) ran for 600010 milliseconds before timing out.")


def _lines(world: int = 4, slow: int | None = 2, stop: int = 80, steps: int = 100, ranks=None):
    """rank -> its lines: every rank logs each step; ``slow`` stops at ``stop``; the others time out."""
    per = {r: [] for r in (ranks if ranks is not None else range(world))}
    for step in range(1, steps + 1):
        for r in per:
            if r == slow and step > stop:
                continue
            per[r].append(f"step {step} | loss {3.0 - step * 0.01:.4f} | lr 1.0e-04 | time 412.0ms")
    for r in per:
        if r != slow:
            per[r].append(WATCHDOG.format(s=10 + r, pid=1000 + r, r=r))
    return per


def _one_file(tmp_path, per) -> list[str]:
    out, n = [], max(len(v) for v in per.values())
    for i in range(n):
        out += [f"[rank{r}]:{lines[i]}" for r, lines in per.items() if i < len(lines)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(out) + "\n")
    return [str(p)]


def _per_rank(tmp_path, per) -> list[str]:
    paths = []
    for r, lines in per.items():
        p = tmp_path / f"rank{r}.log"
        p.write_text("\n".join(lines) + "\n")
        paths.append(str(p))
    return paths


def _run(paths, *more):
    return CliRunner().invoke(cli, ["analyze-log", *paths, *more], catch_exceptions=False)


@pytest.mark.parametrize("layout", [_one_file, _per_rank])
def test_rank_whose_log_ends_early_is_the_suspect(tmp_path, layout):
    r = _run(layout(tmp_path, _lines()), "-f", "json")
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["suspect_ranks"] == [2]
    assert "rank 2's log ends at step 80, the others at 100" in doc["suspect_reason"]
    assert doc["first_reporting_rank"] == 0
    timeout = next(f for f in doc["findings"] if f["kind"] == "nccl_timeout")
    assert timeout["facts"]["suspect_ranks"] == [2]
    assert "rank 2" in timeout["next_step"]


@pytest.mark.parametrize("layout", [_one_file, _per_rank])
def test_summary_names_suspect_and_first_reporter(tmp_path, layout):
    r = _run(layout(tmp_path, _lines()), "--width", "400")
    last = r.output.strip().splitlines()[-1]
    assert "suspect rank(s) 2 (rank 2's log ends at step 80" in last
    assert "first reporter rank 0" in last
    assert "first failing rank 0" not in last


def test_excerpt_missing_a_rank_names_nobody(tmp_path):
    """Ranks 0, 1, 3 only: rank 2 may be the straggler, but its lines are not here to compare."""
    doc = json.loads(_run(_one_file(tmp_path, _lines(slow=None, ranks=[0, 1, 3])), "-f", "json").output)
    assert doc["suspect_ranks"] == []
    assert doc["ranks_not_in_excerpt"] == [2]


def test_ranks_level_with_each_other_name_nobody(tmp_path):
    """Every rank at step 100 and all reported: progress does not separate them."""
    doc = json.loads(_run(_one_file(tmp_path, _lines(slow=None)), "-f", "json").output)
    assert doc["suspect_ranks"] == []


def test_most_ranks_behind_is_not_a_straggler(tmp_path):
    """Half the ranks behind the other half: not one rank that lags, so nobody is named from progress."""
    per = _lines(world=2, slow=1, stop=80)
    per[1].append(WATCHDOG.format(s=11, pid=1001, r=1))  # rank 1 reports too: the absent-rank rule is silent
    doc = json.loads(_run(_one_file(tmp_path, per), "-f", "json").output)
    assert doc["suspect_ranks"] == []


def test_rank_files_named_without_rank(tmp_path):
    """One file per rank named by host (``node-N.out``): a file's rank is the one its own lines name (the
    watchdog's ``[Rank N]``); the one silent file is the rank still missing."""
    paths = []
    for r, lines in _lines().items():
        p = tmp_path / f"node-{10 + r}.out"  # the number in the name is not the rank
        p.write_text("\n".join(lines) + "\n")
        paths.append(str(p))
    doc = json.loads(_run(paths, "-f", "json").output)
    assert doc["suspect_ranks"] == [2]
    assert "rank 2's log ends at step 80, the others at 100" in doc["suspect_reason"]


def test_rank_files_without_rank_and_two_silent_files_name_nobody(tmp_path):
    """Two files that name no rank: which of the missing ranks each one is cannot be told."""
    per = _lines(world=5, slow=2)
    per[4] = per[4][:-1]  # rank 4 reaches step 100 but its watchdog line is not in its file
    paths = []
    for r, lines in per.items():
        p = tmp_path / f"host-{chr(97 + r)}.log"
        p.write_text("\n".join(lines) + "\n")
        paths.append(str(p))
    doc = json.loads(_run(paths, "-f", "json").output)
    assert doc["suspect_ranks"] == []
    assert doc["ranks_not_in_excerpt"] == [2]  # rank 4 is not known to exist


GLOO = "[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms for recv operation to complete"


@pytest.mark.parametrize("world_line", [True, False])
def test_gloo_timeout_names_the_rank_that_never_reported(tmp_path, world_line):
    """gloo: every rank stops at the same step (the hung rank never entered the all-reduce of the next one);
    ranks 0, 1, 3 report the timeout, rank 2 printed lines but says nothing: it is the one they waited for."""
    out = [f"[rank{r}]: world_size=4 backend=gloo" for r in range(4)] if world_line else []
    for step in range(1, 31):
        out += [f"[rank{r}]: step={step} loss={4.0 - step * 0.01:.3f} lr=1e-3" for r in range(4)]
    out += [GLOO.format(r=r) for r in (3, 0, 1)]
    p = tmp_path / "train.log"
    p.write_text("\n".join(out) + "\n")
    doc = json.loads(_run([str(p)], "-f", "json").output)
    assert doc["suspect_ranks"] == [2]
    assert "never reported the timeout" in doc["suspect_reason"]
    assert doc["first_reporting_rank"] == 3
    last = _run([str(p)], "--width", "400").output.strip().splitlines()[-1]
    assert "suspect rank(s) 2" in last and "first reporter rank 3" in last, last


def test_gloo_timeout_most_ranks_silent_names_nobody(tmp_path):
    """One rank's report among four ranks' lines: the others' reports may just be missing from the log."""
    out = []
    for step in range(1, 11):
        out += [f"[rank{r}]: step={step} loss={4.0 - step * 0.01:.3f}" for r in range(4)]
    out.append(GLOO.format(r=0))
    p = tmp_path / "train.log"
    p.write_text("\n".join(out) + "\n")
    assert json.loads(_run([str(p)], "-f", "json").output)["suspect_ranks"] == []


SYS_ERR = ("[rank{r}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
           "ProcessGroupNCCL.cpp:2027, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5")


def _peer_logs(tmp_path, interleave: bool = False) -> list[str]:
    a = tmp_path / "node-a.log"
    a.write_text("\n".join([
        "gpu-a:4411:4470 [1] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.7<35001> failed : "
        "Connection refused",
        "gpu-a:4411:4470 [1] NCCL INFO misc/socket.cc:565 -> 2",
        "gpu-a:4411:4470 [1] NCCL INFO bootstrap.cc:275 -> 2",
        SYS_ERR.format(r=1)]) + "\n")
    b = tmp_path / "node-b.log"
    lines = [SYS_ERR.format(r=5), "[rank5]: ncclSystemError: System call (e.g. socket, malloc) or external library "
             "call failed or device error.", "[rank5]: Last error:"]
    if interleave:  # another rank's line between the header and its text
        lines.append("[rank4]: step=12 loss=3.1")
    lines.append("[rank5]: socketStartConnect: Connect to 10.0.0.12<44231> failed : Software caused connection abort")
    b.write_text("\n".join(lines) + "\n")
    return [str(b), str(a)]


@pytest.mark.parametrize("interleave", [False, True])
def test_last_error_is_read_and_facts_stay_with_their_rank(tmp_path, interleave):
    """Rank 5's own ``Last error:`` (on the line after it) gives its peer; rank 1's NCCL WARN in another file
    gives rank 1's, not rank 5's."""
    b, a = _peer_logs(tmp_path, interleave)
    alone = json.loads(_run([b], "-f", "json").output)
    err = next(f for f in alone["findings"] if f["kind"] == "nccl_system_error")
    assert err["rank"] == 5
    assert err["facts"]["peer"] == "10.0.0.12<44231>"
    assert err["facts"]["last_error"].startswith("socketStartConnect: Connect to 10.0.0.12<44231> failed")
    both = json.loads(_run([b, a], "-f", "json").output)
    err = next(f for f in both["findings"] if f["kind"] == "nccl_system_error")
    assert err["facts"]["peer_by_rank"] == {"5": "10.0.0.12<44231>"}
    # the finding is told from its first line (node-a's): its own host and peer, rank 5's kept apart
    assert err["file"].endswith("node-a.log")
    assert (err["facts"]["host"], err["facts"]["peer"]) == ("gpu-a", "10.0.0.7<35001>")


def test_empty_last_error_takes_no_text(tmp_path):
    p = tmp_path / "t.log"
    p.write_text("\n".join([SYS_ERR.format(r=0), "[rank0]: Last error:", "[rank0]: ",
                            "[rank0]: Exception raised from checkForNCCLErrorsInternal at ProcessGroupNCCL.cpp:2027"])
                 + "\n")
    err = next(f for f in json.loads(_run([str(p)], "-f", "json").output)["findings"]
               if f["kind"] == "nccl_system_error")
    assert "last_error" not in err["facts"]


def test_async_exception_work_fields(tmp_path):
    """``Collective WorkNCCL(...) raised the following async exception: ...``: the error is named by its own
    wording, the work's fields (SeqNum, OpType, Timeout(ms)) are read from the same line."""
    p = tmp_path / "t.log"
    p.write_text("[rank2]:[E1011 04:12:55.101 ProcessGroupNCCL.cpp:1577] [PG 0 Rank 2] Collective WorkNCCL(SeqNum=4411, "
                 "OpType=_ALLGATHER_BASE, NumelIn=2048, NumelOut=16384, Timeout(ms)=1200000) raised the following "
                 "async exception: NCCL error: remote process exited or there was a network error, NCCL version "
                 "2.21.5\n")
    doc = json.loads(_run([str(p)], "-f", "json").output)
    err = next(f for f in doc["findings"] if f["kind"] == "nccl_remote_error")
    assert (err["rank"], err["facts"]["seq_num"], err["facts"]["op_type"], err["facts"]["timeout_ms"],
            err["facts"]["numel_out"]) == (2, 4411, "_ALLGATHER_BASE", 1200000, 16384)


def test_exception_of_another_file_is_not_the_findings_own(tmp_path):
    """Rank 5's exception (its own file) does not become the exception of an NCCL error read from another
    host's file; it stays in exceptions_by_rank."""
    a = tmp_path / "node-a.log"
    a.write_text("gpu-a:4411:4470 [1] NCCL INFO misc/socket.cc:565 -> 2\ngpu-a:4411:4470 [1] NCCL INFO "
                 "bootstrap.cc:275 -> 2\n[rank1]: ValueError: the batch had no tokens\n")
    b = tmp_path / "node-b.log"
    b.write_text("[rank5]: Traceback (most recent call last):\n[rank5]:   File \"train.py\", line 3, in <module>\n"
                 "[rank5]: KeyError: 'input_ids'\n")
    doc = json.loads(_run([str(a), str(b)], "-f", "json").output)
    err = next(f for f in doc["findings"] if f["kind"] == "nccl_system_error")
    assert err["facts"]["exception_type"] == "ValueError"
    assert set(err["facts"]["exceptions_by_rank"]) == {"1", "5"}
    c = tmp_path / "node-c.log"  # the NCCL error's file has no exception of its own: rank 5's is not taken,
    c.write_text(a.read_text().rsplit("\n", 2)[0] + "\n")  # it is rank 5's own failure
    doc = json.loads(_run([str(c), str(b)], "-f", "json").output)
    err = next(f for f in doc["findings"] if f["kind"] == "nccl_system_error")
    assert "exception_type" not in err["facts"]
    exc = next(f for f in doc["findings"] if f["kind"] == "python_exception")
    assert (exc["rank"], exc["facts"]["exception_type"]) == (5, "KeyError")


def test_torchrun_log_dir_layout(tmp_path):
    """``torchrun --log-dir``: each local rank's output in ``RUN/attempt_0/N/{stdout,stderr}.log``, its lines
    unprefixed: the directory is the rank (progress in stdout, the gloo timeout in stderr)."""
    paths = []
    for r, lines in _lines(slow=2, stop=80).items():
        d = tmp_path / "logs" / "run_x1" / "attempt_0" / str(r)
        d.mkdir(parents=True)
        (d / "stdout.log").write_text("\n".join(x for x in lines if "Watchdog" not in x) + "\n")
        (d / "stderr.log").write_text("" if r == 2 else GLOO.format(r=r).split(": ", 1)[1] + "\n")
        paths += [str(d / "stdout.log"), str(d / "stderr.log")]
    doc = json.loads(_run(paths, "-f", "json").output)
    assert doc["suspect_ranks"] == [2]
    assert "rank 2's log ends at step 80, the others at 100" in doc["suspect_reason"]


SRUN_END = ["step 5 | loss 2.9500 | lr 1.0e-04 | time 412.0ms",
            "srun: error: node-2: task 3: Killed",
            "srun: error: node-1: task 0: Exited with exit code 1"]


@pytest.mark.parametrize("agent, rank", [
    # srun starts the trainer's processes itself: a task number is SLURM_PROCID, the global rank
    ([], 3),
    # torchrun under srun (one agent per node): the task is a node's agent, its rank is unknown
    (["torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 4242) of "
      "binary: /usr/bin/python3"], None),
])
def test_srun_task_number_is_the_rank_only_without_an_agent(tmp_path, agent, rank):
    log = tmp_path / "slurm-77.out"
    log.write_text("\n".join(agent + SRUN_END) + "\n")
    r = CliRunner().invoke(cli, ["analyze-log", str(log), "--format", "json"])
    doc = json.loads(r.output)
    killed = next(f for f in doc["findings"] if f["kind"] == "sigkill")
    assert killed["rank"] == rank
    if rank is not None:
        assert doc["first_failing_rank"] == rank


def _quiet_rank_files(tmp_path, seconds):
    """Only rank 0 logs progress (the common case); ranks 0, 1, 3 report the timeout at ``seconds[r]``; rank 2's
    file holds one line of its own and nothing after it."""
    paths = []
    for r in range(4):
        lines = [f"[rank{r}]: initialized the process group"]
        if r == 0:
            lines += [f"step {s} | loss {3.0 - s * 0.01:.4f} | lr 1.0e-04" for s in range(1, 101)]
        if r != 2:
            lines.append(f"[rank{r}]:" + WATCHDOG.format(s=seconds[r], pid=1000 + r, r=r))
        p = tmp_path / f"rank{r}.log"
        p.write_text("\n".join(lines) + "\n")
        paths.append(str(p))
    return paths


def test_a_rank_whose_file_says_nothing_of_the_timeout_is_the_suspect(tmp_path):
    # rank 2's only line is read by no rule, yet its file is there: the log covers it, it never reported
    doc = json.loads(_run(_quiet_rank_files(tmp_path, {0: 12, 1: 11, 3: 13}), "-f", "json").output)
    assert doc["suspect_ranks"] == [2], doc["suspect_reason"]
    assert doc["ranks_not_in_excerpt"] == []
    assert doc["first_reporting_rank"] == 1  # by the glog headers' clock, not by line numbers of different files


def test_reports_in_the_same_second_of_different_files_name_no_first_reporter(tmp_path):
    doc = json.loads(_run(_quiet_rank_files(tmp_path, {0: 12, 1: 12, 3: 12}), "-f", "json").output)
    assert doc["suspect_ranks"] == [2]
    assert doc["first_reporting_rank"] is None
