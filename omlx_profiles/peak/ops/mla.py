"""Multi-head latent attention (DeepSeek V2/V3): the expanded cache and the latent cache."""
from __future__ import annotations

from ...errors import UnsupportedError
from ...registry.profile import CacheEntry, Profile
from ..kernels import SdpaCall
from .attention import cache_update, mask_kind, sdpa_items
from .items import CallContext, EntryStep, Item, fast_op, residual
from .mlp import argsort_nodes


def mla_expanded_items(p: Profile, entry: CacheEntry, step: EntryStep, ctx: CallContext, *, cache_only: bool) -> list[Item]:
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
    items = [fast_op(ctx, "rms_norm", S * h * s, weight=h)]
    if not cache_only:
        q_in = h
        if mla.q_lora_rank:
            items.append(Item("mla.q_a", S * mla.q_lora_rank * s, 1, 1, elems=S * h + mla.q_lora_rank * h))
            items.append(fast_op(ctx, "rms_norm", S * mla.q_lora_rank * s, weight=mla.q_lora_rank))
            q_in = mla.q_lora_rank
        items.append(Item("mla.q_proj", q_bytes, 1, 3, elems=S * q_in + H * (nope + rope) * q_in))
    items.append(Item("mla.kv_a", S * (rank + rope) * s, 1, 2, elems=S * h + (rank + rope) * h))
    items.append(fast_op(ctx, "rms_norm", S * rank * s, weight=rank))
    # kv_b output: k_nope and the values; the values wait for the cache update
    items.append(Item("mla.kv_b", S * H * (nope + vd) * s, 1, 4, carry=S * H * vd * s, carry_items=4,
                      elems=S * rank + H * (nope + vd) * rank))
    n_rope = 1 if cache_only else 2
    items.append(fast_op(ctx, "rope", S * (rope + (0 if cache_only else H * rope)) * s, n_rope))
    items.append(Item("mla.k_concat", S * H * rope * s + S * H * (nope + rope) * s, 2, 3, out=S * H * (nope + rope) * s,
                      elems=S * rope + S * H * rope + S * H * nope))
    if not cache_only:
        items.append(Item("mla.q_concat", q_bytes, 1, 1, carry=q_bytes, carry_items=1, elems=S * H * (nope + rope)))
    items.append(cache_update(entry, step, s, S))
    if cache_only:
        return items
    call = SdpaCall(p.num_heads or H, H, nope + rope, vd, S, step.kv_len, mask_kind(p, entry, step, S),
                    False, ctx.dtype, ctx.nax)
    items += sdpa_items(ctx, call, family=p.mlx_model_type)
    items.append(Item("o_proj", S * H * vd * s + S * h * s, 2, 2, elems=2 * S * H * vd + h * H * vd))
    items.append(_residual(ctx, S, h))
    return items


def mla_latent_items(p: Profile, entries: tuple[CacheEntry, ...], steps: tuple[EntryStep, ...], ctx: CallContext,
                *, cache_only: bool) -> list[Item]:
    """DeepSeek-V3-style MLA prefill: latent cache; pe_scores (H x qL x kL) passed as an additive mask,
    k = embed_q(latent) and v = unembed_out(latent) materialized per head for the whole cache."""
    S, s, h = ctx.q_len, ctx.act, p.hidden_size
    mla = p.mla
    H = p.num_heads or 1
    nope, rope, vd, rank = mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim, mla.kv_lora_rank
    entry, step = entries[0], steps[0]
    kL = step.kv_len
    items = [fast_op(ctx, "rms_norm", S * h * s, weight=h)]
    items.append(Item("mla.kv_a", S * (rank + rope) * s, 1, elems=S * h + (rank + rope) * h))
    items.append(fast_op(ctx, "rms_norm", S * rank * s))
    items.append(fast_op(ctx, "rope", S * rope * s))
    items.append(cache_update(entry, step, s, S))
    for e, st in zip(entries[1:], steps[1:]):  # DSA indexer cache
        items.append(Item("dsa.indexer_kv", S * e.row_elements * s, 2))
        items.append(cache_update(e, st, s, S))
    if cache_only:
        return items
    if mla.q_lora_rank:
        items.append(Item("mla.q_a", S * mla.q_lora_rank * s, 1, elems=S * h + mla.q_lora_rank * h))
        items.append(fast_op(ctx, "rms_norm", S * mla.q_lora_rank * s, weight=mla.q_lora_rank))
    q_in = mla.q_lora_rank or h
    items.append(Item("mla.q_proj", S * H * (nope + rope) * s, 1, elems=S * q_in + H * (nope + rope) * q_in))
    items.append(fast_op(ctx, "rope", S * H * rope * s))
    if len(entries) > 1 and mla.index_n_heads and mla.index_topk and kL > mla.index_topk:
        gc = ctx.routes.executor.graph_commit
        items += dsa_indexer_items(p, S, kL, s, h, ctx.bound, gc.kernel_nodes if gc is not None else None)
    if S == 1:
        items.append(Item("mla.decode_q", H * rank * s * 2, 2))
        call = SdpaCall(H, 1, rank, rank, 1, kL, "none", False, ctx.dtype, ctx.nax)
        items += sdpa_items(ctx, call, family=p.mlx_model_type)
        items.append(Item("o_proj", H * vd * s + h * s, 3))
    else:
        call = SdpaCall(H, H, nope, vd, S, kL, "additive", False, ctx.dtype, ctx.nax)
        sdpa = sdpa_items(ctx, call, family=p.mlx_model_type)
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
    items.append(_residual(ctx, S, h))
    return items


