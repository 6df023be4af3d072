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

#: Mechanism plans, run after the grid (quick runs too), each one process on one GPU:
#: - ``moe``: a Mixtral-like decoder (8 experts, top-2, token-choice routing with an fp32 router),
#:   every expert on this GPU (ep = etp = edp = 1): the experts' parameters, gradients, master
#:   weights and moments, and the dispatch's activations (permuted tokens, expert outputs);
#: - ``paged``: bitsandbytes' PagedAdamW8bit over the fp32 masters (state in CUDA managed memory,
#:   outside the caching allocator); skipped with the reason when bitsandbytes is absent;
#: - ``pp``: pipeline stage 0 of ``pp`` stages run alone, its 1F1B order (warm-up forwards, then one
#:   forward and one backward each, the gradient of the stage output standing in for the next
#:   stage's), gradients accumulated over the micro batches: compared with the estimate's stage 0.
MECHANISMS: list[dict[str, Any]] = [
    dict(MODELS["0.6b"], model="moe-0.64b", layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, experts=8, top_k=2,
         seq=2048, micro_batch=2, recompute="none", mode="moe"),
    dict(MODELS["0.6b"], model="0.6b", seq=2048, micro_batch=1, recompute="none", mode="paged"),
    dict(MODELS["1.1b"], model="1.1b", seq=4096, micro_batch=2, recompute="none", mode="pp", pp=2, microbatches=4),
]


def config(model: str, seq: int, mb: int, recompute: str, mode: str) -> dict[str, Any]:
    return dict(MODELS[model], model=model, seq=seq, micro_batch=mb, recompute=recompute, mode=mode)


def grid(quick: bool = False) -> list[dict[str, Any]]:
    """The points in the order they run: the quick ones first, then the mechanism plans (MoE, paged
    optimizer, a pipeline stage), then the rest of the grid, so that a run cut short by its time
    budget still covers every model size, recompute kind, mode and mechanism it reached."""
    rest = [] if quick else [config(*g) for g in GRID if g not in QUICK]
    return [config(*g) for g in QUICK] + [dict(c) for c in MECHANISMS] + rest


