"""Attention blocks: the SDPA call as the kernel table routes it, the cache update, the mask, and a
whole GQA attention block (norms, projections, RoPE, SDPA, output projection, residual)."""
from __future__ import annotations

from dataclasses import replace

from ...registry.profile import CacheEntry, Profile
from ..kernels import RouteDecision, SdpaCall
from .items import CallContext, EntryStep, Item, fast_op, residual
from ...mlxlm.recipe_files import traits_of


_PYTHON_ATTENTION = RouteDecision("python-softcap", "fallback", None, None,
                                  "mlx-lm writes the softcapped attention out (gemma2.py): never mx.fast SDPA")


def route_for(ctx: CallContext, call: SdpaCall, family: str) -> RouteDecision:
    """The SDPA route a layer of ``family`` takes: the kernel table's, except where mlx-lm computes attention
    itself (the module's ``softcap_attention`` trait)."""
    if traits_of(family).softcap_attention and call.q_len > 1:
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
    cap = 3 * sc_el * f if traits_of(family).softcap_attention else 0  # / cap, tanh, * cap: three more copies
    out = [Item("sdpa.bound_softcap", cap, 3, elems=3 * sc_el)] if cap else []
    return out + [Item("sdpa.bound_q_scaled", q_el * f, 1, elems=q_el),
            Item("sdpa.bound_scores", 3 * sc_el * f + mask, 4 + sinks, op_bytes=(sc_el * f, mask, sc_el * f, sc_el * f)
                 + ((0,) if sinks else ()), elems=(q_el + k_el, 2, sc_el + mask_el, sc_el) + ((sc_el,) if sinks else ())),
            Item("sdpa.bound_out", call.n_q * call.q_len * call.v_head_dim * max(s, f), 1, elems=sc_el + v_el)]


def sdpa_items(ctx: CallContext, call: SdpaCall, *, family: str) -> list[Item]:
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


def cache_update(entry: CacheEntry, step: EntryStep, act: int, q_len: int = 0) -> Item:
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
    if step.kind == "sliding" and step.old_rows == 0 and step.zero_rows == 0:
        # a RotatingKVCache's first prefill call keeps the keys and values as they are (``_update_concat``:
        # ``self.keys = keys``): no kernel, so nothing reaches CUDA's graph-commit counter (graph DOTs of
        # gpt-oss-20b, session 11: no copy in a first call's sliding layers; with its elements counted the
        # replay's graph-count step sat 5-10 tokens early: measured peaks 14% above it at 2,020-2,025 tokens)
        return Item("kv_update_copy", 0, 2, 4, out=0, elems=0, nodes=0)
    if extra == 0 and step.zero_rows == 0:
        return Item("kv_update_copy", 0, 2, 4, out=0, elems=update_el)  # two slice_updates and the fetch slices
    concat_el = (step.old_rows + step.zero_rows + 2 * step.trim_rows) * entry.row_elements
    return Item("kv_update_copy", extra * rb, 6, 4, out=0, elems=concat_el + update_el)


def mask_kind(p: Profile, entry: CacheEntry, step: EntryStep, q_len: int) -> str:
    """The mask mlx-lm passes to SDPA for this layer (see routes research §5)."""
    if q_len == 1:
        return "none"
    if traits_of(p.mlx_model_type).mask == "array":
        return "bool"
    if entry.kind == "sliding":
        # RotatingKVCache.make_mask: bool once offset + N > window; llama/gemma also pass window_size,
        # which makes KVCache.make_mask build an array too.
        return "bool" if step.kv_len > entry.window or step.old_rows > 0 else "causal"
    if entry.kind == "chunked":
        return "bool"
    return "causal"


