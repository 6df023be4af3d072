"""Device memory the runtime adds around the model: library workspaces, communication buffers.

Each term is a mechanism with its size rule and where it lives (docs/estimate-memory.md,
"Where each byte lives"):

- ``cublas_workspaces`` (caching allocator): cuBLAS wants a workspace per (handle, stream); the
  cuBLAS guide recommends 4 MiB before Hopper and 32 MiB from Hopper on. PyTorch allocates one
  per (handle, stream) pair from its caching allocator (``CublasHandlePool.cpp``:
  ``:4096:2:16:8`` = 8 519 680 B by default, 4096 KiB × 8 = 32 MiB on sm_90 and later) and a
  training step uses two handles (the forward thread and autograd's backward thread); Transformer
  Engine (Megatron-core's default layers) keeps its own workspace tensor (``get_workspace``:
  32 MiB on sm_90+, 4 MiB before).
- ``sp_gather_buffer`` (caching allocator, forward/backward): with sequence parallelism a
  column-parallel linear all-gathers its ``s/t`` input shard to the whole sequence before the
  matmul and again in backward for the weight gradient; the gathered ``s × b × h`` 16-bit tensor
  is held during the matmul (Megatron's ``GlobalMemoryBuffer`` "mpu" keeps it allocated; TE
  allocates it per call). Not saved for backward, so one layer's worth, not one per layer.
- ``nccl_nvls_buffers`` (outside the allocator): on NVSwitch systems from Hopper on, NCCL (2.17+)
  runs all-reduce / all-gather / reduce-scatter through NVLink SHARP when a communicator has more
  than two ranks on a node, and maps a multicast buffer of ``nHeads × nvlsPerRankSize`` on every
  member, ``nvlsPerRankSize = channels × 2 × (buffSize + memSize)``. NCCL's INFO line from an
  8 × H200 node (vllm-project/vllm#9699): ``nHeads 8 buffSize 4194304 memSize 2097152
  nvlsPerRankSize 301989888 nvlsTotalSize 2415919104`` — 288 MiB per local rank, 2.25 GiB on
  each GPU of an 8-GPU group. NVIDIA's NeMo launcher sets ``NCCL_NVLS_ENABLE=0`` "for memory
  saving" (NeMo-Framework-Launcher#127). NCCL 2.22+ connects algorithms at first use
  (``NCCL_RUNTIME_CONNECT``), so only the groups that move activations or gradients in large
  collectives (tp, dp, cp, ep and the expert groups) are charged, not the scalar ones
  (model-parallel gradient norm, embedding) nor pipeline send/recv.
- ``tp_comm_overlap_buffers`` (outside the allocator): Megatron's ``--tp-comm-overlap`` calls TE's
  ``initialize_ub`` with ``shape = (s·b/cp, h)``; userbuffers allocates and registers one buffer
  of that shape for each overlapped GEMM of the layer (qkv/proj/fc1/fc2 fprop, dgrad and wgrad:
  10 by default), 16-bit (8-bit for FP8 all-gathers), outside the caching allocator.
"""

from __future__ import annotations

from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan

MIB = 1024**2
#: compute capability major of each GPU generation the plan can name
CC_MAJOR = {"v100": 7, "a100": 8, "h100": 9, "h200": 9, "b200": 10}
TORCH_CUBLAS_WS = {"pre_hopper": 4096 * 1024 * 2 + 16 * 1024 * 8, "hopper": 4096 * 8 * 1024}
TE_CUBLAS_WS = {"pre_hopper": 4 * MIB, "hopper": 32 * MIB}
TORCH_CUBLAS_HANDLES = 2  # the forward thread's and autograd's backward thread's
NVLS_PER_LOCAL_RANK = 24 * 2 * (4 * MIB + 2 * MIB)  # channels × 2 × (buffSize + memSize): 288 MiB, NCCL's log
NVLS_MIN_LOCAL_RANKS = 3  # NCCL uses NVLS for more than two ranks on a node
NVLS_GROUPS = ("tp", "dp", "cp", "ep", "etp", "edp")  # groups with large collectives (see the docstring)
UB_GEMMS = 10  # TE userbuffers: qkv/proj/fc1/fc2 fprop, dgrad, wgrad overlaps


