"""What one prefill call (a ``generate_step`` chunk, or the last token) allocates while it runs.

The measured peak of a chunk is not "the largest layer": MLX's host thread allocates every op's output
while it encodes the graph and the device (or the CPU worker thread) releases an op's inputs only once it
has run that op, so the host runs ahead by a window of ops and the outputs of all ops in that window are
alive together (``Executor.inflight_ops`` in ``profiles/kernels/<backend>.yaml``). A chunk is therefore
modelled as the ordered list of what its ops allocate, layer after layer (``Item``s), and its transient is

    transient = pinned + max over windows of ``inflight_ops`` consecutive ops of the bytes allocated there

where ``pinned`` is what outlives any window (the residual stream, the masks built once per forward).
Every item has a name and a formula in this file: nothing is fitted except the window length, a property
of the backend's executor that the kernel table documents.

Per attention layer (``_attention``): input norm, the q/k/v projections, q/k norms where the family has
them, RoPE, the cache update (the old buffer and the zero block of a growing ``KVCache`` concatenation,
or the trimmed copy of a ``RotatingKVCache``), SDPA as routed by the kernel table (fused: its output;
fallback: one score buffer, scaled q, output, the causal mask; bool masks converted to additive on
backends that cannot take them), the output projection and the residual add. Then the MLP (dense SwiGLU)
or MoE block (router, token sort, the k-expanded gate/up/activation/down, unsort, weighting). MLA,
gated-DeltaNet and Mamba2 layers have their own lists below. On the CPU backend ``mx.fast`` norms and RoPE
are decomposed into several ops with temporaries (``FastOps`` in ``cpu.yaml``).

The cache buffers themselves are accounted outside the window (``prefill.py``): what a layer held before
the call is resident, the rows a call adds are counted for every layer at once (the conservative side:
the new buffers of layers the window has not reached yet are not allocated yet).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from math import ceil, prod

from ..dtypes import DTYPE_BYTES
from ..errors import UnsupportedError
from ..profile import CacheEntry, LayerType, Profile
from .routes import KernelRoutes, RouteDecision, SdpaCall

# Families whose attention normalizes q and k per head (mlx-lm q_norm / k_norm).
QK_NORM_FAMILIES = {"qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe", "gemma3", "gemma3_text",
                    "olmo2", "olmo3", "gemma4", "gemma4_text"}
# Families whose attention gates its output: q_proj yields queries and a gate, o_proj(out * sigmoid(gate)).
GATED_ATTENTION_FAMILIES = {"qwen3_next", "qwen3_5", "qwen3_5_moe"}
# Families with pre- and post-norms around both blocks (four norms per layer).
SANDWICH_NORM_FAMILIES = {"gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text"}
# MLP = down(nn.gelu_approx(gate) * up) with gelu_approx as its own compiled primitive (gemma4 compiles the
# product as one geglu, which fuses like SwiGLU). Measured on the H200 (benchmarks/cuda/probe_commits.py
# --meter, CUDA graph launches of chains): gelu_approx is 2 kernel nodes reading 3x its input's elements and
# allocates its output (it does not write in place); the multiply then does (2x the elements).
GELU_APPROX_FAMILIES = {"gemma2", "gemma3", "gemma3_text"}
# q_norm / k_norm applied to the (B, H, L, D) transpose: RMSNorm::eval_gpu first copies a view whose rows
# are not contiguous, then normalizes the copy in place (two kernels reading the q/k elements twice)
QK_NORM_AFTER_TRANSPOSE_FAMILIES = {"gemma3", "gemma3_text"}
# Attention written out in Python by mlx-lm (never mx.fast's SDPA): gemma2 caps the logits,
# scores = tanh(q k^T / cap) * cap, then the mask, softmax and scores @ v. Measured on the H200
# (probe_commits.py, held-out check 2): the unfused ops of the fallback plus the three softcap ops, each
# writing in place and reading the whole score matrix.
SOFTCAP_ATTENTION_FAMILIES = {"gemma2"}
# One fused q|k|v projection (and one gate|up projection) split with mx.split: the pieces are column views
# of one buffer, and a kernel reading a view counts the view's whole span (data_size) toward CUDA's
# graph-commit element limit. Traced on the H200 (commits_unders.json: Phi-3-mini at 64k commits one graph
# per layer where separate projections would give 28-30 graphs for 32 layers).
FUSED_QKV_FAMILIES = {"phi3"}
FUSED_GATE_UP_FAMILIES = {"phi3"}
# Families whose new conv state is a slice view of the (K-1+S) x conv_dim concatenation (qwen3_next and
# qwen3_5 take mx.contiguous of it instead): reference/mlxlm_caches.md §3.1.
CONV_VIEW_FAMILIES = {"nemotron_h", "mamba2", "falcon_h1", "granitemoehybrid", "plamo2", "mamba", "falcon_mamba"}
# Families whose MoE experts (mlx-lm SwitchGLU) carry a bias per expert and projection.
MOE_BIAS_FAMILIES = {"gpt_oss"}
# Families whose attention always builds a bool array mask (create_attention_mask(return_array=True)).
ARRAY_MASK_FAMILIES = {"deepseek_v3", "deepseek_v32", "glm4_moe_lite", "kimi_k25", "kimi_linear", "gemma2"}


@dataclass(frozen=True, slots=True)
class Item:
    """``bytes`` allocated by ``ops`` consecutive computing ops (plus ``views`` view ops: reshapes,
    broadcasts, slices, which allocate nothing but take executor slots on the CPU backend); the bytes
    are spread evenly over the item's slots."""

    term: str
    bytes: int
    ops: int = 1
    views: int = 0
    carry: int = 0  # output bytes that stay alive while the next ``carry_items`` items run
    carry_items: int = 0
    out: int = -1  # bytes of the item's final output, alive until the next item has run (-1: ``bytes``)
    elems: int | tuple = 0  # elements of every kernel input, summed per kernel (CUDA's graph-commit counter);
    # a tuple gives them per op (``ops`` entries), an int spreads them evenly
    nodes: int = -1  # CUDA graph nodes (kernels) the item's ops add (-1: ``ops``)
    op_bytes: tuple = ()  # bytes each op allocates (``ops`` entries, summing to ``bytes``) where it matters
    # which op allocates them (a graph boundary can fall inside the item); empty: spread evenly


@dataclass(frozen=True, slots=True)
class EntryStep:
    """One cache entry during one call: rows before, rows after, keys the call attends to."""

    kind: str
    old_rows: int
    new_rows: int
    kv_len: int
    trim_rows: int = 0  # RotatingKVCache: rows copied by the trim before the concatenation
    zero_rows: int = 0  # KVCache growth: the zero block concatenated to the old buffer


@dataclass(frozen=True)
class CallContext:
    """Everything the item formulas need for one call of ``q_len`` tokens."""

    q_len: int
    offset: int  # tokens in the cache before the call (cached prefix included)
    act: int  # activation bytes
    dtype: str
    routes: KernelRoutes
    tiled: dict
    nax: bool = False
    last: bool = False  # the last-token step (logits computed)
    bound: bool = False  # worst-case items (peak/basis.py): unfused fp32 attention, no donation


# --------------------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------------------


