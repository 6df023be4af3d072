"""bench/nccl_overhead.py: bad input exits 2, and the table from saved samples."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = str(REPO / "bench" / "nccl_overhead.py")


@pytest.mark.parametrize("args, needle", [(["--sizes", "1M"], "16M and above"), (["--sizes", "16Q"], "not a size"),
                                          (["--nproc", "1"], "--nproc >= 2"), (["--report", "/nonexistent"], "cannot read")])
def test_bad_input_exit_2(args, needle):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and needle in p.stderr


def test_report_from_saved_samples(tmp_path):
    samples = [{"collective": "all_reduce", "size": 16 << 20, "rep": rep, "tool": tool, "bare": 1.0}
               for rep, tool in enumerate([0.98, 1.0, 0.99, 1.02])]
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"meta": {"nproc": 2, "reps": 4, "iters": 5, "warmup": 1, "wall_s": 1}, "samples": samples}))
    p = subprocess.run([sys.executable, SCRIPT, "--report", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if line.strip().startswith("all_reduce"))
    assert row.split()[1:5] == ["16777216", "0.995", "1.000", "0.995"] and row.endswith("OK")
    assert "median ratio 0.995" in p.stdout