def _mask_first(rope: Item, upd: Item, sdpa: list[Item]) -> list[Item]:
    """RoPE, the cache update and SDPA in the order MLX's CUDA backend encodes them.

    Where a bool mask is converted to an additive one (``sdpa.bool_mask_to_additive``: the fills and the
    ``where`` on the [B, Hq, qL, kL] broadcast), MLX's tape runs that conversion before q's RoPE and the cache
    update, right after the projections: graph DOT dumps of gpt-oss-20b on the H200 (session 11,
    benchmarks/cuda/results/dots_s11_gpt-oss-20b.*) end a graph on the sliding layers' ``where`` and open the
    next one with the cache concatenations, q's RoPE and SDPA. Only the order of the commit counter's
    additions moves (every byte and element is the same); with RoPE before the conversion the replay put
    ~10 Mi elements per sliding layer into the wrong graph, so a 2,047-token first call committed 30 graphs
    against MLX's 36 (and 9.234 GiB against 7.32 measured). The converted mask waits for SDPA across RoPE
    and the update (``carry``: the ``where`` writes into one of its two fills; the other is only its input)."""
    if not sdpa or sdpa[0].term != "sdpa.bool_mask_to_additive":
        return [rope, upd, *sdpa]
    conv = sdpa[0]
    mask = conv.bytes // 2
    conv = replace(conv, carry=mask, carry_items=2, out=0)
    return [conv, rope, upd, *sdpa[1:]]


def _rope_output(ctx: CallContext, fused: bool, S: int, row: int, width: int) -> int | None:
    """Bytes the fused RoPE kernel allocates for a ``width``-column view of a fused q|k|v projection of
    ``row`` columns, on a backend whose kernel keeps the input's strides (``fast_ops.rope_output_spans_input``):
    the view's data_size, from its first element to its last, ``(S - 1) * row + width`` elements (the view
    cannot be donated: its buffer is shared with the other views). None where that rule does not apply
    (separate projections, a decomposed RoPE, the worst-case items)."""
    fo = ctx.routes.fast_ops
    if not fused or ctx.bound or fo.rope is not None or not fo.rope_output_spans_input:
        return None
    return ((S - 1) * row + width) * ctx.act


def _rope_donates(ctx: CallContext, fused: bool) -> bool:
    """The fused RoPE kernel writes into its input: a (B, H, L, D) view of a separate projection (or of its q/k
    norm's output) that nothing else reads (``donation.rope_single_use_input``, MLX CUDA rope.cu). Never for
    split views of a fused q|k|v buffer (shared), a decomposed RoPE, or the worst-case items."""
    return (ctx.routes.donation.rope_single_use_input and not fused and not ctx.bound
            and ctx.routes.fast_ops.rope is None)


def _qk_norm_donates(ctx: CallContext, kind: str, shared: bool) -> bool:
    """The per-head q/k norm writes into its input: a separate projection reshaped to (B, L, H, D), read by
    nothing else (``donation.qk_norm_single_use_input``, MLX CUDA rms_norm.cu). Not for views of a fused or
    gated projection (``shared``), a norm after the transpose (copied first) or a decomposed norm."""
    return (ctx.routes.donation.qk_norm_single_use_input and kind == "heads" and not shared
            and ctx.routes.fast_ops.rms_norm is None)


def _output_in_query_layout(ctx: CallContext, call: SdpaCall, family: str) -> bool:
    """The SDPA kernel of this call writes its output in the queries' (B, L, H, D) memory order, so the
    transpose + reshape before o_proj copies nothing (``Route.output_in_query_layout``); never in the
    worst-case items."""
    if ctx.bound and call.q_len > 1:
        return False
    r = route_for(ctx, call, family)
    return r.output_in_query_layout and r.route in ("fused", "vector")


