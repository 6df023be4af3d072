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

    class LoRA(torch.nn.Module):
        """A frozen linear with a trained rank-r adapter beside it (x·W + x·A·B), as PEFT builds it."""

        def __init__(self, base, r: int):
            super().__init__()
            self.base, self.a = base, torch.nn.Linear(base.in_features, r, bias=False)
            self.b = torch.nn.Linear(r, base.out_features, bias=False)

        def forward(self, x):
            return self.base(x) + self.b(self.a(x))

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

        def adapt(self, r: int, targets: str) -> None:
            """Freeze every weight and put rank-``r`` adapters on the target linears (LoRA)."""
            for p in self.parameters():
                p.requires_grad_(False)
            names = {"qv": ("q", "v"), "attn": ("q", "k", "v", "o"),
                     "all": ("q", "k", "v", "o", "gate", "up", "down")}[targets]
            for n in names:
                setattr(self, n, LoRA(getattr(self, n), r))

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
                        ffn: int | None = None, lora_rank: int = 0, lora_targets: str = "attn") -> dict[str, Any]:
    """Bytes saved for backward per layer (mean over ``layers``), bf16 on CPU; with ``lora_rank`` the
    layer's weights are frozen and adapters trained on ``lora_targets``."""
    import torch

    torch.manual_seed(0)
    if arch == "llama":
        cls = _llama_cls()
        mods = [cls(h, a, kv or a, t, ffn or 4 * h, recompute, separate_qkv=bool(lora_rank)) for _ in range(layers)]
        for mod in mods if lora_rank else ():
            mod.adapt(lora_rank, lora_targets)
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
    lora = [dict(arch="llama", s=128, b=2, h=h, a=a, kv=kv, ffn=f, t=1, attention="flash", recompute="none",
                 lora_rank=8, lora_targets=tg)
            for (h, a, kv, f), tg in itertools.product([(64, 4, 2, 176), (128, 8, 4, 344)], ["qv", "attn", "all"])]
    return gpt + llama + lora


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
                framework="torch",  # separate nn.Linear modules: the gated MLP keeps act(gate)
                lora_rank=cfg.get("lora_rank", 0), lora_targets=cfg.get("lora_targets", "attn"))
    return m, plan


def compare(cfg: dict[str, Any]) -> tuple[float, float]:
    """(measured, estimated) bytes per layer for one grid point, estimated for this CPU's dtypes."""
    from llmdiag.memory.activations import layer_bytes

    m, plan = spec_and_plan(cfg)
    return measure_layer_bytes(**cfg)["bytes_per_layer"], layer_bytes(m, plan, device="cpu")


# ---- measured in a fresh process: torch's allocator, and the resident set as a cross-check ------
# What the estimate models is the bytes of live tensors. A process's resident set holds more, and
# how much more depends on the machine, not on the tensors: the first run of a kernel maps its code
# and its one-time buffers (the file-backed part depends on the page cache and read-ahead), the heap
# grows in steps. So the primary reading is torch's CPU allocator (every allocation and free the
# profiler records, summed in order: the live-tensor peak), and the resident set is read after an
# identical warm-up step, its high-water mark reset in between (/proc/self/clear_refs), the minimum
# of three.
_PEAK_HELPERS = r"""
import torch


def _status(key):
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith(key + ":"))


def allocator_bytes(fn):
    # (peak, end): bytes live in torch's CPU allocator while fn runs, above what was live before
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation:
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
        stack.extend(node.children)
    live = peak = 0
    for _, size in sorted(events):  # a free and an allocation at the same instant: the free first
        live += size
        peak = max(peak, live)
    return peak, live


def rss_bytes(fn, repeats=3, before=lambda: None):
    # (peak, growth) of the resident set while fn runs, after fn ran once: the minimum of repeats
    # (before: what drops the previous run's results, outside the reading)
    fn()  # the same step once: code pages, kernels' one-time buffers, the heap's growth
    peaks, growths = [], []
    for _ in range(repeats):
        before()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the high-water mark restarts from the current resident set
        base = _status("VmRSS")
        fn()
        peaks.append(_status("VmHWM") - base)
        growths.append(_status("VmRSS") - base)
    return min(peaks), min(growths)
"""


