"""Flight Recorder dumps from real hung gloo runs name the rank that blocked the collective."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from llmdiag.logs import flight
from tests.conftest import cli_env, llmdiag_argv

pytestmark = pytest.mark.distributed
TINY = ["--nproc", "3", "--threads", "1", "--batch-size", "4", "--seq-len", "32", "--hidden", "32",
        "--collective-timeout", "3", "--steps", "10"]


@pytest.fixture(scope="module")
def hung_run(tmp_path_factory):
    """``llmdiag train --inject hang@4:rank=1``: the trainer writes one dump per rank beside its log."""
    d = tmp_path_factory.mktemp("hang")
    log = d / "train.log"
    proc = subprocess.run(llmdiag_argv("train", *TINY, "--inject", "hang@4:rank=1", "--log-file", str(log)),
                          env=cli_env(), capture_output=True, text=True, timeout=120, cwd=d)
    assert proc.returncode == 1
    return log


def _analyze(*argv):
    proc = subprocess.run(llmdiag_argv("analyze-log", *argv, "--format", "json"), env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    return proc, (json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None)


def test_dumps_beside_the_log_name_the_hung_rank(hung_run):
    fr_dir = str(hung_run) + ".fr"
    assert sorted(os.listdir(fr_dir)) == ["rank_0", "rank_1", "rank_2"]
    proc, doc = _analyze(str(hung_run))
    assert proc.returncode == 1
    fr = doc["flight_recorder"]
    assert fr["suspect_ranks"] == [1] and not fr["partial"]
    (pg,) = fr["process_groups"]
    assert pg["not_entered"] == [1] and pg["op"] == "all_reduce" and pg["last_entered"]["1"] < pg["seq_id"]
    assert doc["suspect_ranks"] == [1] and "never entered all_reduce" in doc["root_causes"][0]["summary"]


def test_partial_dumps_are_said(hung_run, tmp_path):
    part = tmp_path / "fr"
    part.mkdir()
    for r in (0, 2):
        (part / f"nccl_trace_rank_{r}").write_bytes((hung_run.parent / "train.log.fr" / f"rank_{r}").read_bytes())
    proc, doc = _analyze(str(hung_run), "--fr", str(part))
    fr = doc["flight_recorder"]
    assert fr["partial"] and fr["ranks_missing"] == [1] and fr["ranks_dumped"] == [0, 2]
    assert fr["suspect_ranks"] == [1] and "no dump from rank(s) [1]" in fr["reason"]


def test_partial_dumps_where_a_timed_out_work_looks_completed(hung_run, tmp_path):
    """A rank whose blocked collective timed out before it dumped reports it in pg_status as its
    last *completed* collective (a retired work); another rank dumping a moment earlier does not.
    That difference is timing, not a suspect: the missing rank stays the one to look at."""
    import pickle

    part = tmp_path / "fr"
    part.mkdir()
    for r in (0, 2):
        dump = pickle.loads((hung_run.parent / "train.log.fr" / f"rank_{r}").read_bytes())
        newest = max(e["collective_seq_id"] for e in dump["entries"])
        for pg in dump["pg_status"].values():
            pg["last_completed_collective"] = newest if r == 2 else newest - 1
        for e in dump["entries"]:
            e["retired"] = r == 2 or e["collective_seq_id"] < newest
        (part / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump))
    proc, doc = _analyze(str(hung_run), "--fr", str(part))
    fr = doc["flight_recorder"]
    assert fr["suspect_ranks"] == [1] and "no dump from rank(s) [1]" in fr["reason"], fr


MISMATCH = textwrap.dedent("""
    import os, sys, time
    os.environ["TORCH_FR_BUFFER_SIZE"] = "100"
    import torch, torch.distributed as dist
    from datetime import timedelta
    rank, world, port, out = int(sys.argv[1]), 3, sys.argv[2], sys.argv[3]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=3))
    t = torch.ones(8)
    dist.all_reduce(t)
    try:
        if rank == 2:
            dist.broadcast(torch.ones(4, dtype=torch.float64), 0)   # a different code path
        else:
            dist.all_reduce(t)
    except Exception:
        pass
    open(os.path.join(out, f"trace_{rank}"), "wb").write(torch._C._distributed_c10d._dump_fr_trace())
    os._exit(0)
""")


def test_diverged_collectives_are_named_on_both_sides(tmp_path):
    import socket

    script = tmp_path / "mm.py"
    script.write_text(MISMATCH)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, str(script), str(r), port, str(tmp_path)], env=cli_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for r in range(3)]
    for p in procs:
        p.wait(timeout=60)
    dumps, problems = flight.read_dir(str(tmp_path))
    assert sorted(dumps) == [0, 1, 2] and problems == []
    fr = flight.analyze(dumps)
    (mm,) = fr["mismatches"]
    assert mm["seq_id"] == 2
    sides = {tuple(s["ranks"]): s for s in mm["sides"]}
    assert sides[(0, 1)]["op"] == "all_reduce" and sides[(2,)]["op"] == "broadcast"
    assert "Double" in sides[(2,)]["input_dtypes"]
    assert fr["suspect_ranks"] == [2]
