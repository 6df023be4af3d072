"""Memory truth: peak GPU memory of Llama-like training steps against ``llmdiag estimate-memory``.

One grid point is one process (``python bench/gpu_memtruth.py worker CONFIG_JSON``), so that
each measurement starts from an empty caching allocator and a fresh CUDA context. The worker
builds a Llama-like decoder (embedding, RMSNorm, GQA attention through SDPA, SwiGLU MLP,
final norm, LM head, fp32 cross-entropy), runs three AdamW steps in bf16 mixed precision and
prints one JSON line: ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` over the
three steps, and the device memory the process holds (NVML's used memory after the steps
minus before CUDA started: context, NCCL and the reserved pool together).

Mixed precision, as the estimator's default plan counts it (bf16 weights and gradients, an fp32
master copy, AdamW moments in fp32 = 16 bytes per parameter):
- ``single``: bf16 parameters; an fp32 master and a fused AdamW per parameter; each bf16
  gradient is upcast, stepped and dropped one parameter at a time;
- ``fsdp``: FSDP over one NCCL rank, fp32 parameters, ``MixedPrecision(bf16)`` compute, one
  FSDP unit per block, AdamW one tensor at a time; estimated as ``--fsdp --dp 1``.
Recompute ``selective`` checkpoints the attention core, ``full`` the whole block. Not modelled:
rotary embeddings (they add transient copies of Q and K), dropout (Llama has none).
On a machine without CUDA the worker runs the same code on CPU at the size it is given
(the tests use a tiny one) and reports no peaks.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from typing import Any

GiB = 1024**3

#: Llama-like shapes (layers, hidden, heads, kv heads, ffn, vocab, tied), 0.6B to 8B parameters.
MODELS: dict[str, dict[str, Any]] = {
    "0.6b": dict(layers=20, hidden=1536, heads=12, kv_heads=4, ffn=4096, vocab=32000, tied=False),
    "1.1b": dict(layers=22, hidden=2048, heads=32, kv_heads=4, ffn=5632, vocab=32000, tied=False),  # TinyLlama
    "1.2b": dict(layers=16, hidden=2048, heads=32, kv_heads=8, ffn=8192, vocab=128256, tied=True),  # Llama 3.2 1B
    "3.2b": dict(layers=28, hidden=3072, heads=24, kv_heads=8, ffn=8192, vocab=128256, tied=True),  # Llama 3.2 3B
    "6.7b": dict(layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008, vocab=32000, tied=False),  # Llama 2 7B
    "8.0b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, tied=False),  # Llama 3 8B
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=257, tied=False),  # CPU plumbing only
}

#: (model, seq, micro batch, recompute, mode): 20 points that fit on one ~139 GiB H200.
GRID: list[tuple[str, int, int, str, str]] = [
    ("0.6b", 2048, 1, "none", "single"), ("0.6b", 4096, 2, "none", "single"),
    ("0.6b", 8192, 4, "selective", "single"), ("0.6b", 8192, 4, "full", "single"),
    ("0.6b", 4096, 2, "none", "fsdp"),
    ("1.1b", 2048, 4, "none", "single"), ("1.1b", 4096, 2, "selective", "single"), ("1.1b", 8192, 1, "full", "fsdp"),
    ("1.2b", 2048, 2, "none", "single"), ("1.2b", 4096, 4, "selective", "single"),
    ("1.2b", 8192, 2, "full", "single"), ("1.2b", 4096, 2, "none", "fsdp"),
    ("3.2b", 2048, 1, "none", "single"), ("3.2b", 4096, 2, "selective", "single"),
    ("3.2b", 8192, 1, "full", "fsdp"), ("3.2b", 8192, 2, "full", "single"),
    ("6.7b", 2048, 1, "selective", "single"), ("6.7b", 4096, 2, "full", "single"), ("6.7b", 2048, 1, "full", "fsdp"),
    ("8.0b", 2048, 1, "full", "single"),
]
#: --quick: the small end of the grid, one of each recompute kind and mode
QUICK = [GRID[0], GRID[3], GRID[4], GRID[6], GRID[9], GRID[13]]


def config(model: str, seq: int, mb: int, recompute: str, mode: str) -> dict[str, Any]:
    return dict(MODELS[model], model=model, seq=seq, micro_batch=mb, recompute=recompute, mode=mode)


def grid(quick: bool = False) -> list[dict[str, Any]]:
    """The points in the order they run: the quick ones first, so that a run cut short by its
    time budget still covers every model size, recompute kind and mode it reached."""
    return [config(*g) for g in (QUICK if quick else QUICK + [g for g in GRID if g not in QUICK])]


def param_count(c: dict[str, Any]) -> int:
    h, kvd = c["hidden"], c["kv_heads"] * (c["hidden"] // c["heads"])
    layer = 2 * h * h + 2 * h * kvd + 3 * h * c["ffn"] + 2 * h
    return c["layers"] * layer + h + c["vocab"] * h * (1 if c["tied"] else 2)


def estimate_argv(c: dict[str, Any], gpu_memory_bytes: int | None, fused_norm: bool = False) -> list[str]:
    """``llmdiag estimate-memory`` for the plan the worker runs (through the public CLI)."""
    argv = [sys.executable, "-m", "llmdiag", "estimate-memory", "--layers", str(c["layers"]),
            "--hidden", str(c["hidden"]), "--heads", str(c["heads"]), "--kv-heads", str(c["kv_heads"]),
            "--ffn", str(c["ffn"]), "--vocab", str(c["vocab"]), "--gated", "--tied" if c["tied"] else "--untied",
            "--seq-len", str(c["seq"]), "--micro-batch", str(c["micro_batch"]), "--recompute", c["recompute"],
            "--attention", "flash", "--precision", "bf16", "--optimizer", "adamw", "--master-weights",
            "--dp", "1", "--world-size", "1", "--fused-norm" if fused_norm else "--unfused-norm", "-f", "json"]
    if gpu_memory_bytes:
        argv += ["--gpu-memory", f"{gpu_memory_bytes // (1024 * 1024)}MiB"]
    if c["mode"] == "fsdp":
        argv.append("--fsdp")
    return argv


def run_estimate(c: dict[str, Any], gpu_memory_bytes: int | None, timeout: float, fused_norm: bool = False,
                 ) -> dict[str, Any]:
    """The estimate's total and the part without runtime overheads, or ``{"error": ...}``."""
    try:
        p = subprocess.run(estimate_argv(c, gpu_memory_bytes, fused_norm), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"estimate-memory timed out after {timeout:g} s"}
    if p.returncode not in (0, 1):
        return {"error": f"estimate-memory exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:200]}"}
    try:
        doc = json.loads(p.stdout)
        b = doc["breakdown"]
        return {"total": int(b["total"]), "without_overheads": int(b["total"] - b["overheads"]),
                "params": int(doc["params_total"]), "verdict": doc.get("verdict")}
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"estimate-memory printed no usable JSON: {exc}"}