def hopper_or_later(plan: Plan) -> bool:
    return CC_MAJOR.get((plan.gpu_kind or "").lower(), 0) >= 9


def cublas_workspaces(plan: Plan) -> tuple[float, str]:
    gen = "hopper" if hopper_or_later(plan) else "pre_hopper"
    n, form = TORCH_CUBLAS_HANDLES * TORCH_CUBLAS_WS[gen], f"{TORCH_CUBLAS_HANDLES} × PyTorch cuBLAS workspace"
    if plan.framework == "megatron":
        n += TE_CUBLAS_WS[gen]
        form += " + Transformer Engine's"
    return n, form + (" (32 MiB each, Hopper+)" if gen == "hopper" else " (8.1 MiB / 4 MiB, pre-Hopper)")


def sp_gather_buffer(m: ModelSpec | None, plan: Plan) -> tuple[float, str]:
    if m is None or not plan.sequence_parallel or plan.tp == 1:
        return 0.0, "no sequence-parallel all-gather"
    n = 2 * plan.seq_len / plan.cp * plan.micro_batch * m.hidden
    return n, "2·s·b·h: a column-parallel input gathered over tp (sequence parallel) during its matmul"


def tp_comm_overlap_buffers(m: ModelSpec | None, plan: Plan) -> tuple[float, str]:
    if m is None or not plan.tp_comm_overlap or plan.tp == 1:
        return 0.0, "no TP communication overlap"
    n = UB_GEMMS * 2 * plan.seq_len / plan.cp * plan.micro_batch * m.hidden
    return n, f"{UB_GEMMS} userbuffers × (s·b/cp × h) × 2 B (TE initialize_ub, one per overlapped GEMM)"


def _layout(plan: Plan) -> dict[str, list[tuple[int, int]]]:
    """(size, stride) of each group's dimensions in the rank order the frameworks build:
    tp innermost, then cp, dp, pp outermost (Megatron ``tp-cp-dp-pp``, torchtitan's mesh
    ``pp, dp, cp, tp``); the expert side cut as ``etp-ep-edp`` over the same ranks."""
    from llmdiag.memory import groups

    g = groups.of(plan)
    tp, cp, dp = plan.tp, plan.cp, plan.dp_size
    etp = 1 if g.etp_replicates else g.etp
    return {"tp": [(tp, 1)], "cp": [(cp, tp)], "dp": [(cp, tp), (dp, tp * cp)],
            "pp": [(plan.pp, tp * cp * dp)], "mp": [(tp, 1), (plan.pp, tp * cp * dp)],
            "ep": [(plan.ep, etp * (tp if g.etp_replicates else 1))], "etp": [(etp, 1)],
            "edp": [(max(1, g.edp), etp * plan.ep * (tp if g.etp_replicates else 1))],
            "embedding": [(min(2, plan.pp), tp * cp * dp * max(1, plan.pp - 1))]}


def local_ranks(plan: Plan, group: str) -> int:
    """Members of rank 0's ``group`` on rank 0's node (the node holds ranks 0 … gpus_per_node − 1)."""
    node = min(plan.gpus_per_node, plan.world)
    count = 1
    for size, stride in _layout(plan).get(group, []):
        if stride < node:
            count *= min(size, -(-node // stride))
    return min(count, node)


def nvls_buffers(plan: Plan, comms: list[str]) -> tuple[float, dict[str, int]]:
    """NVLS multicast buffers of the communicators that use NVLink SHARP, and their local ranks."""
    if not hopper_or_later(plan):
        return 0.0, {}
    local = {c: local_ranks(plan, c) for c in comms if c in NVLS_GROUPS}
    local = {c: n for c, n in local.items() if n >= NVLS_MIN_LOCAL_RANKS}
    return float(sum(n * NVLS_PER_LOCAL_RANK for n in local.values())), local
