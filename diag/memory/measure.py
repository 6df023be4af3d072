"""Measured activation memory: transformer layers run under saved_tensors_hooks.

``gpt``: the architecture Korthikanti's formula describes (LayerNorm, QKV, attention with
dropout, projection, dropout, LayerNorm, 4h GeLU MLP, dropout). ``llama``: PyTorch's own
``nn.RMSNorm``, GQA through SDPA (``enable_gqa``), SwiGLU MLP, no dropout. Tensor parallelism is
simulated by giving one rank's shapes (heads/t, ffn/t) with the replicated parts at full size.
Every distinct storage saved for backward is counted once (by data pointer), parameters excluded.
Used by the accuracy tests and bench; torch is imported lazily.
"""

from __future__ import annotations

import math
from typing import Any


def _layer_cls():
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    class GPTLayer(torch.nn.Module):
        def __init__(self, h: int, a: int, t: int, ffn: int, attention: str, recompute: str, p: float = 0.1):
            super().__init__()
            self.h, self.a_local, self.d = h, a // t, h // a
            self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
            self.qkv = torch.nn.Linear(h, 3 * h // t)
            self.proj = torch.nn.Linear(h // t, h)
            self.fc1, self.fc2 = torch.nn.Linear(h, ffn // t), torch.nn.Linear(ffn // t, h)
            self.attention, self.recompute, self.p = attention, recompute, p

        def core(self, q, k, v):
            if self.attention == "flash":
                return F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False)
            # no causal mask: Megatron's fused softmax masks in-kernel and saves no mask tensor
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))
            probs = F.softmax(scores, dim=-1)
            return torch.matmul(F.dropout(probs, self.p, True), v)

        def body(self, x):
            b, s, _ = x.shape
            qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.a_local, self.d)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
            if self.recompute == "selective":
                ctx = checkpoint(self.core, q, k, v, use_reentrant=True)
            else:
                ctx = self.core(q, k, v)
            ctx = ctx.transpose(1, 2).reshape(b, s, self.a_local * self.d)
            x = x + F.dropout(self.proj(ctx), self.p, True)
            y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return x + F.dropout(y, self.p, True)

        def forward(self, x):
            if self.recompute == "full":
                return checkpoint(self.body, x, use_reentrant=True)
            return self.body(x)

    return GPTLayer


