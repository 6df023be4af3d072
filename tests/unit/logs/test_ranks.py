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
