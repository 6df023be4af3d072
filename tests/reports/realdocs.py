"""Documents from the real commands (small, fast runs), produced once per test session.

Every renderer test reads these, not hand-made fixtures: what the commands write is what the
renderers must handle. ``python -m tests.reports.realdocs DIR`` writes them all as JSON (for
the screenshots in docs/img/).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conftest import cli_env, llmdiag_argv

FIX = Path(__file__).resolve().parent.parent / "fixtures"

#: name -> command line (exit code 0 or 1: several of these find problems on purpose)
COMMANDS: dict[str, list[str]] = {
    "preflight": ["preflight", "--probe", "system", "--probe", "launcher"],
    "nccl-bench": ["nccl-bench", "--nproc", "2", "-C", "all_reduce", "-C", "all_to_all", "-b", "1K", "-e", "64K",
                   "-n", "5", "-w", "2", "--expect-busbw", "1000"],
    "analyze-log": ["analyze-log", str(FIX / "logs" / "failing" / "megatron_nan.log")],
    "analyze-log-throughput": ["analyze-log", str(FIX / "logs" / "failing" / "throughput.log")],
    "analyze-log-ranks": ["analyze-log", str(FIX / "logs" / "healthy" / "trainer_kv.log")],
    "estimate-memory": ["estimate-memory", "--model", "llama2-7b", "--tp", "2", "--world-size", "8",
                        "--gpu-memory", "80GiB"],
    "estimate-memory-oom": ["estimate-memory", "--model", "llama2-7b", "--world-size", "8", "--micro-batch", "8",
                            "--seq-len", "8192", "--gpu-memory", "40GiB"],
    "monitor": ["monitor", "--count", "6", "--interval", "0.05", "--replay-nvml",
                str(FIX / "nvml" / "timeline-h100-faults.json")],
}
#: documents that need gloo processes (the ``distributed`` marker)
DISTRIBUTED = {"nccl-bench"}
NAMES = [*COMMANDS, "merge"]


def run(args: list[str], env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run(llmdiag_argv(*args, "--format", "json"), capture_output=True, text=True,
                          env=env or cli_env(), timeout=300)
    assert proc.returncode in (0, 1), f"{args}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def _merge() -> dict:
    """``llmdiag report merge`` of two real preflight node reports, a third node expected."""
    from llmdiag.cluster import gather
    from llmdiag.result import ClusterReport

    with tempfile.TemporaryDirectory() as d:
        for rank in (0, 1):
            doc = run(["preflight", "--probe", "system", "--probe", "launcher"],
                      env=cli_env(LLMDIAG_NODE_NAME=f"node-{rank}"))
            node = ClusterReport.from_dict(doc).nodes[0].to_dict()
            node["node_rank"] = rank
            gather.write_node_file(d, node)
        return run(["report", "merge", d, "--nnodes", "3"])


@functools.lru_cache(maxsize=None)
def _doc_json(name: str) -> str:
    return json.dumps(_merge() if name == "merge" else run(COMMANDS[name]))


def doc(name: str) -> dict:
    """A fresh copy of the real document ``name`` (callers may change it)."""
    return json.loads(_doc_json(name))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for n in NAMES:
        (out / f"{n}.json").write_text(_doc_json(n), encoding="utf-8")
        print(out / f"{n}.json")