# ---------------------------------------------------------------------------------------------
# the worker (torch imported here only)

def _model(c: dict[str, Any]):
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            h, self.a, self.kv = c["hidden"], c["heads"], c["kv_heads"]
            self.d = h // self.a
            self.n1, self.n2 = nn.RMSNorm(h), nn.RMSNorm(h)
            self.qkv = nn.Linear(h, (self.a + 2 * self.kv) * self.d, bias=False)
            self.o = nn.Linear(h, h, bias=False)
            self.gate, self.up = nn.Linear(h, c["ffn"], bias=False), nn.Linear(h, c["ffn"], bias=False)
            self.down = nn.Linear(c["ffn"], h, bias=False)

        def core(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

        def body(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(self.n1(x)).split([h, self.kv * self.d, self.kv * self.d], -1)
            q = q.view(b, s, self.a, self.d).transpose(1, 2)
            k, v = (t.view(b, s, self.kv, self.d).transpose(1, 2) for t in (k, v))
            if c["recompute"] == "selective":
                o = checkpoint(self.core, q, k, v, use_reentrant=False)
            else:
                o = self.core(q, k, v)
            x = x + self.o(o.transpose(1, 2).reshape(b, s, h))
            y = self.n2(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

        def forward(self, x):
            if c["recompute"] == "full":
                return checkpoint(self.body, x, use_reentrant=False)
            return self.body(x)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(c["vocab"], c["hidden"])
            self.blocks = nn.ModuleList(Block() for _ in range(c["layers"]))
            self.norm = nn.RMSNorm(c["hidden"])
            self.head = nn.Linear(c["hidden"], c["vocab"], bias=False)
            if c["tied"]:
                self.head.weight = self.emb.weight

        def forward(self, ids, labels):
            x = self.emb(ids)
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.norm(x))
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), labels.reshape(-1))

    return Llama, Block