def _run_script(script: str, *args: Any) -> dict[str, float]:
    """Run a measuring script in a fresh process; large blocks on mmap, so a free leaves the RSS."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, env=env,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- the loss: peak memory of cross-entropy over a logits matrix -------------------------------
_LOSS_SCRIPT = _PEAK_HELPERS + r"""
import json, sys, torch.nn.functional as F
kind, n, v, c, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), 8
torch.manual_seed(0)
hidden = torch.randn(n, h, dtype=torch.bfloat16, requires_grad=True)
w = torch.randn(h, v, dtype=torch.bfloat16, requires_grad=True)
labels = torch.randint(0, v, (n,))


def step():
    logits = hidden @ w
    if kind == "upcast":
        loss = F.cross_entropy(logits.float(), labels)
    else:
        loss = sum(F.cross_entropy(a.float(), b, reduction="sum") for a, b in zip(logits.chunk(c), labels.chunk(c))) / n
    del logits  # as torchtitan and torchtune do before backward
    loss.backward()
    hidden.grad = w.grad = None


base = _status("VmRSS")
step()
first = _status("VmHWM") - base  # what a cold reading of the resident set gives
rss, _ = rss_bytes(step)
peak, _ = allocator_bytes(step)
print(json.dumps({"allocator": peak, "rss": rss, "rss_first": first}))
"""


def measure_loss_peak(kind: str, n: int, v: int, chunks: int = 8) -> dict[str, float]:
    """Peak bytes the loss adds (logits, fp32 copies, backward), in a fresh process.

    ``allocator``: the live-tensor peak through torch's allocator; ``rss``: the resident-set peak of
    a warm step (minimum of three); ``rss_first``: the resident-set peak of the first step, which also
    holds what the process maps on first use (machine-dependent, not tensors).
    """
    return _run_script(_LOSS_SCRIPT, kind, n, v, chunks)


def loss_grid() -> list[dict[str, Any]]:
    sizes = ((2048, 8192), (1024, 32768))
    # chunks 4 and 16 beside 8: the per-chunk term is a mechanism, not a constant fitted at 8
    return ([dict(kind=k, n=n, v=v, chunks=8) for k in ("upcast", "chunked") for n, v in sizes]
            + [dict(kind="chunked", n=2048, v=8192, chunks=c) for c in (4, 16)])


def compare_loss(cfg: dict[str, Any]) -> dict[str, float]:
    """The measured peaks (``measure_loss_peak``) and the estimate of one grid point's loss."""
    from llmdiag.memory.estimate import loss_line
    from llmdiag.memory.models import ModelSpec
    from llmdiag.memory.plan import Plan

    m = ModelSpec("loss", 1, 64, 1, cfg["v"], 64)
    plan = Plan(dp=1, seq_len=cfg["n"], loss=cfg["kind"], loss_chunks=cfg["chunks"])
    got = measure_loss_peak(cfg["kind"], cfg["n"], cfg["v"], cfg["chunks"])
    return {**got, "estimate": loss_line(m, plan, 0).bytes}


# ---- per-op selective checkpointing (torchtitan's "op" policy) ----------------------------------
_SAC_SCRIPT = _PEAK_HELPERS + r"""
import functools, json, sys
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


torch.manual_seed(0)
mods = [_llama_cls()(h, a, kv, 1, ffn, "none", separate_qkv=True).to(torch.bfloat16) for _ in range(layers)]
x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
kept = []


def forward():
    # what the checkpoints keep after forward: each layer's input (the first one's is x, allocated
    # before) and what the policy saved; the last output is not kept by any layer
    kept.clear()
    y = x
    for mod in mods:
        ctx = functools.partial(create_selective_checkpoint_contexts, policy(defaultdict(int)))
        y = checkpoint(mod.body, y, use_reentrant=False, context_fn=ctx)
    kept.append(y)


forward()
kept[0].float().sum().backward()  # warm-up: the kernels of forward, recompute and backward
x.grad = None
kept.clear()


def per_layer(grown):  # the output is kept by no layer, the first layer's input x by one
    return (grown - kept[0].numel() * 2 + x.numel() * 2) / layers


_, rss = rss_bytes(forward, before=kept.clear)
rss = per_layer(rss)
kept.clear()
_, live = allocator_bytes(forward)
live = per_layer(live)
print(json.dumps({"allocator": live, "rss": rss}))
"""


