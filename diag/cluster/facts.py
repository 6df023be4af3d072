"""What nodes compare: versions, GPUs, launcher-relevant variables, the job interface's MTU.

Facts are read from the node's own probe results (the ``software`` and ``gpu`` probes'
``data``), from the environment and from the interface that routes to the rendezvous host,
and travel in the node report's ``meta["facts"]`` so that ``report merge`` compares exactly
what rank 0 compares. :data:`SPECS` says how each difference is judged.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from llmdiag.cluster.compare import FactSpec

ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_")
#: Variables that legitimately differ per node, or that only llmdiag sets.
ENV_IGNORED = {"CUDA_CACHE_PATH", "TORCH_HOME", "TORCH_EXTENSIONS_DIR"}

_VERSION_FIX = "Install the same versions on every node (one container image or one lock file for the whole job)."
_SOFT_KEYS = (
    ("python", "Python", "fail"),
    ("torch", "torch", "fail"),
    ("torch_cuda", "CUDA (torch build)", "fail"),
    ("nccl", "NCCL", "fail"),
    ("cudnn", "cuDNN", "warn"),
    ("driver", "NVIDIA driver", "warn"),
    ("cuda_driver", "CUDA (driver)", "warn"),
    ("deepspeed", "deepspeed", "fail"),
    ("megatron_core", "megatron-core", "fail"),
    ("transformers", "transformers", "warn"),
    ("accelerate", "accelerate", "warn"),
    ("flash_attn", "flash-attn", "warn"),
    ("apex", "apex", "warn"),
    ("triton", "triton", "warn"),
    ("nvidia_nccl_cu12", "nvidia-nccl-cu12", "fail"),
    ("numpy", "numpy", "warn"),
    ("os", "OS", "warn"),
    ("kernel", "kernel", "warn"),
)
SPECS: list[FactSpec] = [FactSpec(k, label, st, "cluster-version-mismatch", _VERSION_FIX) for k, label, st in _SOFT_KEYS]
SPECS += [
    FactSpec("gpu_count", "GPU count", "fail", "gpu-count-mismatch",
             "Check `nvidia-smi -L` on the odd node: a lost GPU needs a drain and reset, or exclude the node."),
    FactSpec("gpu_model", "GPU model", "warn", "gpu-mixed-models",
             "Schedule the job on one GPU model (a Slurm constraint/feature); the slowest GPU sets the pace."),
    FactSpec("mtu", "MTU of the job interface", "fail", "mtu-mismatch",
             "Set the same MTU on every node's job interface (ip link set IF mtu N) and on the switch ports."),
    FactSpec("interface", "job interface", "warn", "nic-selection",
             "Use the same NIC on every node (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME)."),
]
ENV_FIX = "Export the same value on every node (set it in the job script, not in per-node shell profiles)."


def env_spec(name: str) -> FactSpec:
    return FactSpec(f"env:{name}", name, "warn", "cluster-env-mismatch", ENV_FIX)


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES) and k not in ENV_IGNORED}


def job_interface(master_addr: str) -> dict[str, Any]:
    """The local address and interface that traffic to ``master_addr`` leaves by, and its MTU.

    A UDP ``connect`` picks the route without sending anything.
    """
    import psutil

    out: dict[str, Any] = {"interface": None, "address": None, "mtu": None}
    try:
        infos = socket.getaddrinfo(master_addr, None, socket.AF_INET, socket.SOCK_DGRAM)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((infos[0][4][0], 9))
            local = s.getsockname()[0]
        finally:
            s.close()
    except OSError:
        return out
    out["address"] = local
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == local for a in addrs):
            out["interface"] = name
            st = psutil.net_if_stats().get(name)
            out["mtu"] = st.mtu if st else None
            break
    return out


def probe_facts(results: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Comparable values from the node's result dicts (software and gpu probes)."""
    soft: dict[str, Any] = {}
    gpu: dict[str, Any] = {}
    for r in results:
        data = r.get("data") or {}
        if r.get("probe") == "software":
            soft.update({k: v for k, v in data.items() if k in {s[0] for s in _SOFT_KEYS}})
        elif r.get("probe") == "gpu":
            if "gpu_count" in data:
                gpu["gpu_count"] = data["gpu_count"]
            if data.get("gpu_models"):
                models = data["gpu_models"]
                gpu["gpu_model"] = ", ".join(f"{models.count(m)}x {m}" for m in sorted(set(models)))
    return soft | gpu


def node_facts(results: list[Mapping[str, Any]], env: Mapping[str, str],
               iface: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A node report's ``meta["facts"]`` (less the cluster stages' ``paths``): what merge compares."""
    out: dict[str, Any] = {"probes": probe_facts(results), "env": relevant_env(env)}
    if iface is not None:
        out["network"] = {k: iface.get(k) for k in ("interface", "address", "mtu")}
    return out


def flatten(facts: Mapping[str, Any]) -> dict[str, Any]:
    """A node's ``meta["facts"]`` → the flat key → value mapping :mod:`compare` works on."""
    flat = dict(facts.get("probes") or {})
    net = facts.get("network") or {}
    for key in ("mtu", "interface"):
        if net.get(key) is not None:
            flat[key] = net[key]
    for k, v in (facts.get("env") or {}).items():
        flat[f"env:{k}"] = v
    return flat
