"""The failing call: the source line under a traceback's innermost frame outside the libraries.

A real Python process fails inside a real torch call and its stderr is read back; interleaved ranks
keep their own frames (another rank's lines between them are still read as usual).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmdiag.logs import analyze_paths

pytest.importorskip("torch")


def _facts(path) -> tuple[dict, list]:
    doc = analyze_paths([str(path)])
    return doc["facts"], [(f["kind"], f.get("rank"), f["facts"].get("failing_call")) for f in doc["findings"]]


def test_a_real_traceback_names_the_users_call(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\n\n\ndef setup():\n    dist.barrier()\n\n\nsetup()\n")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, timeout=120)
    assert "site-packages/torch/distributed" in log.read_text()  # library frames below the user's
    facts, findings = _facts(log)
    assert facts["failing_call"] == "dist.barrier"
    assert findings[0][0] == "python_exception" and findings[0][2] == "dist.barrier"


def test_interleaved_ranks_keep_their_own_frames(tmp_path):
    log = tmp_path / "ranks.log"
    log.write_text("""[rank1]: Traceback (most recent call last):
[rank0]: Traceback (most recent call last):
[rank1]:   File "/home/u/train.py", line 40, in <module>
[rank0]:   File "/home/u/train.py", line 41, in <module>
[rank1]:     loss = model(batch)
[rank0]:     optimizer.step()
[rank1]:   File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1, in _call_impl
[rank1]:     return forward_call(*args, **kwargs)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered
[rank0]: NCCL WARN Cuda failure 'an illegal memory access was encountered'
[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered
""")
    facts, findings = _facts(log)
    assert ("cuda_error", 1, "model") in findings


def test_a_cut_traceback_names_nothing_and_reads_what_follows(tmp_path):
    log = tmp_path / "cut.log"
    log.write_text('Traceback (most recent call last):\n  File "/home/u/train.py", line 3, in <module>\n'
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    facts, findings = _facts(log)
    assert "failing_call" not in facts
    assert [k for k, _, _ in findings] == ["cuda_oom"]