def _fast(ctx: CallContext, op: str, input_bytes: int, count: int = 1, weight: int = 0,
          donates: bool = False) -> Item:
    # ``input_bytes`` is the total over the ``count`` calls (q and k: two rope calls); ``weight``: the
    # norm weight's elements per call
    """An ``mx.fast`` op (rms_norm, rope): one fused kernel writing its output, or the backend's
    decomposition (``fast_ops`` in the kernel table: peak in units of the input bytes, op count).

    ``donates``: the input is an op's output that nothing else reads, so the fused kernel writes in place
    (``RMSNorm::eval_gpu``: ``if (x.is_donatable()) out.copy_shared_buffer(x)``) and allocates nothing:
    Gemma's post-attention / post-feed-forward norms. Measured on the H200 (probe_commits.py --donation):
    rms_norm of a single-use matmul output adds 0 bytes; of one that is still referenced, its output; of a
    reshaped projection (Qwen3's q_norm) its output too (the reshape shares the buffer, so it is not
    donatable)."""
    elems = input_bytes // ctx.act + weight * count
    donates = donates and not ctx.bound
    cost = getattr(ctx.routes.fast_ops, op, None)
    if cost is None:
        return Item(op, 0 if donates else input_bytes, count, elems=elems)
    mult = cost.transient.get(ctx.dtype, cost.transient.get("fp32", 1.0))
    ops = cost.ops_half if (ctx.dtype != "fp32" and cost.ops_half) else cost.ops
    return Item(op, int(input_bytes * mult), ops * count, cost.views * count, out=input_bytes, elems=elems)


_PYTHON_ATTENTION = RouteDecision("python-softcap", "fallback", None, None,
                                  "mlx-lm writes the softcapped attention out (gemma2.py): never mx.fast SDPA")


def route_for(ctx: CallContext, call: SdpaCall, family: str) -> RouteDecision:
    """The SDPA route a layer of ``family`` takes: the kernel table's, except where mlx-lm computes attention
    itself (``SOFTCAP_ATTENTION_FAMILIES``)."""
    if family in SOFTCAP_ATTENTION_FAMILIES and call.q_len > 1:
        return _PYTHON_ATTENTION
    return ctx.routes.route(call, ctx.tiled)


def _sdpa_bound(ctx: CallContext, call: SdpaCall, family: str) -> list[Item]:
    """SDPA's worst case (``CallContext.bound``, peak/basis.py): never fused, the scores in fp32 (4 bytes per
    element whatever the model dtype), the masked scores and their softmax each in a new buffer (nothing
    reused in place), a bool/causal mask materialized at 1 byte per element, q scaled into a copy."""
    s, f = ctx.act, 4
    sc_el = call.n_q * call.q_len * call.kv_len
    q_el = call.n_q * call.q_len * call.head_dim
    k_el = call.n_kv * call.kv_len * call.head_dim
    v_el = call.n_kv * call.kv_len * call.v_head_dim
    mask = call.q_len * call.kv_len if call.mask in ("causal", "bool") else 0
    mask_el = sc_el if call.mask == "additive" else mask
    sinks = 1 if call.sinks else 0
    cap = 3 * sc_el * f if family in SOFTCAP_ATTENTION_FAMILIES else 0  # / cap, tanh, * cap: three more copies
    out = [Item("sdpa.bound_softcap", cap, 3, elems=3 * sc_el)] if cap else []
    return out + [Item("sdpa.bound_q_scaled", q_el * f, 1, elems=q_el),
            Item("sdpa.bound_scores", 3 * sc_el * f + mask, 4 + sinks, op_bytes=(sc_el * f, mask, sc_el * f, sc_el * f)
                 + ((0,) if sinks else ()), elems=(q_el + k_el, 2, sc_el + mask_el, sc_el) + ((sc_el,) if sinks else ())),
            Item("sdpa.bound_out", call.n_q * call.q_len * call.v_head_dim * max(s, f), 1, elems=sc_el + v_el)]