# Bytes per (qL x kL) per DSA layer that the H200's peaks hold beyond the itemized ops: with every op's bytes
# measured (probe_dsa.py: the indexer's ops and one attention module agree with the items) and the graph commits
# replayed exactly (16 / 34 / 40 / 48 per chunk at 8k, as traced), the whole model's 8k / step-2048 peak was still
# 0.96 of the op model: ~0.7 GiB over a window of two layers, placed in the traced graphs holding the index QK and
# the positional scores (commits_dsv32s5.json) - not identified. Sized from that point; checked (predicted before
# measuring, benchmarks/cuda/predictions-s5.md) at 16k / step 1024 (1.168) and 8k / step 4096 (1.050). Session 7, with
# the fp32 MoE combine itemized (mlp.py) and the argpartition's sort kernels counted (the replay then commits the
# traced graphs at 32k: 90 -> 97 per chunk): every traced chunk taken as a prompt's last still needs it - at 12 B a
# 16k / step-1024 chunk comes out 0.991, at 0 B 0.970 (tests/test_mla_cuda_chunks.py) - so it stays.
DSA_UNITEMIZED_B = 24


def _sort_passes(n: int, kn) -> int:
    """Doubling passes of MLX's CUDA multi-block merge sort of an ``n``-element row (0 without a kernel table)."""
    if kn is None:
        return 0
    blocks = -(-n // kn.sort_block_elements)
    return max(0, (blocks - 1).bit_length())


def dsa_indexer_items(p: Profile, S: int, kL: int, s: int, h: int, bound: bool, kn=None) -> list[Item]:
    """DeepSeek-V3.2's sparse-attention indexer (mlx-lm 0.32.2 ``deepseek_v32.Indexer``) op by op, once the
    cache is longer than ``index_topk``: ``q = wq_b(qr)`` and its RoPE, the (ih, qL, kL) index scores
    ``q @ k^T`` (allocated by the matmul, which reads only q and k), ``maximum(., 0)`` and the product with the
    per-head weights (both write in place: the scores have no other reader), the per-head sum mlx-lm writes as
    a Python ``sum`` of ``ih`` slices (one (qL, kL) accumulator, ``ih`` adds each reading a slice and the
    accumulator), the ``where`` with the causal mask, ``argpartition`` (uint32 (qL, kL), kept by the top-k
    slice), and the sparse bool mask (zeros, ``put_along_axis``, ``& mask``).

    Per-op elements because CUDA's commit rule ends a graph on them: at kL 32k the relu and the product each
    read 4 Gi elements and the 64 adds 128 Mi each, so the indexer alone commits ~10 graphs per layer. The
    single-item version this replaces (two score matrices over 6 ops) replayed 33 / 62 graphs per chunk where
    the H200 committed 48 / 97 (commits_dsv32.json) and put DeepSeek-V3.2 at 1.43 / 1.61 of its peak; now 48 / 90.
    ``bound``: relu and the product allocate (no donation)."""
    mla = p.mla
    ih = mla.index_n_heads
    ihd = mla.index_head_dim or mla.qk_nope_head_dim + mla.qk_rope_head_dim
    q_in = mla.q_lora_rank or h
    sc = ih * S * kL * s
    plane = S * kL
    acc = plane * s
    inplace = sc if bound else 0  # the worst case does not count on donation
    adds = (plane + 1,) + (2 * plane,) * (ih - 1)
    return [
        Item("dsa.index_q", S * ih * ihd * s, 1, elems=S * q_in + ih * ihd * q_in),
        Item("dsa.index_weights", S * ih * s * 2, 2, elems=(S * h + ih * h, S * ih + 1)),
        # the scores' buffer stays alive until the last add has read its slice (the carry through the sum)
        Item("dsa.index_scores", sc + 2 * inplace, 3, out=0, carry=sc, carry_items=2, op_bytes=(sc, inplace, inplace),
             elems=(S * ih * ihd + kL * ihd, ih * plane + 1, ih * plane + S * ih)),
        Item("dsa.index_head_sum", acc, ih, elems=adds),
        Item("dsa.index_where", acc if bound else 0, 1, out=acc, elems=2 * plane + 1),
        # argpartition: its uint32 output + 8 B per element of sort workspace (probe_dsa.py: 12.00 B per (qL x kL)
        # at kL 8k and 32k), + DSA_UNITEMIZED_B (see there). On CUDA it is a full merge sort of each kL row
        # (mlx/backend/cuda/sort.cu: ArgPartition::eval_gpu -> gpu_sort): past one block, a block-sort kernel reading
        # the scores, then per doubling pass a partition and a merge kernel, each reading the values and indices
        # (2 x plane elements): the element rule ends a graph inside it at long context
        Item("dsa.topk", plane * (12 + DSA_UNITEMIZED_B), 1, carry=plane * 4, carry_items=1,
             elems=plane * (1 + 4 * _sort_passes(kL, kn)), nodes=argsort_nodes(kL, kn) if kn is not None else -1),
        Item("dsa.sparse_mask", 2 * plane, 3, out=plane, op_bytes=(plane, 0, plane),
             elems=(0, 2 * plane + S * mla.index_topk, 2 * plane)),
    ]


def _residual(ctx: CallContext, S: int, h: int) -> Item:
    """The MLA block's residual add: donated (0 bytes) where the backend donates it (``donation.residual_add``, CPU:
    measured by the executor replay on deepseek_v3, benchmarks/cpu_replay/); charged elsewhere as before (the CUDA
    MLA points were sized with it charged and without the graph-placement margin of ``items.residual``)."""
    if ctx.routes.donation.residual_add:
        return residual(ctx, S, h)
    return Item("residual", S * h * ctx.act, 1, elems=2 * S * h)