def _nvml_used(index: int) -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: the process total is then not measured
        return None


def worker(c: dict[str, Any], steps: int = 3) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    used0 = _nvml_used(0) if cuda else None
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    Llama, Block = _model(c)
    group = None
    t0 = time.perf_counter()
    with dev:
        model = Llama()  # fp32 first: the master copy (single) or FSDP's sharded parameters
    if c["mode"] == "fsdp":
        import torch.distributed as dist
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import MixedPrecision
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("nccl" if cuda else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1)
        group = dist.group.WORLD
        bf16 = torch.bfloat16
        model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=True,
                     mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=bf16, buffer_dtype=bf16),
                     device_id=dev if cuda else None)
        # one tensor at a time (no foreach temporaries, no fused kernel over FSDP's flat views)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        pairs = []
    else:
        params = [p for p in model.parameters()]
        masters = [p.detach().clone() for p in params]
        model.to(torch.bfloat16)
        params = [p for p in model.parameters()]  # same order; tied weights appear once
        pairs = [(p, m, torch.optim.AdamW([m], lr=1e-4, fused=cuda)) for p, m in zip(params, masters)]
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    build_s = time.perf_counter() - t0
    gen = torch.Generator(device=dev).manual_seed(1)
    losses, step_s, peaks = [], [], []
    for _ in range(steps):
        t = time.perf_counter()
        ids = torch.randint(0, c["vocab"], (c["micro_batch"], c["seq"] + 1), device=dev, generator=gen)
        loss = model(ids[:, :-1], ids[:, 1:])
        loss.backward()
        if pairs:
            with torch.no_grad():
                for p, m, o in pairs:
                    m.grad = p.grad.float()
                    p.grad = None
                    o.step()
                    m.grad = None
                    p.copy_(m)
        else:
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if cuda:
            torch.cuda.synchronize()
            peaks.append(int(torch.cuda.max_memory_allocated()))
        step_s.append(round(time.perf_counter() - t, 4))
    out: dict[str, Any] = {"device": str(dev), "params": sum(p.numel() for p in model.parameters()),
                           "losses": losses, "step_s": step_s, "build_s": round(build_s, 3),
                           "peak_allocated": None, "peak_reserved": None, "process_used": None,
                           "torch": torch.__version__}
    if cuda:
        out.update(peak_allocated=int(torch.cuda.max_memory_allocated()), peak_allocated_per_step=peaks,
                   peak_reserved=int(torch.cuda.max_memory_reserved()), gpu=torch.cuda.get_device_name(0))
        used1 = _nvml_used(0)
        if used0 is not None and used1 is not None:
            out["process_used"] = used1 - used0
    if group is not None:
        import torch.distributed as dist

        if c["mode"] == "fsdp":
            out["params"] = param_count(c)  # FSDP's flat views count differently; the model's own count
        dist.destroy_process_group()
    out["finite"] = all(math.isfinite(x) for x in losses)
    return out


def signed_error(estimate: int | None, measured: int | None) -> float | None:
    """(estimate - measured) / measured in percent: positive means the estimate is too high."""
    if not estimate or not measured:
        return None
    return round(100.0 * (estimate - measured) / measured, 2)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "worker":
        print("usage: python bench/gpu_memtruth.py worker CONFIG_JSON", file=sys.stderr)
        return 2
    try:
        c = json.loads(argv[1])
        for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "tied", "seq", "micro_batch",
                  "recompute", "mode"):
            c[k]
    except (ValueError, KeyError, TypeError) as exc:
        print(f"error: bad worker config: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(worker(c)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