def attention_items(p: Profile, entry: CacheEntry, step: EntryStep, ctx: CallContext, *, cache_only: bool) -> list[Item]:
    """A standard (GQA) attention layer: full, sliding or chunked cache."""
    S, s = ctx.q_len, ctx.act
    h = p.hidden_size
    n_q = p.num_heads or entry.n_kv
    n_kv, dk, dv = entry.n_kv, entry.k_width, entry.v_width
    fam = p.mlx_model_type
    tr = traits_of(fam)
    items = [fast_op(ctx, "rms_norm", S * h * s, weight=h)]
    row = n_q * dk * (2 if tr.gated_attention else 1) + n_kv * (dk + dv)  # a fused q|k|v row's width
    if cache_only:
        # the last layer of a prefill chunk: only its K/V reach the evaluated cache state (a fused q|k|v
        # projection is still one matmul writing every column).
        if tr.fused_qkv:
            items.append(Item("qkv_proj", S * row * s, 1, 6, elems=S * h + h * row))
        else:
            items.append(Item("qkv_proj", S * n_kv * (dk + dv) * s, 2, 6, elems=2 * S * h + h * n_kv * (dk + dv)))
        if tr.qk_norm != "none":
            items.append(fast_op(ctx, "rms_norm", S * n_kv * dk * s, weight=dk,
                                 donates=_qk_norm_donates(ctx, tr.qk_norm, tr.fused_qkv or tr.gated_attention)))
        rope = fast_op(ctx, "rope", S * n_kv * dk * s)
        k_rope = _rope_output(ctx, tr.fused_qkv, S, row, n_kv * dk)
        if k_rope is not None:
            rope = Item(rope.term, k_rope, rope.ops, rope.views, elems=rope.elems)
        elif _rope_donates(ctx, tr.fused_qkv):
            rope = Item(rope.term, 0, rope.ops, rope.views, out=rope.bytes, elems=rope.elems)
        items.append(rope)
        items.append(cache_update(entry, step, s, S))
        return items
    qk_norm = tr.qk_norm != "none"
    gate = S * n_q * dk * s if tr.gated_attention else 0  # q_proj also yields the output gate
    # v waits for the cache update (past the q/k norms and RoPE)
    q_w = n_q * dk * (2 if gate else 1)
    fused = tr.fused_qkv
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
        norm = fast_op(ctx, "rms_norm", S * (n_q + n_kv) * dk * s, 2, weight=dk,
                       donates=_qk_norm_donates(ctx, tr.qk_norm, fused or bool(gate)))
        if tr.qk_norm == "after_transpose" and ctx.routes.fast_ops.rms_norm is None:
            norm = Item(norm.term, norm.bytes, 4, norm.views, out=norm.out, elems=2 * norm.elems)
        items.append(norm)
    # the rotated q waits for SDPA (past the cache update)
    rope = fast_op(ctx, "rope", S * (n_q + n_kv) * dk * s, 2)
    # RoPE of a strided view copies it first (rope.cu): the copy reads the view's span
    rope_el = 2 * span + rope.elems if fused else rope.elems
    q_rope, k_rope = _rope_output(ctx, fused, S, row, n_q * dk), _rope_output(ctx, fused, S, row, n_kv * dk)
    if q_rope is not None and k_rope is not None:
        rope = Item(rope.term, q_rope + k_rope, 2, rope.views, carry=q_rope, carry_items=1, out=q_rope + k_rope,
                    elems=rope_el, op_bytes=(q_rope, k_rope))
    else:
        # a donating RoPE allocates nothing: the rotated q and k are the projections' buffers, still alive
        # (``out``, and q's ``carry`` to SDPA)
        rope = Item(rope.term, 0 if _rope_donates(ctx, fused) else rope.bytes, rope.ops, rope.views,
                    carry=S * n_q * dk * s, carry_items=1, out=rope.out if rope.out >= 0 else rope.bytes,
                    elems=rope_el)
    upd = cache_update(entry, step, s, S)
    if fused:  # the slice update copies v out of the fused buffer: the view's span
        upd = Item(upd.term, upd.bytes, upd.ops, upd.views, carry=upd.carry, carry_items=upd.carry_items, out=upd.out,
                   elems=(upd.elems or 0) + span - S * n_kv * dv)
    call = SdpaCall(n_q, n_kv, dk, dv, S, step.kv_len, mask_kind(p, entry, step, S),
                    bool(p.attention_sinks), ctx.dtype, ctx.nax)
    sdpa = sdpa_items(ctx, call, family=fam)
    if q_rope is not None and sdpa and sdpa[0].term in ("sdpa.fused_out", "sdpa.vector_out", "sdpa.fallback_q_scaled"):
        # the rotated q of a fused q|k|v view has the span's data_size (rope.cu keeps the input's strides), and
        # that is what the kernel reading it adds to the graph's element counter (set_input_array)
        first = sdpa[0]
        el = first.elems if isinstance(first.elems, int) else sum(first.elems)
        sdpa[0] = Item(first.term, first.bytes, first.ops, first.views, carry=first.carry, carry_items=first.carry_items,
                       out=first.out, elems=el + q_rope // s - S * n_q * dk, nodes=first.nodes, op_bytes=first.op_bytes)
    if gate:  # the gate waits for the output projection, past SDPA
        after = sum(it.term != "sdpa.bool_mask_to_additive" for it in sdpa)  # the SDPA items after the update
        upd = Item(upd.term, upd.bytes, upd.ops, upd.views, carry=gate, carry_items=after + 1, out=upd.out)
    if tr.query_scale and sdpa:
        # ``queries * attn_scale`` (mlx-lm ministral3): RoPE's output keeps the (B, H, L, D) transposed strides, so
        # the broadcast product is a new row-contiguous q; the fused SDPA writes its output in that layout, so the
        # transpose back before o_proj copies it (a second q-sized buffer, charged here with the product: a bound
        # in placement). Devstral-Small-2-24B vs the same dims as a plain llama on the H200, step 512: +0.13-0.15
        # GiB over ~18 layers in flight (s13-cuda note: 4.055 vs 3.903, 9.097 vs 8.964).
        # Folded into SDPA's first item (bytes only: no executor slot of its own, so the op windows of the CPU
        # and Metal executors keep the same ops and the estimate only grows; the mistral3 wrapper's traits charge
        # it for every text stack it may build, see profiles/mlx_lm/mistral3.yaml).
        q_b, first = 2 * S * n_q * dk * s, sdpa[0]
        sdpa[0] = replace(first, bytes=first.bytes + q_b, out=first.out if first.out >= 0 else first.bytes,
                          op_bytes=(first.op_bytes[0] + q_b, *first.op_bytes[1:]) if first.op_bytes else ())
    items += _mask_first(rope, upd, sdpa)
    if gate:  # output * sigmoid(gate)
        items.append(Item("attn_gate", 2 * S * n_q * dv * s, 2, 1, out=S * n_q * dv * s, elems=3 * S * n_q * dv))
    if _output_in_query_layout(ctx, call, fam):
        # the kernel wrote (B, L, H, Dv) order: transpose + reshape are views, o_proj reads them directly, so
        # no copy buffer and no copy kernel reading S * n_q * dv elements. The first slot stays as one graph
        # node with no bytes and no elements: the traced graphs hold more kernels per layer than the items name
        # (Qwen3-8B 28 vs 24, commits_heldout2.json; the node-limited tensor-rank graphs of Qwen3-30B-A3B commit
        # as traced only with it, test_cuda_graphs), while the element-limited graphs of one Llama-3.1-8B /
        # Qwen3-8B process commit exactly as traced only without the copy's elements (session 7).
        items.append(Item("o_proj", S * h * s, 2, 2, out=S * h * s, op_bytes=(0, S * h * s),
                          elems=(0, h * n_q * dv + S * n_q * dv)))
    else:  # the (B, H, L, Dv) output is copied to (B, L, H * Dv) first
        items.append(Item("o_proj", S * n_q * dv * s + S * h * s, 2, 2, out=S * h * s,
                          elems=S * n_q * dv + h * n_q * dv + S * n_q * dv))
    if tr.sandwich_norm:
        items.append(fast_op(ctx, "rms_norm", S * h * s, weight=h, donates=True))
    items.append(residual(ctx, S, h))
    return items