def _sdpa(ctx: CallContext, call: SdpaCall, *, family: str) -> list[Item]:
    """SDPA of one layer as routed by the kernel table; mask arrays built by mlx-lm are pinned elsewhere.

    ``elems`` (what CUDA's graph-commit counter adds): q, the whole k and v the call attends to, the mask
    array, and on the fallback the score matrix once per op that reads it (mask, softmax, P @ V)."""
    if ctx.bound and call.q_len > 1:
        return _sdpa_bound(ctx, call, family)
    r = route_for(ctx, call, family)
    python_softcap = r is _PYTHON_ATTENTION
    s = ctx.act
    out = call.n_q * call.q_len * call.v_head_dim * s
    scores = call.n_q * call.q_len * call.kv_len * s
    q_el = call.n_q * call.q_len * call.head_dim
    k_el = call.n_kv * call.kv_len * call.head_dim
    v_el = call.n_kv * call.kv_len * call.v_head_dim
    sc_el = call.n_q * call.q_len * call.kv_len
    mask_el = call.q_len * call.kv_len if call.mask in ("bool", "additive") else 0
    if call.mask == "additive":
        mask_el = sc_el  # latent MLA passes its (H, qL, kL) positional scores as the mask
    items: list[Item] = []
    if r.route in ("fused", "vector"):
        if call.mask == "bool" and not ctx.routes.supports_bool_mask:
            # MLX (fast.cpp): mask = where(mask, full_like(mask, 0, T), full_like(mask, -inf, T)) on the
            # [B, Hq, qL, kL] broadcast: two scores-sized fills (their inputs are scalars), then the where
            # (donating one fill) reads both and the bool mask view; the fused kernel then reads the result
            conv = int(scores * ctx.routes.bool_to_additive_buffers)
            items.append(Item("sdpa.bool_mask_to_additive", conv, 3, op_bytes=(conv - conv // 2, conv // 2, 0),
                              elems=(1, 1, 2 * sc_el + mask_el)))
            mask_el = sc_el
        items.append(Item(f"sdpa.{r.route}_out", out, 1, 1, elems=q_el + k_el + v_el + mask_el))
        return items
    fb = ctx.routes.fallback
    if r.route == "blocked":
        rows = min(r.q_tile or call.q_len, call.q_len)
        tile = call.n_q * rows * call.kv_len * s
        items.append(Item("sdpa.blocked_scores_tile", tile + 2 * call.n_q * rows * call.head_dim * s, 3, out=0,
                          elems=q_el + k_el + mask_el))
        items.append(Item("sdpa.blocked_out", out, 1, elems=v_el))
        return items
    if r.route == "tiled":
        tile = call.n_q * call.q_len * min(r.kv_tile or call.kv_len, call.kv_len) * s
        items.append(Item("sdpa.tiled_scores_tile", tile, 2, out=0, elems=q_el + k_el + mask_el))
        items.append(Item("sdpa.tiled_out", out, 1, elems=v_el))
        return items
    # fallback: q*scale, scores (where/softmax reuse it), output; "causal" builds a bool mask + aranges.
    n_buf = fb.sinks_score_buffers if call.sinks else fb.score_buffers
    items.append(Item("sdpa.fallback_q_scaled", call.n_q * call.q_len * call.head_dim * s, 1, 1, elems=q_el))
    causal = call.mask == "causal" and call.q_len > 1
    if causal:
        items.append(Item("sdpa.fallback_causal_mask",
                          int(call.q_len * call.kv_len * fb.causal_mask_bytes_per_element) + 4 * (call.q_len + call.kv_len), 3, 5,
                          elems=2 * (call.q_len + call.kv_len)))
        mask_el = call.q_len * call.kv_len
    masked = call.mask != "none" and call.q_len > 1
    softcap = 3 if python_softcap else 0  # / cap, tanh, * cap
    n_sc_ops = (2 + masked) + (2 if call.sinks else 0) + softcap
    items.append(Item("sdpa.fallback_scores", int(scores * n_buf), n_sc_ops, 5,
                      op_bytes=(int(scores * n_buf),) + (0,) * (n_sc_ops - 1),  # QK allocates; mask/softmax in place
                      elems=(q_el + k_el,) + (sc_el,) * softcap + ((sc_el + mask_el,) if masked else ())
                      + (sc_el,) * (3 if call.sinks else 1)))
    items.append(Item("sdpa.fallback_out", out, 1, 3, elems=sc_el + v_el))
    return items


def _cache_update(entry: CacheEntry, step: EntryStep, act: int, q_len: int = 0) -> Item:
    """What a cache update adds while it runs, beyond the resident old buffer and the rows it adds
    (counted for every layer in ``prefill.py``): a growing ``KVCache`` concatenates the old buffer with a
    zero block into a new buffer, so the old-buffer-sized part of the new one is extra until the old one
    is freed; a ``RotatingKVCache`` first copies its last window-1 rows (trim), then concatenates.
    ``elems``: the concatenation reads the old buffer (and the trimmed/zero rows); the slice update
    writes the call's ``q_len`` new rows into the (donated) buffer."""
    rb = entry.row_elements * act
    extra = step.zero_rows + step.trim_rows + min(step.new_rows, step.old_rows)
    if step.old_rows == 0:
        extra = 0  # first call: the zero buffer becomes the cache in place (slice_update donates)
    elif step.new_rows == step.old_rows and step.trim_rows == 0 and step.zero_rows == 0:
        extra = 0  # in-place slice_update (the call fits in the capacity)
    update_el = q_len * entry.row_elements
    if extra == 0 and step.zero_rows == 0:
        return Item("kv_update_copy", 0, 2, 4, out=0, elems=update_el)  # two slice_updates and the fetch slices
    concat_el = (step.old_rows + step.zero_rows + 2 * step.trim_rows) * entry.row_elements
    return Item("kv_update_copy", extra * rb, 6, 4, out=0, elems=concat_el + update_el)


# --------------------------------------------------------------------------------------------------
# layers
# --------------------------------------------------------------------------------------------------


def _mask_kind(p: Profile, entry: CacheEntry, step: EntryStep, q_len: int) -> str:
    """The mask mlx-lm passes to SDPA for this layer (see routes research §5)."""
    if q_len == 1:
        return "none"
    if p.mlx_model_type in ARRAY_MASK_FAMILIES:
        return "bool"
    if entry.kind == "sliding":
        # RotatingKVCache.make_mask: bool once offset + N > window; llama/gemma also pass window_size,
        # which makes KVCache.make_mask build an array too.
        return "bool" if step.kv_len > entry.window or step.old_rows > 0 else "causal"
    if entry.kind == "chunked":
        return "bool"
    return "causal"


def _attention(p: Profile, entry: CacheEntry, step: EntryStep, ctx: CallContext, *, cache_only: bool) -> list[Item]:
    """A standard (GQA) attention layer: full, sliding or chunked cache."""
    S, s = ctx.q_len, ctx.act
    h = p.hidden_size
    n_q = p.num_heads or entry.n_kv
    n_kv, dk, dv = entry.n_kv, entry.k_width, entry.v_width
    fam = p.mlx_model_type
    items = [_fast(ctx, "rms_norm", S * h * s, weight=h)]
    if cache_only:
        # the last layer of a prefill chunk: only its K/V reach the evaluated cache state.
        items.append(Item("qkv_proj", S * n_kv * (dk + dv) * s, 2, 6, elems=2 * S * h + h * n_kv * (dk + dv)))
        if fam in QK_NORM_FAMILIES:
            items.append(_fast(ctx, "rms_norm", S * n_kv * dk * s, weight=dk))
        items.append(_fast(ctx, "rope", S * n_kv * dk * s))
        items.append(_cache_update(entry, step, s, S))
        return items
    qk_norm = fam in QK_NORM_FAMILIES
    gate = S * n_q * dk * s if fam in GATED_ATTENTION_FAMILIES else 0  # q_proj also yields the output gate
    # v waits for the cache update (past the q/k norms and RoPE)
    q_w = n_q * dk * (2 if gate else 1)
    fused = fam in FUSED_QKV_FAMILIES
    span = S * (q_w + n_kv * (dk + dv))  # a split view's data_size: the fused buffer's span
    if fused:
        items.append(Item("qkv_proj", span * s, 1, 9, carry=span * s, carry_items=2 + qk_norm,
                          elems=S * h + h * (q_w + n_kv * (dk + dv))))
    else:
        items.append(Item("qkv_proj", S * (n_q * dk + n_kv * (dk + dv)) * s + gate, 3, 9,
                          carry=S * n_kv * dv * s, carry_items=2 + qk_norm,
                          op_bytes=(S * n_q * dk * s + gate, S * n_kv * dk * s, S * n_kv * dv * s),
                          elems=(S * h + h * q_w, S * h + h * n_kv * dk, S * h + h * n_kv * dv)))
    if qk_norm:
        norm = _fast(ctx, "rms_norm", S * (n_q + n_kv) * dk * s, 2, weight=dk)
        if fam in QK_NORM_AFTER_TRANSPOSE_FAMILIES and ctx.routes.fast_ops.rms_norm is None:
            norm = Item(norm.term, norm.bytes, 4, norm.views, out=norm.out, elems=2 * norm.elems)
        items.append(norm)
    # the rotated q waits for SDPA (past the cache update)
    rope = _fast(ctx, "rope", S * (n_q + n_kv) * dk * s, 2)
    # RoPE of a strided view copies it first (rope.cu): the copy reads the view's span
    rope_el = 2 * span + rope.elems if fused else rope.elems
    items.append(Item(rope.term, rope.bytes, rope.ops, rope.views, carry=S * n_q * dk * s, carry_items=1, out=rope.out,
                      elems=rope_el))
    upd = _cache_update(entry, step, s, S)
    if fused:  # the slice update copies v out of the fused buffer: the view's span
        upd = Item(upd.term, upd.bytes, upd.ops, upd.views, carry=upd.carry, carry_items=upd.carry_items, out=upd.out,
                   elems=(upd.elems or 0) + span - S * n_kv * dv)
    call = SdpaCall(n_q, n_kv, dk, dv, S, step.kv_len, _mask_kind(p, entry, step, S),
                    bool(p.attention_sinks), ctx.dtype, ctx.nax)
    sdpa = _sdpa(ctx, call, family=fam)
    if gate:  # the gate waits for the output projection, past SDPA
        upd = Item(upd.term, upd.bytes, upd.ops, upd.views, carry=gate, carry_items=len(sdpa) + 1, out=upd.out)
    items.append(upd)
    items += sdpa
    if gate:  # output * sigmoid(gate)
        items.append(Item("attn_gate", 2 * S * n_q * dv * s, 2, 1, out=S * n_q * dv * s, elems=3 * S * n_q * dv))
    items.append(Item("o_proj", S * n_q * dv * s + S * h * s, 2, 2, out=S * h * s,
                      elems=S * n_q * dv + h * n_q * dv + S * n_q * dv))
    if fam in SANDWICH_NORM_FAMILIES:
        items.append(_fast(ctx, "rms_norm", S * h * s, weight=h, donates=True))
    items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
    return items


def _mlp(p: Profile, ctx: CallContext, *, moe: bool) -> list[Item]:
    """The feed-forward block: dense SwiGLU, or the mlx-lm SwitchGLU MoE (+ shared experts)."""
    S, s = ctx.q_len, ctx.act
    h = p.hidden_size
    fam = p.mlx_model_type
    items = [_fast(ctx, "rms_norm", S * h * s, weight=h)]
    if moe and p.moe is not None:
        m = p.moe
        E, k = m.num_experts, m.experts_per_token
        I = m.moe_intermediate_size or p.intermediate_size
        T = S * k
        items.append(Item("moe.router", S * E * s * 2 + S * E * 4 + S * k * (4 + s) * 2, 6, out=S * k * (4 + s),
                          elems=S * h + E * h + 4 * S * E))
        sort = T >= 64  # SwitchGLU sorts tokens by expert when indices.size >= 64
        if sort:
            items.append(Item("moe.sort", T * 4 * 4 + T * h * s, 5, out=T * (h * s + 8), elems=S * h + 4 * T))
        # gate and up (gather_mm: every expert's weight is an input), the compiled SwiGLU writes into one
        # of them (donation), down
        if fam in MOE_BIAS_FAMILIES:
            # SwitchLinear with bias: each projection adds bias[indices] (a (T, out) gather) in place
            items.append(Item("moe.experts", T * I * s * 4 + T * h * s * 2, 10, out=T * h * s,
                              op_bytes=(T * I * s, T * I * s, 0, T * I * s, T * I * s, 0, 0, T * h * s, T * h * s, 0),
                              elems=(T * h + E * I * h + T, E * I + T, 2 * T * I, T * h + E * I * h + T, E * I + T,
                                     2 * T * I, 2 * T * I, T * I + E * h * I + T, E * h + T, 2 * T * h)))
        else:
            items.append(Item("moe.experts", T * I * s * 2 + T * h * s, 4, out=T * h * s,
                              op_bytes=(T * I * s, T * I * s, 0, T * h * s),
                              elems=(T * h + E * I * h + T, T * h + E * I * h + T, 2 * T * I, T * I + E * h * I + T)))
        if sort:
            items.append(Item("moe.unsort", T * h * s, 1, elems=T * h + T))
        # (y * scores) reuses the unsorted y (donation), then the sum over the k experts
        items.append(Item("moe.combine", S * h * s, 2, out=S * h * s, elems=2 * T * h + T))
        if m.shared_experts:
            Ish = (p.intermediate_size or I) if fam in ("qwen3_next", "qwen3_5_moe") else I * m.shared_experts
            items.append(Item("moe.shared_expert", S * Ish * s * 2 + S * h * s * 2, 6, out=S * h * s,
                              elems=2 * S * h + 3 * Ish * h + 3 * S * Ish + 2 * S * h))
    else:
        I = p.intermediate_size or 0
        if not I:
            raise UnsupportedError(f"unsupported: {p.name} has no intermediate_size, so its MLP activations are unknown")
        if fam in FUSED_GATE_UP_FAMILIES:
            # one gate|up matmul, the compiled SwiGLU on its two column views (each counts the 2*S*I span; it
            # cannot write into a view, so it allocates), down
            items.append(Item("mlp", S * I * s * 3 + S * h * s, 3, 3, out=S * h * s,
                              op_bytes=(2 * S * I * s, S * I * s, S * h * s),
                              elems=(S * h + 2 * I * h, 4 * S * I, S * I + h * I)))
        elif fam in GELU_APPROX_FAMILIES:
            # gate, up, gelu_approx (a new buffer), the product (in place), down
            items.append(Item("mlp", S * I * s * 3 + S * h * s, 5, 3, out=S * h * s, nodes=6,
                              op_bytes=(S * I * s, S * I * s, S * I * s, 0, S * h * s),
                              elems=(S * h + I * h, S * h + I * h, 3 * S * I, 2 * S * I, S * I + h * I)))
        else:
            # gate, up, down; the compiled SwiGLU writes into gate's or up's buffer (donation, measured)
            items.append(Item("mlp", S * I * s * 2 + S * h * s, 4, 3, out=S * h * s,
                              op_bytes=(S * I * s, S * I * s, 0, S * h * s),
                              elems=(S * h + I * h, S * h + I * h, 2 * S * I, S * I + h * I)))
    if fam in SANDWICH_NORM_FAMILIES:
        items.append(_fast(ctx, "rms_norm", S * h * s, weight=h, donates=True))
    items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
    return items


def _mla_expanded(p: Profile, entry: CacheEntry, step: EntryStep, ctx: CallContext, *, cache_only: bool) -> list[Item]:
    """DeepSeek-V2 / MiniCPM3 MLA with the expanded per-head cache (k = nope+rope, v = v_head_dim).

    Order as MLX runs it (the tape is a topological order from the outputs, so what SDPA consumes runs
    last): q projection, kv_a + its norm, kv_b, RoPE of q_pe and k_pe, the repeated k_pe concatenated
    into the keys, the queries concatenated, the cache update, SDPA (Dq = nope + rope, Dv = v_head_dim).
    """
    S, s, h = ctx.q_len, ctx.act, p.hidden_size
    mla = p.mla
    if mla is None:
        raise UnsupportedError(f"unsupported: {p.name} is an MLA model without its ranks (mla: kv_lora_rank, "
                               "qk_rope_head_dim, qk_nope_head_dim, v_head_dim) in the profile")
    H = entry.n_kv
    nope, rope, vd, rank = mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim, mla.kv_lora_rank
    q_bytes = S * H * (nope + rope) * s
    items = [_fast(ctx, "rms_norm", S * h * s, weight=h)]
    if not cache_only:
        q_in = h
        if mla.q_lora_rank:
            items.append(Item("mla.q_a", S * mla.q_lora_rank * s, 1, 1, elems=S * h + mla.q_lora_rank * h))
            items.append(_fast(ctx, "rms_norm", S * mla.q_lora_rank * s, weight=mla.q_lora_rank))
            q_in = mla.q_lora_rank
        items.append(Item("mla.q_proj", q_bytes, 1, 3, elems=S * q_in + H * (nope + rope) * q_in))
    items.append(Item("mla.kv_a", S * (rank + rope) * s, 1, 2, elems=S * h + (rank + rope) * h))
    items.append(_fast(ctx, "rms_norm", S * rank * s, weight=rank))
    # kv_b output: k_nope and the values; the values wait for the cache update
    items.append(Item("mla.kv_b", S * H * (nope + vd) * s, 1, 4, carry=S * H * vd * s, carry_items=4,
                      elems=S * rank + H * (nope + vd) * rank))
    n_rope = 1 if cache_only else 2
    items.append(_fast(ctx, "rope", S * (rope + (0 if cache_only else H * rope)) * s, n_rope))
    items.append(Item("mla.k_concat", S * H * rope * s + S * H * (nope + rope) * s, 2, 3, out=S * H * (nope + rope) * s,
                      elems=S * rope + S * H * rope + S * H * nope))
    if not cache_only:
        items.append(Item("mla.q_concat", q_bytes, 1, 1, carry=q_bytes, carry_items=1, elems=S * H * (nope + rope)))
    items.append(_cache_update(entry, step, s, S))
    if cache_only:
        return items
    call = SdpaCall(p.num_heads or H, H, nope + rope, vd, S, step.kv_len, _mask_kind(p, entry, step, S),
                    False, ctx.dtype, ctx.nax)
    items += _sdpa(ctx, call, family=p.mlx_model_type)
    items.append(Item("o_proj", S * H * vd * s + S * h * s, 2, 2, elems=2 * S * H * vd + h * H * vd))
    items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
    return items


def _mla_latent(p: Profile, entries: tuple[CacheEntry, ...], steps: tuple[EntryStep, ...], ctx: CallContext,
                *, cache_only: bool) -> list[Item]:
    """DeepSeek-V3-style MLA prefill: latent cache; pe_scores (H x qL x kL) passed as an additive mask,
    k = embed_q(latent) and v = unembed_out(latent) materialized per head for the whole cache."""
    S, s, h = ctx.q_len, ctx.act, p.hidden_size
    mla = p.mla
    H = p.num_heads or 1
    nope, rope, vd, rank = mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim, mla.kv_lora_rank
    entry, step = entries[0], steps[0]
    kL = step.kv_len
    items = [_fast(ctx, "rms_norm", S * h * s, weight=h)]
    items.append(Item("mla.kv_a", S * (rank + rope) * s, 1, elems=S * h + (rank + rope) * h))
    items.append(_fast(ctx, "rms_norm", S * rank * s))
    items.append(_fast(ctx, "rope", S * rope * s))
    items.append(_cache_update(entry, step, s, S))
    for e, st in zip(entries[1:], steps[1:]):  # DSA indexer cache
        items.append(Item("dsa.indexer_kv", S * e.row_elements * s, 2))
        items.append(_cache_update(e, st, s, S))
    if cache_only:
        return items
    if mla.q_lora_rank:
        items.append(Item("mla.q_a", S * mla.q_lora_rank * s, 1, elems=S * h + mla.q_lora_rank * h))
        items.append(_fast(ctx, "rms_norm", S * mla.q_lora_rank * s, weight=mla.q_lora_rank))
    q_in = mla.q_lora_rank or h
    items.append(Item("mla.q_proj", S * H * (nope + rope) * s, 1, elems=S * q_in + H * (nope + rope) * q_in))
    items.append(_fast(ctx, "rope", S * H * rope * s))
    if len(entries) > 1 and mla.index_n_heads and mla.index_topk and kL > mla.index_topk:
        ih = mla.index_n_heads
        items.append(Item("dsa.indexer_scores", ih * S * kL * s * 2 + S * kL * (s + 4) + S * kL, 6, out=S * kL))
    if S == 1:
        items.append(Item("mla.decode_q", H * rank * s * 2, 2))
        call = SdpaCall(H, 1, rank, rank, 1, kL, "none", False, ctx.dtype, ctx.nax)
        items += _sdpa(ctx, call, family=p.mlx_model_type)
        items.append(Item("o_proj", H * vd * s + h * s, 3))
    else:
        call = SdpaCall(H, H, nope, vd, S, kL, "additive", False, ctx.dtype, ctx.nax)
        sdpa = _sdpa(ctx, call, family=p.mlx_model_type)
        # the (H, qL, kL) positional scores are SDPA's additive mask: alive past k/v expansion until SDPA
        # The QK matmul allocates the whole score matrix but reads only q_pe and k_pe; the where() reads it and
        # the bool (qL, kL) mask and writes in place (measured: probe_mla.py, 1.00x the scores); SDPA reads it
        # again as its additive mask (cuDNN: no copy). Per-op elements, so CUDA's commit rule sees the graph end
        # after the where and after SDPA (traced: commits_dsv3.json). ``unitemized``: 4 B per query x key
        # position per layer that the H200 peaks hold beyond the itemized ops (8k one-op graphs 0.96 and 32k /
        # step 2048 0.99 without it; not identified - the conservative side of the two measurements).
        sc = H * S * kL * s
        extra = 4 * S * kL
        where_b = (sc if ctx.bound else 0) + extra
        items.append(Item("mla.pe_scores", S * H * rope * s + sc + where_b, 3, out=0,
                          carry=sc, carry_items=1 + len(sdpa), op_bytes=(S * H * rope * s, sc, where_b),
                          elems=(S * H * rope, S * H * rope + kL * rope, H * S * kL + S * kL + 1)))
        items.append(Item("mla.k_v_expand", H * kL * (nope + vd) * s, 2, elems=2 * kL * rank + H * (nope + vd) * rank))
        items += sdpa
        items.append(Item("o_proj", S * H * vd * s + S * h * s, 2, elems=2 * S * H * vd + h * H * vd))
    items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
    return items


@dataclass(frozen=True, slots=True)
class StateDims:
    k1: int  # conv window rows (kernel - 1)
    conv_dim: int
    ssm_shape: tuple[int, ...]
    ssm_elems: int
    ssm_bytes: int  # bytes per element of the recurrent state


def state_dims(p: Profile, lt: LayerType, entry: CacheEntry) -> StateDims:
    """Shapes of a state cache's conv window and recurrent state, from the profile's declaration.

    ``CacheEntry`` keeps element counts only, so the shapes come from the variant's layer kinds (or a
    ``shape`` attribute on the tensor spec where the profile carries one)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for t in entry.tensors:
        shp = getattr(t, "shape", None)
        if shp:
            shapes[t.name] = tuple(shp)
    v = p.variant
    if not shapes and v is not None and lt.name in v.layers.kinds:
        spec = v.layers.kinds[lt.name]
        for sp in (spec if isinstance(spec, list) else [spec]):
            if sp.kind == "state":
                for t in sp.tensors:
                    shapes[t.name] = tuple(t.shape)
    conv = next((t for t in entry.tensors if t.name.startswith("conv")), None)
    ssm = next((t for t in entry.tensors if not t.name.startswith("conv")), None)
    if conv is None or ssm is None or conv.name not in shapes or ssm.name not in shapes:
        raise UnsupportedError(
            f"unsupported: {p.name}: the transient of its {lt.name!r} state layers needs the conv and recurrent "
            "state shapes (declare them in the profile's layer kind)")
    cs, ss = shapes[conv.name], shapes[ssm.name]
    k1 = cs[0] if len(cs) >= 2 else 1
    conv_dim = prod(cs[1:]) if len(cs) >= 2 else cs[0]
    return StateDims(k1, conv_dim, ss, prod(ss), DTYPE_BYTES.get(ssm.dtype, 0))


def _linear_attention(p: Profile, lt: LayerType, entry: CacheEntry, step: EntryStep, ctx: CallContext, *,
                      cache_only: bool) -> list[Item]:
    """Gated-DeltaNet (qwen3_next / qwen3_5) and Mamba2 (nemotron_h) mixers.

    The conv window is concatenated with the chunk ((K-1+S) x conv_dim) and the new conv state is a view
    of that buffer (held until the next call: ``state_snapshot_bytes``). Off Metal the recurrence runs
    as ops, one step per token (gated_delta_ops) or per 256-token block (Mamba2 ssm), each step writing
    a new fp32 state and state-sized products: their bytes are spread over the steps' ops so the window
    holds as many steps as fit.
    """
    S, s, h = ctx.q_len, ctx.act, p.hidden_size
    d = state_dims(p, lt, entry)
    sb = d.ssm_bytes or 4
    nvdv = d.ssm_shape[0] * d.ssm_shape[1] if len(d.ssm_shape) == 3 else d.conv_dim  # nv*dv, or H*head_dim
    items = [_fast(ctx, "rms_norm", S * h * s)]
    fam = p.mlx_model_type
    if fam in ("qwen3_next", "qwen3_5", "qwen3_5_moe"):
        # in_proj outputs: conv_dim (q, k, v) + z (nv*dv) + b, a (nv each)
        nv = d.ssm_shape[0]
        items.append(Item("deltanet.in_proj", S * (d.conv_dim + nvdv + 2 * nv) * s, 2,
                          elems=2 * S * h + h * (d.conv_dim + nvdv + 2 * nv)))
        items.append(Item("deltanet.conv", (d.k1 + S) * d.conv_dim * s + 2 * S * d.conv_dim * s, 3,
                          out=S * d.conv_dim * s))
        items.append(_fast(ctx, "rms_norm", S * max(d.conv_dim - nvdv, 0) * s))
        items.append(Item("deltanet.gates", S * nv * 4 * 4, 4, out=S * nv * 4 * 2))
        if ctx.routes.backend == "metal":
            items.append(Item("deltanet.kernel", d.ssm_elems * sb + S * nvdv * s, 1))
        else:
            # gated_delta_ops: a Python loop of one compiled step per token (state*k, k*delta, state*q: fp32,
            # state-sized). Every step's new fp32 state stays allocated until the layer's outputs are stacked:
            # the step's y and state are outputs of one compiled primitive, and the y kept for mx.stack keeps
            # its sibling. Measured on the H200 (Qwen3-Next, 8 layers at real widths, commits_gdn.json): a flat
            # 4.4 GiB at 2048 tokens, 1.25 GiB at 512 ~ q_len x (Hv x Dv x Dk x 4) + the step temporaries;
            # the per-step aggregate this replaces gave 0.47-0.81. The loop is items of consecutive steps
            # (~8 kernels each for CUDA's commit rule), each carrying its states through the stack.
            st_b = d.ssm_elems * 4
            parts = [S * i // 8 for i in range(9)]
            spans = [(a, b) for a, b in zip(parts, parts[1:]) if b > a]
            for k, (a, b) in enumerate(spans):
                n = b - a
                items.append(Item("deltanet.recurrence_states", n * st_b + (2 * st_b if k == 0 else 0), 8 * n,
                                  carry=n * st_b, carry_items=len(spans) - k - 1, elems=n * 3 * d.ssm_elems))
            items.append(Item("deltanet.stack", S * nvdv * s, 1))
        if not cache_only:
            items.append(Item("deltanet.out_norm", S * nvdv * s * 3, 5, out=S * nvdv * s))
            items.append(Item("o_proj", S * h * s, 1, elems=S * nvdv + h * nvdv))
            items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
        return items
    if fam == "nemotron_h":
        heads = d.ssm_shape[0]
        items.append(Item("mamba.in_proj", S * (d.conv_dim + nvdv + heads) * s, 1,
                          elems=S * h + h * (d.conv_dim + nvdv + heads)))
        items.append(Item("mamba.conv", (d.k1 + S) * d.conv_dim * s + 2 * S * d.conv_dim * s, 3,
                          out=S * d.conv_dim * s))
        if ctx.routes.backend == "metal" and S == 1:
            items.append(Item("mamba.kernel", d.ssm_elems * sb, 1))
        elif ctx.routes.executor.graph_commit is not None:
            n_state = d.ssm_shape[2] if len(d.ssm_shape) == 3 else 1
            groups = max(1, (d.conv_dim - nvdv) // (2 * n_state))
            items += _ssd_items_cuda(S, heads, nvdv // heads, n_state, groups, s, step.old_rows > 0)
        else:
            # ssm_attn, per 256-token block: CB repeated to (H, 256, 256) in the model dtype, and four
            # fp32 (H, 256, 256) arrays live together: segsum's repeat/tril, its cumsum, exp(segsum)
            # (the decay, read twice so never donated) and CB * decay; plus the next state
            # and the (256, H, head_dim) fp32 products dt*x, dt*x*decay, y and y_prev, B repeated to
            # (H, N, 256) in the model dtype, next_state and decay*state (fp32, state-sized)
            blocks = -(-S // 256)
            blk = min(S, 256)
            n_state = d.ssm_shape[2] if len(d.ssm_shape) == 3 else 1
            per_block = (heads * blk * blk * (4 * 4 + s) + 4 * blk * nvdv * 4 + heads * n_state * blk * s
                         + 2 * d.ssm_elems * 4)
            items.append(Item("mamba.ssm_blocks", blocks * per_block, blocks * 14, blocks * 10,
                              out=S * nvdv * s + d.ssm_elems * 4))
        if not cache_only:
            items.append(Item("mamba.out_norm", S * nvdv * s * 3, 5, out=S * nvdv * s))
            items.append(Item("o_proj", S * h * s, 1, elems=S * nvdv + h * nvdv))
            items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
        return items
    raise UnsupportedError(f"unsupported: no transient model for the state layers of mlx-lm {fam!r}")



def unverified_peak(p: Profile, routes: KernelRoutes) -> str | None:
    """Why the prefill peak of ``p`` on ``routes``' backend is reported as unknown instead of a number, or None.

    Mamba2 (nemotron_h) layers on CUDA: ``_ssd_items_cuda`` replays MLX's graphs to within 8%, but what each
    layer keeps alive until the end of the forward (its final state's inputs) is not understood well enough
    to promise a bound: modelled, Nemotron-H-56B came out at 1.10 / 1.13 of the H200's peak at prefill step
    2048 and 0.85 / 0.85 / 0.90 at steps 1024 and 4096 (estimates written before measuring)."""
    if routes.executor.graph_commit is None:
        return None
    if p.mlx_model_type == "nemotron_h" and any(e.kind == "state" for lt in p.layer_types.values() for e in lt.entries):
        return ("unsupported: the CUDA prefill peak of Mamba2 (ssm_attn) layers is not verified: modelled op by op it "
                "was 1.10-1.13 of the peak measured for Nemotron-H-56B on an H200 at prefill step 2048 but 0.85-0.90 at "
                "steps 1024 and 4096 (benchmarks/cuda/README.md); KV and state bytes stay exact")
    return None


def _ssd_items_cuda(S: int, H: int, dh: int, N: int, G: int, md: int, state: bool) -> list[Item]:
    """mlx-lm's ``ssm_attn`` (Mamba2 SSD, ``mlx_lm/models/ssm.py``) op by op as MLX runs it on CUDA: per
    256-token block ~24 kernels (~34 once a state exists), each its own graph node, so MLX's graphs fill on
    their 100-node limit (the per-block aggregate the CPU and Metal windows use replayed far fewer, larger
    graphs and put Nemotron-H-56B's peak at 0.72-0.76 of the H200's). Bytes per op: the (H, 256, 256) fp32
    segsum / cumsum / decay / CB*decay arrays, CB repeated in the model dtype, the fp32 copies mx.matmul
    makes of B (next_state) and of C broadcast over the group's heads (y_prev) - the single-op peaks
    measured on CPU (benchmarks/cuda/README.md, "Nemotron-H").

    What these items do not hold: the cache's new state is the last block's next_state, which no later layer
    reads, so MLX's tape reaches it only after the whole forward and what it reads stays allocated until
    then. Measured on the H200 the peak grows with depth (10.4 / 13.3 / 17.9 / 23.5 / 28.0 GiB for the first
    8 / 16 / 32 / 64 / all 118 layers of Nemotron-H-56B, 4k-8k tokens) and falls back near the end of each
    chunk. Charging dt*x + the last decay + the previous state per layer gave 1.10 / 1.13 at step 2048 but
    0.85-0.90 at steps 1024 / 4096 (predicted before measuring), so the items replay the graphs (within 8% of
    the traced ones) and ``unverified_peak`` reports the CUDA peak of these layers as unknown."""
    f = 4
    items = [Item("mamba.ssd_prep", S * H * f * 3 + S * H * dh * f, 6, 4,
                  elems=(S * H, S * H, H, S * H, S * H, S * H * dh + S * H))]
    for i in range(0, S, 256):
        s = min(256, S - i)
        st = state or i > 0
        hs2 = H * s * s
        blk = [
            Item("mamba.ssd_cb", G * s * s * md, 1, 2, elems=2 * s * G * N),
            Item("mamba.ssd_cb_repeat", hs2 * md, 1, elems=G * s * s),
            Item("mamba.ssd_segsum_repeat", hs2 * f, 1, 2, elems=H * s),
            Item("mamba.ssd_tril", 0, 4, 2, elems=(2 * s, 2 * s, s * s, hs2 + s * s)),
            Item("mamba.ssd_cumsum", hs2 * f, 1, elems=hs2),
            Item("mamba.ssd_decay", 0, 1, elems=hs2),
            Item("mamba.ssd_cb_f32", hs2 * f, 1, elems=hs2),
            Item("mamba.ssd_cb_decay", 0, 1, elems=2 * hs2),
            Item("mamba.ssd_tril", 0, 4, 2, elems=(2 * s, 2 * s, s * s, hs2 + s * s)),
            Item("mamba.ssd_y", s * H * dh * f, 1, 2, elems=hs2 + s * H * dh),
            Item("mamba.ssd_b_repeat", H * N * s * md, 1, 3, elems=s * G * N),
            Item("mamba.ssd_dtx_decay", s * H * dh * f, 1, 4, elems=s * H * dh + hs2),
            Item("mamba.ssd_b_f32", H * N * s * f, 1, elems=H * N * s),
            Item("mamba.ssd_next_state", H * dh * N * f, 1, elems=s * H * dh + H * N * s),
        ]
        if st:
            blk += [
                Item("mamba.ssd_state_decay", s * H * f * 2, 3, 3, elems=(s * H, s * H, H)),
                Item("mamba.ssd_state_scaled", H * dh * N * f, 1, 2, elems=H + H * dh * N),
                Item("mamba.ssd_state_add", 0, 1, elems=2 * H * dh * N),
                Item("mamba.ssd_c_f32", s * G * N * f, 1, 2, elems=s * G * N),
                Item("mamba.ssd_c_broadcast", s * H * N * f, 1, elems=s * G * N),
                Item("mamba.ssd_y_prev", s * H * dh * f, 1, 3, elems=H * dh * N + s * H * N),
                Item("mamba.ssd_y_prev_scaled", 0, 1, 2, elems=s * H + s * H * dh),
                Item("mamba.ssd_y_add", s * H * dh * f, 1, elems=2 * s * H * dh),
            ]
        blk.append(Item("mamba.ssd_y_cast", s * H * dh * md, 1, elems=s * H * dh, carry=s * H * dh * md, carry_items=8))
        items += blk
    items.append(Item("mamba.ssd_concat", S * H * dh * md * 2, 3, 2, out=S * H * dh * md,
                      elems=(S * H * dh, H, 2 * S * H * dh)))
    return items


def state_snapshot_bytes(p: Profile, lt: LayerType, entry: CacheEntry, q_len: int, act: int) -> int:
    """Bytes a state layer keeps beyond its ``nbytes`` between prefill chunks: the new conv state is a
    slice view of the (K-1+S) x conv_dim concatenation, which keeps the whole buffer alive until the
    next call replaces it (reference/mlxlm_caches.md §3.1; released after the last 1-token step)."""
    if q_len <= 1 or p.mlx_model_type not in CONV_VIEW_FAMILIES:
        return 0
    d = state_dims(p, lt, entry)
    conv = next(t for t in entry.tensors if t.name.startswith("conv"))
    conv_b = act if conv.dtype == "model" else DTYPE_BYTES[conv.dtype]
    return q_len * d.conv_dim * conv_b


# --------------------------------------------------------------------------------------------------
# a whole call
# --------------------------------------------------------------------------------------------------


def layer_items(p: Profile, lt: LayerType, steps: tuple[EntryStep, ...], ctx: CallContext, *, cache_only: bool,
                dense: bool = False) -> list[Item]:
    """The items of one layer of this type during the call (``cache_only``: the chunk's last layer;
    ``dense``: an MoE model's layer that runs a dense MLP, ``dense_layer``)."""
    kinds = [e.kind for e in lt.entries]
    moe = p.moe is not None and not dense
    if kinds == ["none"]:
        if cache_only:
            return []
        return _mlp(p, ctx, moe=moe)
    if kinds[0] == "latent":
        items = _mla_latent(p, lt.entries, steps, ctx, cache_only=cache_only)
    elif kinds[0] in ("full", "sliding", "chunked"):
        e = lt.entries[0]
        if p.mla is not None and p.mlx_model_type in ("deepseek_v2", "minicpm3", "youtu_llm"):
            items = _mla_expanded(p, e, steps[0], ctx, cache_only=cache_only)
        else:
            items = _attention(p, e, steps[0], ctx, cache_only=cache_only)
        for e2, st2 in zip(lt.entries[1:], steps[1:]):
            if e2.kind == "state":
                items += _linear_attention(p, lt, e2, st2, ctx, cache_only=cache_only)
    elif kinds[0] == "state":
        items = _linear_attention(p, lt, lt.entries[0], steps[0], ctx, cache_only=cache_only)
    else:
        raise UnsupportedError(f"unsupported: no transient model for a {lt.label!r} layer")
    if cache_only or p.mlx_model_type == "nemotron_h":
        return items  # nemotron_h: attention/mamba/MLP are separate layers ('none' = MLP-only)
    return items + _mlp(p, ctx, moe=moe)


def dense_layer(p: Profile, index: int) -> bool:
    """An MoE model's layer ``index`` runs a dense MLP (DeepSeek's ``first_k_dense_replace``): traced on the
    H200, those layers commit one CUDA graph fewer than an MoE layer (commits_dsv3.json), which changes how
    many layers' score matrices MLX's in-flight window holds."""
    return p.moe is not None and index < (getattr(p.moe, "first_dense_layers", 0) or 0)


def embedding_items(p: Profile, ctx: CallContext) -> list[Item]:
    h = p.hidden_size
    # the gather reads from the whole table (its elements count for CUDA's graph commit)
    items = [Item("embedding", ctx.q_len * h * ctx.act, 1, 3, elems=(p.vocab_size or 0) * h + ctx.q_len)]
    if p.mlx_model_type in SANDWICH_NORM_FAMILIES:
        items.append(Item("embedding", ctx.q_len * h * ctx.act, 1))
    return items


def logits_items(p: Profile, ctx: CallContext) -> list[Item]:
    """The last-token step: final norm, lm_head on one position, log-softmax, argmax."""
    v = p.vocab_size or 0
    h = p.hidden_size
    return [_fast(ctx, "rms_norm", h * ctx.act, weight=h), Item("logits", v * ctx.act + 2 * v * 4, 4, elems=v * h + 3 * v)]


_ALL_SUMS: list | None = None  # set by peak.fast to collect every window position's sum


class _Live:
    """Bytes live over a span of executor slots: the items the span covers (each item's bytes spread
    evenly over its slots: an op's output exists from the moment the host allocates it) + the ``carry``
    of earlier items whose output is still waiting for a consumer inside the span."""

    def __init__(self, items: list[Item], op_weight: int, view_weight: int):
        self.items = items
        self.bounds = [0]
        for it in items:
            self.bounds.append(self.bounds[-1] + max(1, it.ops * op_weight + it.views * view_weight))
        self.cum = [0.0]
        for it in items:
            self.cum.append(self.cum[-1] + it.bytes)

    @property
    def total(self) -> int:
        return self.bounds[-1]

    def upto(self, x: float) -> float:
        b, items = self.bounds, self.items
        j = bisect.bisect_right(b, x) - 1
        if j >= len(items):
            return self.cum[-1]
        return self.cum[j] + items[j].bytes * (x - b[j]) / (b[j + 1] - b[j])

    def carried(self, lo: float) -> tuple[float, list[tuple[int, int]]]:
        # items ending at or before lo whose carry reaches an item that overlaps [lo, ...)
        b, items = self.bounds, self.items
        n = len(items)
        j = bisect.bisect_right(b, lo) - 1  # item containing lo (or the last)
        tot, who = 0.0, []
        for i in range(max(0, j - 8), min(j, n)):
            it = items[i]
            if b[i + 1] > lo:
                continue
            add = 0
            if i + 1 >= j:  # its consumer is (partly) in the window: the output has not been released
                add += it.bytes if it.out < 0 else it.out
            if it.carry and i + it.carry_items >= j:
                add += it.carry
            if add:
                tot += add
                who.append((i, add))
        return tot, who

    def sum(self, lo: float, hi: float) -> float:
        return self.upto(hi) - self.upto(lo) + self.carried(lo)[0]

    def terms(self, lo: float, hi: float) -> dict[str, int]:
        terms: dict[str, float] = {}
        for i, it in enumerate(self.items):
            a, b = self.bounds[i], self.bounds[i + 1]
            ov = min(b, hi) - max(a, lo)
            if ov > 0:
                terms[it.term] = terms.get(it.term, 0.0) + it.bytes * ov / (b - a)
        for i, add in self.carried(lo)[1]:
            k = self.items[i].term + ".carried"
            terms[k] = terms.get(k, 0.0) + add
        return {k: int(round(v)) for k, v in terms.items()}


def window_max(items: list[Item], window: int, op_weight: int = 1, view_weight: int = 0) -> tuple[int, dict[str, int]]:
    """Max over windows of ``window`` executor slots of the bytes live there (``_Live``).

    The sum is piecewise linear in the window's position between item boundaries, so the maximum has an
    edge on a boundary: every boundary is tried as the window's start and as its end. Returns the max and
    the per-term bytes of that window.
    """
    if not items:
        return 0, {}
    live = _Live(items, op_weight, view_weight)
    total = live.total
    w = min(window, total)
    best, best_lo = -1.0, 0.0
    sums: dict[float, float] = {}
    for bnd in live.bounds:
        for lo in (bnd, bnd - w):
            if lo < 0 or lo + w > total or lo in sums:
                continue
            v = live.sum(lo, lo + w)
            sums[lo] = v
            if v > best:
                best, best_lo = v, lo
    if _ALL_SUMS is not None:
        _ALL_SUMS.append(sums)
    out = live.terms(best_lo, best_lo + w)
    return sum(out.values()), out


def graph_ends(items: list[Item], max_nodes: int, max_mega_elements: int, act: int) -> list[float]:
    """Where MLX's CUDA backend commits a CUDA graph while it encodes ``items`` (in executor slots, one
    per op): after any op that takes the graph past ``max_nodes`` kernel nodes
    (``node_count_ > max_ops``) or past ``max_mega_elements`` Mi-elements of kernel inputs
    (``(bytes_in_graph_ >> 20) > max_mb``; ``set_input_array`` adds ``data_size()``, elements not bytes,
    once per kernel that reads the array). An item's nodes and input elements are spread evenly over its
    ops. The encoding of a chunk ends with a commit (``finalize``)."""
    el_limit = (max_mega_elements + 1) << 20
    ends: list[float] = []
    pos = 0.0
    n_nodes = 0.0
    n_el = 0.0
    for it in items:
        ops = max(1, it.ops)
        nodes = it.nodes if it.nodes >= 0 else it.ops
        per_op = it.elems if isinstance(it.elems, tuple) and len(it.elems) == ops else None
        even = 0.0 if per_op else (it.elems or it.bytes // max(act, 1)) / ops
        npo = nodes / ops
        left = ops
        while left > 0:
            if per_op:  # elements given per op: one op at a time
                need, epo = 1, per_op[ops - left]
            else:  # spread evenly: jump straight to the op that crosses a limit
                need, epo = left, even
                if npo > 0:
                    need = min(need, max(1, ceil((max_nodes + 1 - n_nodes) / npo - 1e-9)))
                if epo > 0:
                    need = min(need, max(1, ceil((el_limit - n_el) / epo - 1e-9)))
            n_nodes += need * npo
            n_el += need * epo
            pos += need
            left -= need
            if n_nodes >= max_nodes + 1 - 1e-9 or n_el >= el_limit:
                ends.append(pos)
                n_nodes = n_el = 0.0
    if not ends or ends[-1] < pos:
        ends.append(pos)
    return ends


def split_ops(items: list[Item]) -> list[Item]:
    """Items with ``op_bytes`` as one item per op, so a window edge inside the item counts what each op
    really allocated. Each op's output stays alive until the item's last op has run (``carry``); the last
    op keeps the item's own ``out`` / ``carry`` (its final output's consumer is the next item)."""
    out: list[Item] = []
    for it in items:
        n = max(1, it.ops)
        if not it.op_bytes or len(it.op_bytes) != n or n == 1:
            out.append(it)
            continue
        nodes = it.nodes if it.nodes >= 0 else it.ops
        el = it.elems if isinstance(it.elems, tuple) and len(it.elems) == n else ((it.elems or 0) // n,) * n
        for k, b in enumerate(it.op_bytes):
            last = k == n - 1
            if last:
                out.append(Item(it.term, b, 1, 0, carry=it.carry, carry_items=it.carry_items,
                                out=it.bytes if it.out < 0 else it.out, elems=el[k], nodes=nodes / n))
            else:
                out.append(Item(it.term, b, 1, 0, carry=b, carry_items=n - 1 - k, out=0, elems=el[k],
                                nodes=nodes / n))
    return out


def graph_window_max(items: list[Item], max_nodes: int, max_mega_elements: int, inflight: int,
                     act: int) -> tuple[int, dict[str, int]]:
    """The live set when the host has run ``inflight`` committed graphs ahead of the GPU.

    MLX keeps every input of every op of a committed graph alive until the GPU has finished that graph
    (``gpu::eval``: ``add_temporary``; released by the completion handler), and ``eval_impl`` lets the
    host run ahead until more than ``inflight`` graphs are in flight (``MAX_ACTIVE_TASKS``), then waits
    for the oldest. So while the host encodes graph g, graphs g-inflight .. g-1 still hold everything
    they read, and the live set is the bytes of the ops from the start of graph g-inflight to the end of
    graph g (plus what earlier ops hand to later consumers). That is the worst case of a host that stays
    ahead of the GPU; a GPU that keeps up holds less. Graph ends come from ``graph_ends``.
    """
    if not items:
        return 0, {}
    items = split_ops(items)
    live = _Live(items, 1, 0)
    ends = graph_ends(items, max_nodes, max_mega_elements, act)
    starts = [0.0] + ends[:-1]
    best, best_w = -1.0, (0.0, 0.0)
    for g, hi in enumerate(ends):
        lo = starts[max(0, g - inflight)]
        v = live.sum(lo, hi)
        if v > best:
            best, best_w = v, (lo, hi)
    out = live.terms(*best_w)
    return sum(out.values()), out
