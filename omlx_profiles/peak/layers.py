"""One call's ordered items: the embedding, every layer's block, the logits of the last token."""
from __future__ import annotations

import dataclasses

from ..errors import UnsupportedError
from ..registry.profile import LayerType, Profile
from .ops.attention import attention_items
from .ops.items import CallContext, EntryStep, Item, fast_op
from .ops.mla import mla_expanded_items, mla_latent_items
from .ops.mlp import mlp_items
from .ops.recurrent import linear_attention_items
from .ops.tape import placed
from ..mlxlm.recipe_files import traits_of


def layer_items(p: Profile, lt: LayerType, steps: tuple[EntryStep, ...], ctx: CallContext, *, cache_only: bool,
                dense: bool = False) -> list[Item]:
    """The items of one layer of this type during the call (``cache_only``: the chunk's last layer;
    ``dense``: an MoE model's layer that runs a dense MLP, ``dense_layer``)."""
    items = placed(ctx, _layer_items(p, lt, steps, ctx, cache_only=cache_only, dense=dense))
    if p.tensor_ranks > 1:
        gc = ctx.routes.executor.graph_commit
        nodes = gc.kernel_nodes.all_sum if gc is not None and gc.kernel_nodes is not None else 1
        items = [all_sum_node(it, ctx.q_len * (p.hidden_size or 0), nodes) if it.term == "residual" else it
                 for it in items]
    return items


def all_sum_node(residual: Item, elements: int, nodes_per_all_sum: int = 1) -> Item:
    """A tensor rank's block output goes through ``all_sum`` before the residual add (``ShardedToAllLinear``,
    the MoE block's ``all_sum``): one more CUDA graph node reading the block's output, traced on two H200s
    (twogpu_s5_rank*.json: 2 nodes per Qwen3-MoE layer more than one process, commits_cold_qwen3.json). Its
    output buffer is the communication term (``sharding.report.comm_bytes``), and the executor slot is left
    alone (the CPU ring's window was measured without it), so only the CUDA graph ends move. The node count
    is the kernel table's (``graph_commit.kernel_nodes.all_sum``, with its source in MLX)."""
    nodes = residual.nodes if residual.nodes >= 0 else residual.ops
    el = residual.elems if isinstance(residual.elems, int) else sum(residual.elems)
    return dataclasses.replace(residual, nodes=nodes + nodes_per_all_sum, elems=el + elements)


def _layer_items(p: Profile, lt: LayerType, steps: tuple[EntryStep, ...], ctx: CallContext, *, cache_only: bool,
                 dense: bool = False) -> list[Item]:
    kinds = [e.kind for e in lt.entries]
    moe = p.moe is not None and not dense
    if kinds == ["none"]:
        if cache_only:
            return []
        return mlp_items(p, ctx, moe=moe)
    if kinds[0] == "latent":
        items = mla_latent_items(p, lt.entries, steps, ctx, cache_only=cache_only)
    elif kinds[0] in ("full", "sliding", "chunked"):
        e = lt.entries[0]
        if p.mla is not None and traits_of(p.mlx_model_type).mla == "expanded":
            items = mla_expanded_items(p, e, steps[0], ctx, cache_only=cache_only)
        else:
            items = attention_items(p, e, steps[0], ctx, cache_only=cache_only)
        for e2, st2 in zip(lt.entries[1:], steps[1:]):
            if e2.kind == "state":
                items += linear_attention_items(p, lt, e2, st2, ctx, cache_only=cache_only)
            elif e2.kind == "indexer":  # a DSA indexer beside per-head K/V (minimax_m3_vl): no op list for it
                raise UnsupportedError(f"unsupported: no transient model for the DSA indexer of a {lt.label!r} layer "
                                       "(its block scores are not in the op model); the KV bytes stay exact")
    elif kinds[0] == "state":
        items = linear_attention_items(p, lt, lt.entries[0], steps[0], ctx, cache_only=cache_only)
    else:
        raise UnsupportedError(f"unsupported: no transient model for a {lt.label!r} layer")
    if cache_only or traits_of(p.mlx_model_type).separate_mlp:
        return items  # separate_mlp: attention/mixer/MLP are separate layers ('none' = MLP-only)
    return items + mlp_items(p, ctx, moe=moe)


def dense_layer(p: Profile, index: int) -> bool:
    """An MoE model's layer ``index`` runs a dense MLP (DeepSeek's ``first_k_dense_replace``): traced on the
    H200, those layers commit one CUDA graph fewer than an MoE layer (commits_dsv3.json), which changes how
    many layers' score matrices MLX's in-flight window holds."""
    return p.moe is not None and index < (getattr(p.moe, "first_dense_layers", 0) or 0)


def embedding_items(p: Profile, ctx: CallContext) -> list[Item]:
    h = p.hidden_size
    # the gather reads from the whole table (its elements count for CUDA's graph commit)
    items = [Item("embedding", ctx.q_len * h * ctx.act, 1, 3, elems=(p.vocab_size or 0) * h + ctx.q_len)]
    if traits_of(p.mlx_model_type).sandwich_norm:
        items.append(Item("embedding", ctx.q_len * h * ctx.act, 1))
    return items


def logits_items(p: Profile, ctx: CallContext) -> list[Item]:
    """The last-token step: final norm, lm_head on one position, log-softmax, argmax."""
    v = p.vocab_size or 0
    h = p.hidden_size
    return placed(ctx, [fast_op(ctx, "rms_norm", h * ctx.act, weight=h),
                        Item("logits", v * ctx.act + 2 * v * 4, 4, elems=v * h + 3 * v)])
