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


def layer_terms(m: ModelSpec, plan: Plan, *, recompute: str | None = None, device: str = "cuda",
                moe_layer: bool | None = None) -> list[Term]:
    """What one layer saves for one micro batch, per GPU (``recompute`` overrides the plan's).

    ``device="cpu"`` models what PyTorch saves on CPU in bf16: dropout masks in the activation
    dtype (2 bytes, not CUDA's 1-byte bool) and norm statistics in bf16 (not fp32).
    ``moe_layer``: an MoE layer (default: the model is MoE); False for a dense(-first) layer.
    """
    mk = 2 if device == "cpu" else 1  # bytes per dropout-mask element
    recompute = plan.recompute if recompute is None else recompute
    moe_layer = m.moe if moe_layer is None else moe_layer
    t, b = plan.tp, plan.micro_batch
    s = plan.seq_len / plan.cp  # tokens of this rank's sequence chunk
    s_kv = plan.seq_len if plan.attention == "eager" else s  # eager scores: local queries × all keys
    h, a = m.hidden, m.heads
    rep = t if plan.sequence_parallel else 1  # the part tensor parallelism replicates (norms, dropouts)
    sbh = s * b * h
    lin = 1 if plan.fp8 != "none" else 2  # FP8 linears save their inputs as 8-bit copies
    stat_bytes = 2 if device == "cpu" and (m.norm == "layer" or plan.fused_norm) else 4  # composite RMSNorm: fp32
    stats = (2 if m.norm == "layer" else 1) * stat_bytes * s * b
    if recompute == "full":
        if plan.offload_activations:
            return [("layer input offloaded to CPU (0)", 0.0)]
        return [("layer input (2sbh/sp)", 2 * sbh / rep)]

    # PyTorch's composite RMSNorm upcasts: it keeps the fp32 input and fp32 x·rstd instead of the
    # 16-bit input (8sbh instead of 2sbh); fused kernels (Megatron, TE, apex) keep the 16-bit input.
    norm_in = 8 * sbh if (m.norm == "rms" and not plan.fused_norm) else 2 * sbh
    norm_name = "norm1 input (8sbh: fp32 input + fp32 x·rstd, unfused RMSNorm)" if norm_in > 2 * sbh else "norm1 input (2sbh)"
    # A frozen base (LoRA, QLoRA): a linear's input is kept only for its weight's gradient, so only where
    # an adapter reads it; a frozen norm weight needs no x·rstd (the composite norm keeps its fp32 input)
    adapted = _ADAPTED[plan.lora_targets] if plan.lora_rank else _ADAPTED["full"]
    if plan.lora_rank and norm_in > 2 * sbh:
        norm_in = 4 * sbh
        norm_name = "norm1 input (4sbh: fp32 input, frozen weight, unfused RMSNorm)"
    qkv_w = m.q_dim + m.kv_dim + m.v_dim
    terms: list[Term] = [
        (norm_name, norm_in / rep),
        ("norm statistics fp32 (2 norms)", 2 * stats / rep),
    ]
    if "qkv" in adapted:
        terms.append((f"QKV input ({lin}sbh)", lin * sbh / rep))
    if plan.lora_rank:
        n = _ADAPTER_LINEARS[plan.lora_targets]
        terms.append((f"LoRA rank-r intermediates (2sbr × {n} adapted linears)", 2 * s * b * plan.lora_rank * n))
    if m.mla:  # the low-rank latents and their norms are saved as well
        lat = (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_dim)
        terms.append(("MLA latents (2sb(q_lora+kv_lora+rope))", 2 * s * b * lat))
    terms.append(("Q, K, V (2sb(q+k+v)/t)", 2 * s * b * qkv_w / t))
    out_dim = m.v_dim if m.mla else m.q_dim
    if plan.attention == "eager":
        if recompute in ("none", "sac"):
            terms.append(("softmax output (2as²b/t)", 2 * a * s * s_kv * b / t))
            if m.dropout:
                terms.append(("attention dropout mask (as²b/t)", mk * a * s * s_kv * b / t))
                terms.append(("attention dropout output (2as²b/t)", 2 * a * s * s_kv * b / t))
    elif recompute in ("none", "sac"):
        terms.append(("fused attention log-sum-exp fp32 (4asb/t)", 4 * a * s * b / t))
    if "proj" in adapted or plan.attention != "eager":  # a fused kernel keeps its output (= this input) itself
        terms.append((f"projection input ({lin}sb·{out_dim}/t)", lin * s * b * out_dim / t))
    if m.dropout:
        terms.append(("projection dropout mask (sbh)", mk * sbh / rep))
    terms.append((norm_name.replace("norm1", "norm2"), norm_in / rep))
    if "mlp" in adapted:
        terms.append((f"MLP input ({lin}sbh)", lin * sbh / rep))
    # Megatron/TE keep fc1's output (gate and up) and recompute the activation in a fused
    # bias-SwiGLU backward (6sbf); separate PyTorch modules also keep act(gate) (8sbf).
    gate_c = 6 if plan.framework == "megatron" else 8
    gate_c -= (2 - lin)  # the down projection's input in 8-bit
    plain_c = 4 - (2 - lin)
    if "down" not in adapted:  # a frozen down projection does not keep its input
        gate_c, plain_c = gate_c - lin, plain_c - lin

    def mlp(f: int, k: float, what: str) -> Term:
        if m.gated:
            return (f"{what}: gate, up, act·up ({gate_c}sbf/t × {k:g})", k * gate_c * s * b * f / t)
        return (f"{what}: fc1 output, activation output ({plain_c}sbf/t × {k:g})", k * plain_c * s * b * f / t)

    if moe_layer:
        k = m.top_k
        # The dispatcher gathers the tokens of the tensor-parallel group (each rank runs its shard
        # of every expert on all of them): the permuted copies are not divided by tp.
        if t > 1:
            terms.append(("MoE gathered tokens over tp (2sbh)", 2 * sbh))
        terms.append(("MoE dispatch: permuted tokens (2sbh·top_k)", 2 * sbh * k))
        if plan.ep > 1:  # all-to-all receive buffer kept for the combine's backward
            terms.append(("MoE all-to-all buffers (2sbh·top_k)", 2 * sbh * k))
        terms.append(mlp(m.ffn, k, f"routed experts (top_k={k})"))
        # combining multiplies each expert output by its routing probability: the gradient of the
        # probability needs the expert output, so it is saved too
        terms.append(("MoE expert outputs for the routing-weight gradient (2sbh·top_k)", 2 * sbh * k))
        if m.shared_experts:
            terms.append(mlp(m.shared_ffn or m.ffn, m.shared_experts, "shared experts"))
        terms.append(("router logits and probabilities fp32 (8sbE)", 8 * s * b * m.experts / rep))
    else:
        terms.append(mlp(m.dense_ffn or m.ffn, 1, "MLP"))
    if m.dropout:
        terms.append(("MLP dropout mask (sbh)", mk * sbh / rep))
    if recompute == "sac":
        terms = _per_op_sac(m, plan, moe_layer, terms)
    if plan.offload_activations:
        return [("activations offloaded to CPU (0)", 0.0)]
    return terms


