"""Which backend the cluster's group probes measure: the one the job will use.

A training job on GPU nodes talks NCCL (NVLink, InfiniBand/RoCE, GPUDirect); measuring gloo
over the host's TCP stack there cannot see a broken NCCL path, which is what the preflight
exists to catch. So the group is NCCL when **every** joined node has a GPU and a torch built
with NCCL, and gloo otherwise (CPU nodes, or a mixed cluster where an NCCL group could not
form), with the reason in the report. Each node reports its own facts when it joins
(:func:`node_devices`); rank 0 decides once (:func:`choose`) and publishes the choice with the
roster, so every node builds the same group.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

_GPU_DEV = re.compile(r"nvidia\d+$")


def node_devices(dev: str = "/dev") -> dict[str, Any]:
    """This node's GPUs and whether its torch has NCCL. GPUs are counted from the device files
    first (no torch import, no CUDA context on a CPU node); only a node that has some asks torch,
    which honours CUDA_VISIBLE_DEVICES."""
    try:
        files = sum(bool(_GPU_DEV.match(name)) for name in os.listdir(dev))
    except OSError:
        files = 0
    if files == 0:
        return {"gpus": 0, "nccl": None}
    try:
        import torch
        import torch.distributed as dist

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return {"gpus": gpus, "nccl": bool(dist.is_available() and dist.is_nccl_available())}
    except Exception as exc:  # noqa: BLE001 - a broken torch/CUDA: no usable GPU for the group
        return {"gpus": 0, "nccl": None, "error": str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}


def choose(nodes: Mapping[Any, Mapping[str, Any]], nproc_per_node: int | None = None) -> dict[str, Any]:
    """``{"backend", "reason", "gpus_per_node", "ranks_per_node"}`` from each joined node's
    :func:`node_devices` (keyed by node name or rank). A node that reported nothing counts as
    having no GPU. ``nproc_per_node`` (``[cluster] nproc_per_node``): the job's ranks per node."""
    choice = _backend(nodes)
    return dict(choice, **ranks_per_node(choice, nproc_per_node))


def ranks_per_node(choice: Mapping[str, Any], nproc_per_node: int | None) -> dict[str, Any]:
    """How many ranks each node runs in the group, as the job will: ``[cluster] nproc_per_node``
    when set, else one per GPU for NCCL (torchrun ``--nproc-per-node=gpu``), else one. NCCL
    cannot put two ranks on one GPU, so it is capped at the smallest node's GPU count."""
    gpus = choice.get("gpus_per_node")
    if choice["backend"] == "nccl":
        want = nproc_per_node or gpus
        n = min(want, gpus)
        why = (f"[cluster] nproc_per_node = {nproc_per_node}" if nproc_per_node else "one per GPU") + (
            f", capped at {gpus} GPU(s) per node" if want > gpus else "")
    else:
        n = nproc_per_node or 1
        why = f"[cluster] nproc_per_node = {nproc_per_node}" if nproc_per_node else "one per node (gloo)"
    return {"ranks_per_node": int(n), "ranks_reason": why}


def _backend(nodes: Mapping[Any, Mapping[str, Any]]) -> dict[str, Any]:
    if not nodes:
        return {"backend": "gloo", "reason": "no node joined", "gpus_per_node": None}
    no_gpu = [str(n) for n, d in nodes.items() if not (d or {}).get("gpus")]
    no_nccl = [str(n) for n, d in nodes.items() if (d or {}).get("gpus") and not (d or {}).get("nccl")]
    if len(no_gpu) == len(nodes):
        return {"backend": "gloo", "reason": "no node has a GPU", "gpus_per_node": None}
    if no_gpu:
        return {"backend": "gloo", "reason": f"not every node has a GPU (none on {_few(no_gpu)}): an NCCL group "
                                             "could not form", "gpus_per_node": None}
    if no_nccl:
        return {"backend": "gloo", "reason": f"torch has no NCCL on {_few(no_nccl)}", "gpus_per_node": None}
    per = sorted(int(d["gpus"]) for d in nodes.values())
    return {"backend": "nccl", "reason": f"every node has GPUs ({per[0]}" + (f"-{per[-1]}" if per[-1] != per[0] else "")
            + " per node) and torch with NCCL, as the job will use", "gpus_per_node": per[0]}


def _few(names: list[str], limit: int = 4) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
