"""Activation bytes one transformer layer keeps for backward, per GPU, term by term.

The terms follow Korthikanti et al. 2022 (34sbh + 5as²b per layer for 16-bit activations and
1-byte dropout masks with a 4h GeLU MLP), generalised to GQA (K and V are ``kv_dim`` wide), a
gated MLP (gate, up, act(gate) and their product), any FFN size, MoE (each token visits top_k
experts), no dropout (Llama), tensor parallel (heads and FFN split by t), sequence parallel (the
replicated part also split by t) and context parallel (s split by cp).

Two terms the paper leaves out are kept because the measurement sees them (docs/estimate-memory.md):
- the fp32 per-token statistics each norm saves (LayerNorm: mean and rstd, 8 bytes/token;
  RMSNorm: rstd, 4 bytes/token);
- with fused attention (PyTorch SDPA/flash) the fp32 log-sum-exp (4 bytes per head per token);
  its output is the projection input (the kernel writes it in (b, s, a, d) order, so no copy).
"""

from __future__ import annotations

from llmdiag.memory.models import ModelSpec
from llmdiag.memory.plan import Plan

Term = tuple[str, float]  # (what is saved, bytes)


def layer_terms(m: ModelSpec, plan: Plan, *, recompute: str | None = None, device: str = "cuda") -> list[Term]:
    """What one layer saves for one micro batch, per GPU (``recompute`` overrides the plan's).

    ``device="cpu"`` models what PyTorch saves on CPU in bf16: dropout masks in the activation
    dtype (2 bytes, not CUDA's 1-byte bool) and norm statistics in bf16 (not fp32).
    """
    mk = 2 if device == "cpu" else 1  # bytes per dropout-mask element
    recompute = plan.recompute if recompute is None else recompute
    t, b = plan.tp, plan.micro_batch
    s = plan.seq_len / plan.cp  # tokens of this rank's sequence chunk
    s_kv = plan.seq_len if plan.attention == "eager" else s  # eager scores: local queries × all keys
    h, a, kvd, f = m.hidden, m.heads, m.kv_dim, m.ffn
    rep = t if plan.sequence_parallel else 1  # the part tensor parallelism replicates (norms, dropouts)
    sbh = s * b * h
    stat_bytes = 2 if device == "cpu" and (m.norm == "layer" or plan.fused_norm) else 4  # composite RMSNorm: fp32
    stats = (2 if m.norm == "layer" else 1) * stat_bytes * s * b
    if recompute == "full":
        return [("layer input (2sbh/sp)", 2 * sbh / rep)]

    # PyTorch's composite RMSNorm upcasts: it keeps the fp32 input and fp32 x·rstd instead of the
    # 16-bit input (8sbh instead of 2sbh); fused kernels (Megatron, TE, apex) keep the 16-bit input.
    norm_in = 8 * sbh if (m.norm == "rms" and not plan.fused_norm) else 2 * sbh
    norm_name = "norm1 input (8sbh: fp32 input + fp32 x·rstd, unfused RMSNorm)" if norm_in > 2 * sbh else "norm1 input (2sbh)"
    terms: list[Term] = [
        (norm_name, norm_in / rep),
        ("norm statistics fp32 (2 norms)", 2 * stats / rep),
        ("QKV input (2sbh)", 2 * sbh / rep),
        ("Q, K, V (2sb(h+2kv_dim)/t)", 2 * s * b * (h + 2 * kvd) / t),
    ]
    if plan.attention == "eager":
        if recompute == "none":
            terms.append(("softmax output (2as²b/t)", 2 * a * s * s_kv * b / t))
            if m.dropout:
                terms.append(("attention dropout mask (as²b/t)", mk * a * s * s_kv * b / t))
                terms.append(("attention dropout output (2as²b/t)", 2 * a * s * s_kv * b / t))
        terms.append(("projection input (2sbh/t)", 2 * sbh / t))
    else:
        if recompute == "none":
            terms.append(("fused attention log-sum-exp fp32 (4asb/t)", 4 * a * s * b / t))
        terms.append(("projection input (2sbh/t)", 2 * sbh / t))
    if m.dropout:
        terms.append(("projection dropout mask (sbh)", mk * sbh / rep))
    terms.append((norm_name.replace("norm1", "norm2"), norm_in / rep))
    k = m.top_k if m.experts > 1 else 1
    terms.append(("MLP input (2sbh)", 2 * sbh / rep))
    if m.gated:
        terms.append((f"gated MLP: gate, up, act, product (8sbf/t × top_k={k})", k * 8 * s * b * f / t))
    else:
        terms.append((f"MLP: fc1 output, activation output (4sbf/t × top_k={k})", k * 4 * s * b * f / t))
    if m.experts > 1:
        terms.append(("router logits fp32 (4sbE)", 4 * s * b * m.experts / rep))
    if m.dropout:
        terms.append(("MLP dropout mask (sbh)", mk * sbh / rep))
    return terms


def layer_bytes(m: ModelSpec, plan: Plan, *, recompute: str | None = None, device: str = "cuda") -> float:
    return sum(v for _, v in layer_terms(m, plan, recompute=recompute, device=device))


def korthikanti(m: ModelSpec, plan: Plan) -> float:
    """The paper's closed form (MHA, 4h GeLU MLP, dropout, eager attention), for the docs' comparison."""
    s, b, h, a, t = plan.seq_len, plan.micro_batch, m.hidden, m.heads, plan.tp
    if plan.recompute == "full":
        return 2 * s * b * h
    score = 0 if plan.recompute == "selective" else 5 * a * s / (h * t)
    if plan.sequence_parallel:
        return s * b * h * (34 / t + score)
    return s * b * h * (10 + 24 / t + score)