#: the linears whose inputs a layer keeps, by what is trained: all (full training) or the LoRA targets
_ADAPTED = {"full": ("qkv", "proj", "mlp", "down"), "qv": ("qkv",), "attn": ("qkv", "proj"),
            "all": ("qkv", "proj", "mlp", "down")}
#: adapted linears per layer (q, v | q, k, v, o | those and gate, up, down)
_ADAPTER_LINEARS = {"qv": 2, "attn": 4, "all": 7}


def _per_op_sac(m: ModelSpec, plan: Plan, moe_layer: bool, terms: list[Term]) -> list[Term]:
    """torchtitan's per-op selective AC ("op"): the checkpoint keeps the layer input, the outputs of
    the attention kernel (output and log-sum-exp) and of every odd-numbered matmul of the layer
    (``aten.mm``: q, v, the first MLP matrix, the last one ...); norms, activations, every even
    matmul and grouped expert GEMMs are recomputed in backward."""
    t, b = plan.tp, plan.micro_batch
    s = plan.seq_len / plan.cp
    rep = t if plan.sequence_parallel else 1
    h = m.hidden
    out_dim = m.v_dim if m.mla else m.q_dim
    # (output width, divided by tp: column-parallel outputs are sharded, row-parallel ones are not)
    if m.mla:
        mms = [(m.q_lora_rank, 1)] if m.q_lora_rank else []
        mms += [(m.q_dim, t), (m.kv_lora_rank + m.qk_rope_dim, 1), (m.heads * (m.qk_nope_dim + m.v_head_dim), t)]
    else:
        mms = [(m.q_dim, t), (m.kv_dim, t), (m.v_dim, t)]
    mms.append((h, rep))
    f = m.ffn if moe_layer else (m.dense_ffn or m.ffn)
    mlp = [(f, t), (f, t), (h, rep)] if m.gated else [(f, t), (h, rep)]
    if moe_layer:
        mms.append((m.experts, rep))  # the router; routed experts run as grouped GEMMs (not saved)
        sf = m.shared_ffn or m.ffn
        for _ in range(m.shared_experts):
            mms += [(sf, t), (sf, t), (h, rep)] if m.gated else [(sf, t), (h, rep)]
    else:
        mms += mlp
    saved = sum(2 * s * b * w / d for i, (w, d) in enumerate(mms) if i % 2 == 0)
    keep = [("layer input (2sbh)", 2 * s * b * h / rep),
            ("attention output and log-sum-exp [saved op]", 2 * s * b * out_dim / t + 4 * m.heads * s * b / t),
            ("outputs of odd-numbered matmuls [saved op]", saved)]
    if moe_layer:  # the dispatch keeps what autograd needs around the grouped GEMMs
        keep += [x for x in terms if x[0].startswith("MoE")]
    return keep


def layer_bytes(m: ModelSpec, plan: Plan, *, recompute: str | None = None, device: str = "cuda",
                moe_layer: bool | None = None) -> float:
    return sum(v for _, v in layer_terms(m, plan, recompute=recompute, device=device, moe_layer=moe_layer))


def korthikanti(m: ModelSpec, plan: Plan) -> float:
    """The paper's closed form (MHA, 4h GeLU MLP, dropout, eager attention), for the docs' comparison."""
    s, b, h, a, t = plan.seq_len, plan.micro_batch, m.hidden, m.heads, plan.tp
    if plan.recompute == "full":
        return 2 * s * b * h
    score = 0 if plan.recompute == "selective" else 5 * a * s / (h * t)
    if plan.sequence_parallel:
        return s * b * h * (34 / t + score)
    return s * b * h * (10 + 24 / t + score)
