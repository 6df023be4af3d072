"""The extra local ranks of the cluster's process group: one process per rank, as the job runs.

A training job starts one rank per GPU (torchrun ``--nproc-per-node``); a group of one rank per
node measures another thing (no NVLink or PCIe traffic inside a node, a fraction of the NICs'
load). So the agent, which is local rank 0 of its node, starts ``ranks_per_node - 1`` of these
workers before it joins the group. Rank ``node_index * ranks_per_node + local_rank`` joins the
same store prefix, then runs the same group probes in the same order as the agent (each
probe's collectives need every rank), on GPU ``local_rank`` for NCCL. A worker's own results
are not reported: every rank of a group probe ends with the same document, which the agent
reports; a worker that fails shows as the agent's collective failing. The agent ends the
workers when its run ends (a worker left in a collective the agent gave up on must not stay).

Run as ``python -m llmdiag.cluster.groupworker SPEC_JSON`` (the spec: :func:`worker_spec`).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: the store prefix of the group (the agent's and its workers')
PG_PREFIX = "llmdiag-pg/"


def layout(node_index: int, ranks_per_node: int, nodes: int) -> tuple[int, int]:
    """(the global rank of local rank 0 of node ``node_index``, the group's world size)."""
    return node_index * ranks_per_node, nodes * ranks_per_node


def worker_spec(*, master_addr: str, master_port: int, rank: int, world_size: int, local_rank: int, backend: str,
                timeout_s: float, budget_s: float, node: str, probes: Sequence[str],
                config: Mapping[str, Any]) -> dict[str, Any]:
    """``timeout_s``: the group's collective timeout (the agent's); ``budget_s``: what the agent has
    left for its group probes. A worker never cuts a probe before the agent would (a probe cut
    in one rank while the others go on would leave its collectives unpaired)."""
    return {"master_addr": master_addr, "master_port": master_port, "rank": rank, "world_size": world_size,
            "local_rank": local_rank, "backend": backend, "timeout_s": timeout_s, "budget_s": budget_s,
            "node": node, "probes": list(probes), "config": dict(config)}


def explicit_config(config) -> dict[str, dict[str, Any]]:
    """The settings the user gave (file, CLI overrides): the worker rebuilds the same config
    from them (defaults stay defaults, so "was it set" reads the same in every rank)."""
    return {s: {f: v for f, v in fields.items() if config.is_set(s, f)} for s, fields in config.to_dict().items()
            if any(config.is_set(s, f) for f in fields)}


def start(spec: Mapping[str, Any], env: Mapping[str, str]) -> subprocess.Popen:
    """Start one worker (its own process group, so :func:`stop` ends whatever it started)."""
    return subprocess.Popen([sys.executable, "-m", "llmdiag.cluster.groupworker", json.dumps(spec, default=list)],
                            env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            start_new_session=True)


def stop(proc: subprocess.Popen, grace_s: float = 2.0) -> int | None:
    """End a worker: wait ``grace_s`` for it to finish its last probe, then SIGKILL its group."""
    try:
        return proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def run(spec: Mapping[str, Any]) -> int:
    import torch
    import torch.distributed as dist
    from torch.distributed import PrefixStore, TCPStore

    from llmdiag.config import Config
    from llmdiag.context import Context
    from llmdiag.registry import all_probes
    from llmdiag.runner import run_probes, with_timeout

    timeout = datetime.timedelta(seconds=max(5.0, float(spec["timeout_s"])))
    if spec["backend"] == "nccl":
        torch.cuda.set_device(int(spec["local_rank"]))
    store = TCPStore(spec["master_addr"], int(spec["master_port"]), None, False, timeout, wait_for_workers=False)
    dist.init_process_group(spec["backend"], store=PrefixStore(PG_PREFIX, store), rank=int(spec["rank"]),
                            world_size=int(spec["world_size"]), timeout=timeout)
    config = Config.from_mapping(spec["config"])
    ctx = Context.create(config, node=spec["node"])
    ctx.services["process_group"] = dist.group.WORLD
    ctx.services["world"] = {"rank": int(spec["rank"]), "world_size": int(spec["world_size"]),
                             "local_rank": int(spec["local_rank"])}
    found, _ = all_probes()
    by_name = {p.name: p for p in found}
    for name in spec["probes"]:  # one at a time, in the agent's order: the collectives pair up
        if name in by_name:
            run_probes([with_timeout(by_name[name], float(spec["budget_s"]))], ctx, parallel=1)
    dist.destroy_process_group()
    return 0


def main(argv: Sequence[str]) -> int:
    try:
        return run(json.loads(argv[0]))
    except Exception as exc:  # noqa: BLE001 - the agent sees it as its group failing; say why here
        print(f"llmdiag group worker: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
              file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