def _llama_cls():
    import torch
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    class LlamaLayer(torch.nn.Module):
        def __init__(self, h: int, a: int, kv: int, t: int, ffn: int, recompute: str, separate_qkv: bool = False):
            super().__init__()
            self.h, self.a, self.kv, self.d = h // t, a // t, kv // t, h // a
            self.n1, self.n2 = torch.nn.RMSNorm(h), torch.nn.RMSNorm(h)
            self.qkv = torch.nn.Linear(h, (a + 2 * kv) // t * self.d, bias=False)
            if separate_qkv:  # wq, wk, wv as torchtitan and Hugging Face build them (three matmuls)
                widths = [self.h, self.kv * self.d, self.kv * self.d]
                self.q, self.k, self.v = (torch.nn.Linear(h, w, bias=False) for w in widths)
            self.separate_qkv = separate_qkv
            self.o = torch.nn.Linear(h // t, h, bias=False)
            self.gate, self.up = torch.nn.Linear(h, ffn // t, bias=False), torch.nn.Linear(h, ffn // t, bias=False)
            self.down = torch.nn.Linear(ffn // t, h, bias=False)
            self.recompute = recompute

        def body(self, x):
            b, s, _ = x.shape
            if self.separate_qkv:
                y = self.n1(x)
                q, k, v = self.q(y), self.k(y), self.v(y)
            else:
                q, k, v = self.qkv(self.n1(x)).split([self.h, self.kv * self.d, self.kv * self.d], -1)
            q = q.view(b, s, self.a, self.d).transpose(1, 2)
            k, v = (z.view(b, s, self.kv, self.d).transpose(1, 2) for z in (k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + self.o(o.transpose(1, 2).reshape(b, s, self.h))
            y = self.n2(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

        def forward(self, x):
            if self.recompute == "full":
                return checkpoint(self.body, x, use_reentrant=True)
            return self.body(x)

    return LlamaLayer


def measure_layer_bytes(*, s: int, b: int, h: int, a: int, t: int = 1, attention: str = "eager",
                        recompute: str = "none", layers: int = 2, arch: str = "gpt", kv: int | None = None,
                        ffn: int | None = None) -> dict[str, Any]:
    """Bytes saved for backward per layer (mean over ``layers``), bf16 on CPU."""
    import torch

    torch.manual_seed(0)
    if arch == "llama":
        cls = _llama_cls()
        mods = [cls(h, a, kv or a, t, ffn or 4 * h, recompute) for _ in range(layers)]
    else:
        cls = _layer_cls()
        mods = [cls(h, a, t, 4 * h, attention, recompute) for _ in range(layers)]
    stack = torch.nn.Sequential(*mods).to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in stack.parameters()}
    seen: dict[int, int] = {}

    def pack(x):
        st = x.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.nbytes()
        return x

    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = stack(x)
    total = sum(seen.values())
    out.float().sum().backward()  # the graph must be usable: a real training step
    return {"bytes_per_layer": total / layers, "distinct_saved": len(seen)}


def grid() -> list[dict[str, Any]]:
    """The accuracy grid of the tests and docs: tiny dims so the whole grid runs in seconds."""
    import itertools

    gpt = [dict(arch="gpt", s=s, b=b, h=h, a=a, t=t, attention=att, recompute=rc)
           for (s, b), (h, a), t, att, rc in itertools.product(
               [(64, 1), (128, 2)], [(64, 4), (128, 8)], [1, 2], ["eager", "flash"], ["none", "selective", "full"])
           if not (att == "flash" and rc == "selective")]  # nothing to recompute with fused attention
    llama = [dict(arch="llama", s=s, b=b, h=h, a=a, kv=kv, ffn=f, t=t, attention="flash", recompute=rc)
             for (s, b), (h, a, kv, f), t, rc in itertools.product(
                 [(64, 1), (128, 2)], [(64, 4, 2, 176), (128, 8, 8, 344)], [1, 2], ["none", "full"])]
    return gpt + llama


def spec_and_plan(cfg: dict[str, Any]):
    """The ModelSpec and Plan that describe one grid point's measured layer."""
    from llmdiag.memory.models import ModelSpec
    from llmdiag.memory.plan import Plan

    if cfg.get("arch") == "llama":
        m = ModelSpec("llama-layer", 2, cfg["h"], cfg["a"], 128, cfg["ffn"], kv_heads=cfg["kv"])
    else:
        m = ModelSpec("gpt-layer", 2, cfg["h"], cfg["a"], 128, 4 * cfg["h"], gated=False, bias=True, norm="layer",
                      dropout=True)
    plan = Plan(dp=1, tp=cfg["t"], seq_len=cfg["s"], micro_batch=cfg["b"], attention=cfg["attention"],
                recompute=cfg["recompute"], fused_norm=cfg.get("arch") != "llama",  # nn.RMSNorm is composite
                framework="torch")  # separate nn.Linear modules: the gated MLP keeps act(gate)
    return m, plan


def compare(cfg: dict[str, Any]) -> tuple[float, float]:
    """(measured, estimated) bytes per layer for one grid point, estimated for this CPU's dtypes."""
    from llmdiag.memory.activations import layer_bytes

    m, plan = spec_and_plan(cfg)
    return measure_layer_bytes(**cfg)["bytes_per_layer"], layer_bytes(m, plan, device="cpu")


# ---- the loss: peak memory of cross-entropy over a logits matrix, measured as process RSS -------
_LOSS_SCRIPT = r"""
import sys, torch, torch.nn.functional as F
kind, n, v, c, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), 64


def hwm():  # this address space's resident high-water mark (ru_maxrss would carry the parent's over exec)
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmHWM:"))


torch.manual_seed(0)
hidden = torch.randn(n, h, dtype=torch.bfloat16, requires_grad=True)
w = torch.randn(h, v, dtype=torch.bfloat16, requires_grad=True)
labels = torch.randint(0, v, (n,))
x = torch.randn(8, 16, requires_grad=True)  # warm the kernels up on a tiny problem
(F.cross_entropy((x @ torch.randn(16, 16)).float(), torch.zeros(8, dtype=torch.long))).backward()
base = hwm()
logits = hidden @ w
if kind == "upcast":
    loss = F.cross_entropy(logits.float(), labels)
else:
    loss = sum(F.cross_entropy(a.float(), b, reduction="sum") for a, b in zip(logits.chunk(c), labels.chunk(c))) / n
del logits  # as torchtitan and torchtune do before backward
loss.backward()
print(hwm() - base)
"""


def measure_loss_peak(kind: str, n: int, v: int, chunks: int = 8) -> int:
    """Peak bytes the loss adds (logits, fp32 copies, backward), in a fresh process.

    Large blocks are forced onto mmap (``MALLOC_MMAP_THRESHOLD_``) so a freed tensor leaves the
    resident set at once and the high-water mark (``VmHWM``) is the live-tensor peak.
    """
    import os
    import subprocess
    import sys

    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _LOSS_SCRIPT, kind, str(n), str(v), str(chunks)],
                         capture_output=True, text=True, env=env, timeout=300, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def loss_grid() -> list[dict[str, Any]]:
    return [dict(kind=k, n=n, v=v, chunks=8) for k in ("upcast", "chunked") for n, v in ((2048, 8192), (1024, 32768))]


def compare_loss(cfg: dict[str, Any]) -> tuple[float, float]:
    """(measured, estimated) peak bytes of the loss for one grid point."""
    from llmdiag.memory.estimate import loss_line
    from llmdiag.memory.models import ModelSpec
    from llmdiag.memory.plan import Plan

    m = ModelSpec("loss", 1, 64, 1, cfg["v"], 64)
    plan = Plan(dp=1, seq_len=cfg["n"], loss=cfg["kind"], loss_chunks=cfg["chunks"])
    return float(measure_loss_peak(cfg["kind"], cfg["n"], cfg["v"], cfg["chunks"])), loss_line(m, plan, 0).bytes


# ---- per-op selective checkpointing (torchtitan's "op" policy), measured as process RSS ---------
_SAC_SCRIPT = r"""
import functools, sys, torch
from collections import defaultdict
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from llmdiag.memory.measure import _llama_cls
h, a, kv, ffn, s, b, layers = (int(x) for x in sys.argv[1:8])
# torchtitan's save list; on CPU SDPA dispatches to the CPU flash kernel
SAVE = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}


def policy(meta):
    def fn(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            meta[mode] += 1
        keep = func in SAVE and not (func == torch.ops.aten.mm.default and meta[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    return fn


def rss():
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:"))


torch.manual_seed(0)
mods = [_llama_cls()(h, a, kv, 1, ffn, "none", separate_qkv=True).to(torch.bfloat16) for _ in range(layers)]


def run(x):
    for mod in mods:
        ctx = functools.partial(create_selective_checkpoint_contexts, policy(defaultdict(int)))
        x = checkpoint(mod.body, x, use_reentrant=False, context_fn=ctx)
    return x


x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
run(x.detach().requires_grad_()).float().sum().backward()  # warm-up: kernels, allocator
base = rss()
y = run(x)
# each layer keeps its input (the first one's is x, allocated before) and what the policy saved
print((rss() - base - y.numel() * 2 + x.numel() * 2) / layers)
y.float().sum().backward()
"""


def measure_sac_layer_bytes(*, s: int, b: int, h: int, a: int, kv: int, ffn: int, layers: int = 4) -> float:
    """Bytes one Llama layer keeps under torchtitan's per-op SAC policy, in a fresh process."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS="1")
    args = [str(v) for v in (h, a, kv, ffn, s, b, layers)]
    out = subprocess.run([sys.executable, "-c", _SAC_SCRIPT, *args], capture_output=True, text=True, env=env,
                         timeout=300, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def sac_grid() -> list[dict[str, Any]]:
    return [dict(arch="llama", s=s, b=b, h=h, a=a, kv=kv, ffn=f, t=1, attention="flash", recompute="sac")
            for (s, b), (h, a, kv, f) in (((1024, 2), (256, 8, 2, 704)), ((512, 4), (512, 8, 8, 1376)))]


def compare_sac(cfg: dict[str, Any]) -> tuple[float, float]:
    from llmdiag.memory.activations import layer_bytes

    m, plan = spec_and_plan(cfg)
    measured = measure_sac_layer_bytes(s=cfg["s"], b=cfg["b"], h=cfg["h"], a=cfg["a"], kv=cfg["kv"], ffn=cfg["ffn"])
    return measured, layer_bytes(m, plan, device="cpu")