def param_count(c: dict[str, Any]) -> int:
    h, kvd = c["hidden"], c["kv_heads"] * (c["hidden"] // c["heads"])
    e = c.get("experts") or 0
    mlp = e * 3 * h * c["ffn"] + h * e if e else 3 * h * c["ffn"]  # routed experts and the router
    layer = 2 * h * h + 2 * h * kvd + mlp + 2 * h
    return c["layers"] * layer + h + c["vocab"] * h * (1 if c["tied"] else 2)


def stage_layers(c: dict[str, Any]) -> int:
    """Layers of pipeline stage 0: the estimate's even split (the remainder goes to stage 0 first
    when pp = 2)."""
    pp = c.get("pp", 1)
    return c["layers"] // pp + (1 if c["layers"] % pp else 0)


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
    if c.get("experts"):
        argv += ["--experts", str(c["experts"]), "--top-k", str(c["top_k"]), "--ep", "1"]
    if c["mode"] == "paged":
        argv[argv.index("adamw")] = "paged-adam8bit"
    if c["mode"] == "pp":
        pp = int(c["pp"])
        argv[argv.index("--world-size") + 1] = str(pp)
        argv += ["--pp", str(pp), "--global-batch", str(c["microbatches"] * c["micro_batch"])]
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
        if c["mode"] == "pp":  # the measured process is stage 0: its own device and allocated peak
            st = next(x for x in doc["stages"] if x["stage"] == 0)
            return {"total": int(st["device"]), "without_overheads": int(st["allocated"]),
                    "params": int(doc["params_total"]), "verdict": doc.get("verdict"), "stage": 0}
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
            self.experts = None
            if c.get("experts"):
                f, lin = c["ffn"], (lambda i, o: nn.Linear(i, o, bias=False))
                self.router = lin(h, c["experts"])
                self.experts = nn.ModuleList(nn.ModuleList([lin(h, f), lin(h, f), lin(f, h)])
                                             for _ in range(c["experts"]))
            else:
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
            if self.experts is not None:
                return x + self.moe(y)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

        def moe(self, y):
            """Token-choice top-k routing: each expert runs on the tokens routed to it and its
            output, weighted by the routing probability, is added back at their positions."""
            import torch

            b, s, h = y.shape
            flat = y.reshape(-1, h)
            probs = self.router(flat).float().softmax(-1)
            w, idx = probs.topk(c["top_k"], -1)
            out = torch.zeros_like(flat)
            for e, (g, u, d) in enumerate(self.experts):
                tok, slot = (idx == e).nonzero(as_tuple=True)
                ye = flat[tok]
                out = out.index_add(0, tok, d(F.silu(g(ye)) * u(ye)) * w[tok, slot, None].to(ye.dtype))
            return out.view(b, s, h)

        def forward(self, x):
            if c["recompute"] == "full":
                return checkpoint(self.body, x, use_reentrant=False)
            return self.body(x)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            stage0 = c["mode"] == "pp"  # the first pipeline stage: embedding and its layers, no head
            self.emb = nn.Embedding(c["vocab"], c["hidden"])
            self.blocks = nn.ModuleList(Block() for _ in range(stage_layers(c) if stage0 else c["layers"]))
            self.norm = self.head = None
            if not stage0:
                self.norm = nn.RMSNorm(c["hidden"])
                self.head = nn.Linear(c["hidden"], c["vocab"], bias=False)
                if c["tied"]:
                    self.head.weight = self.emb.weight

        def forward(self, ids, labels):
            x = self.emb(ids)
            for blk in self.blocks:
                x = blk(x)
            if self.head is None:
                return x  # the stage output sent to the next stage
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


def paged_unavailable(cuda: bool) -> str | None:
    """Why a paged optimizer cannot run here, or None."""
    if not cuda:
        return "paged optimizers need CUDA managed memory (no GPU)"
    try:
        import bitsandbytes  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - absent or broken: the plan is skipped with the reason
        return f"bitsandbytes is not importable ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def stage0_1f1b(model, c: dict[str, Any], dev, gen):
    """One step of pipeline stage 0 under 1F1B: ``min(pp − 1, m)`` warm-up forwards, then a forward
    and a backward each, then the remaining backwards; each backward takes a random gradient of
    the stage output (what stage 1 would send). Returns the last output's mean square (finite check)."""
    import collections

    import torch

    m, warm = int(c["microbatches"]), min(int(c["pp"]) - 1, int(c["microbatches"]))
    held: collections.deque = collections.deque()
    last = None

    def forward():
        ids = torch.randint(0, c["vocab"], (c["micro_batch"], c["seq"]), device=dev, generator=gen)
        held.append(model(ids, None))

    def backward():
        nonlocal last
        y = held.popleft()
        y.backward(torch.randn(y.shape, device=dev, dtype=y.dtype, generator=gen) * 1e-3)
        last = y.detach().float().pow(2).mean()

    for _ in range(warm):
        forward()
    for _ in range(m - warm):
        forward()
        backward()
    for _ in range(warm):
        backward()
    return last


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
        def make_opt(m):
            return torch.optim.AdamW([m], lr=1e-4, fused=cuda)

        if c["mode"] == "paged":
            why = paged_unavailable(cuda)
            if why:
                return {"device": str(dev), "skipped": why, "finite": True, "torch": torch.__version__}
            import bitsandbytes as bnb

            def make_opt(m):
                return bnb.optim.PagedAdamW8bit([m], lr=1e-4)

        params = [p for p in model.parameters()]
        masters = [p.detach().clone() for p in params]
        model.to(torch.bfloat16)
        params = [p for p in model.parameters()]  # same order; tied weights appear once
        pairs = [(p, m, make_opt(m)) for p, m in zip(params, masters)]
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    build_s = time.perf_counter() - t0
    gen = torch.Generator(device=dev).manual_seed(1)
    losses, step_s, peaks = [], [], []
    for _ in range(steps):
        t = time.perf_counter()
        if c["mode"] == "pp":
            loss = stage0_1f1b(model, c, dev, gen)
        else:
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
