"""nccl-bench with real gloo processes on this machine: numbers, #wrong, exit codes, CSV/JSON."""

import json
import subprocess

import pytest

from llmdiag.ncclbench.collectives import busbw_factor
from tests.conftest import cli_env, llmdiag_argv

pytestmark = pytest.mark.distributed


def bench(tmp_path, *args):
    out = tmp_path / "doc.json"
    proc = subprocess.run(llmdiag_argv("nccl-bench", "-b", "1K", "-e", "4K", "-f", "4", "-w", "1", "-n", "2",
                                       "--format", "json", "--output", str(out), *args),
                          capture_output=True, text=True, env=cli_env(), timeout=120)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def test_three_ranks_all_collectives_with_corruption(tmp_path):
    proc, doc = bench(tmp_path, "--nproc", "3", "-C", "all", "--inject-corruption", "1:3",
                      "--csv", str(tmp_path / "rows.csv"))
    assert proc.returncode == 1, proc.stderr
    for row in doc["results"]:
        for key in ("out_of_place", "in_place"):
            cell = row[key]
            if cell is None:
                continue
            assert cell["wrong"] == 3, row  # exactly the corrupted elements of rank 1
            assert cell["algbw"] == pytest.approx(row["size"] / (cell["time_us"] * 1e-6) / 1e9)
            assert cell["busbw"] == pytest.approx(cell["algbw"] * busbw_factor(row["collective"], 3))
    assert {r["collective"] for r in doc["results"]} >= {"all_reduce", "all_gather", "sendrecv"}
    assert (tmp_path / "rows.csv").read_text().startswith("collective,size,count")


@pytest.mark.parametrize("n", [2, 4])
def test_correct_results_exit_0(tmp_path, n):
    proc, doc = bench(tmp_path, "--nproc", str(n), "-C", "all_reduce", "-C", "reduce_scatter")
    assert proc.returncode == 0, proc.stderr
    assert doc["out_of_bounds"] == 0 and doc["world"]["world_size"] == n