def measure_sac_layer_bytes(*, s: int, b: int, h: int, a: int, kv: int, ffn: int, layers: int = 4) -> dict[str, float]:
    """Bytes one Llama layer keeps under torchtitan's per-op SAC policy, in a fresh process.

    ``allocator``: through torch's allocator; ``rss``: the resident-set growth of a warm forward.
    """
    return _run_script(_SAC_SCRIPT, h, a, kv, ffn, s, b, layers)


def sac_grid() -> list[dict[str, Any]]:
    return [dict(arch="llama", s=s, b=b, h=h, a=a, kv=kv, ffn=f, t=1, attention="flash", recompute="sac")
            for (s, b), (h, a, kv, f) in (((1024, 2), (256, 8, 2, 704)), ((512, 4), (512, 8, 8, 1376)))]


def compare_sac(cfg: dict[str, Any]) -> dict[str, float]:
    from llmdiag.memory.activations import layer_bytes

    m, plan = spec_and_plan(cfg)
    got = measure_sac_layer_bytes(s=cfg["s"], b=cfg["b"], h=cfg["h"], a=cfg["a"], kv=cfg["kv"], ffn=cfg["ffn"])
    return {**got, "estimate": layer_bytes(m, plan, device="cpu")}


# ---- FSDP2 under a pipeline schedule: what stays live across micro batches ----------------------
# Two gloo ranks shard a stack of bias-free linears with FSDP2 (bf16 compute, fp32 reduce), run a
# whole step first (lazy initialisation outside the reading), then two micro batches with the
# settings torch.distributed.pipelining applies before every backward but the last
# (set_is_last_backward/set_reshard_after_backward/set_requires_gradient_sync False; with PP
# torchtitan also turns reshard_after_forward off), or plain FSDP steps; rank 0 prints the bytes of
# the distinct tensor storages alive at the end above those alive at the start (a census of every
# tensor the garbage collector sees: deterministic, where the profiler's allocator record misses
# frees that gloo's threads make).
_FSDP_SCRIPT = r"""
import gc, json, sys, torch, torch.distributed as dist, torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

dist.init_process_group("gloo")
h, layers, pp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "pp"
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(h, h, bias=False) for _ in range(layers)])
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for m in list(model) + [model]:
    fully_shard(m, mp_policy=mp, reshard_after_forward=not pp)
x = torch.randn(8, h)
model(x).float().sum().backward()
model.zero_grad(set_to_none=True)
if pp:
    model.set_is_last_backward(False)
    model.set_reshard_after_backward(False)
    model.set_requires_gradient_sync(False)


def live() -> dict[int, int]:
    gc.collect()
    out = {}
    for o in gc.get_objects():
        try:
            if torch.is_tensor(o) and o.device.type == "cpu":
                st = o.untyped_storage()
                out[st.data_ptr()] = st.nbytes()
        except Exception:  # a tensor subclass without one storage (DTensor wraps a local tensor, counted itself)
            pass
    return out


before = live()
for _ in range(2):
    model(x).float().sum().backward()
after = live()
end = sum(n for ptr, n in after.items() if before.get(ptr) != n)
if dist.get_rank() == 0:
    print(json.dumps({"end": end, "params": h * h * layers}))
dist.destroy_process_group()
"""


def measure_fsdp_microbatches(*, h: int, layers: int, pp: bool, ranks: int = 2) -> dict[str, float]:
    """Live bytes on rank 0 after two micro batches of FSDP2 over ``ranks`` gloo processes, as
    under a pipeline schedule (``pp``) or plain FSDP."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "fsdp_step.py")
        with open(script, "w") as f:
            f.write(_FSDP_SCRIPT)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                              f"--nproc-per-node={ranks}", script, str(h), str(layers), "pp" if pp else "flat"],
                             capture_output=True, text=True, env=env, timeout=300, check=True)
    return json.loads([x for x in out.stdout.splitlines() if x.startswith("{")][-1])
