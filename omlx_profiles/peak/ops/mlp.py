"""The feed-forward block: dense SwiGLU / GeGLU (fused gate|up where the module fuses it) and MoE."""
from __future__ import annotations

from ...errors import UnsupportedError
from ...registry.profile import Profile
from .items import CallContext, Item, fast_op, residual
from ...mlxlm.recipe_files import traits_of

# CUDA graph nodes (kernels) of the SwitchGLU ops whose kernel count is not one per op. They only move where
# MLX's CUDA backend commits a graph (``executor.graph_ends``: more than 100 nodes end a graph); the bytes
# and the executor slots (``ops``) of the items are unchanged, so CPU and Metal estimates do not move. The
# counts are the kernel table's (``graph_commit.kernel_nodes`` in profiles/kernels/cuda.yaml, with their
# source); a backend without graph commits has no node counts (-1: one per op, never read).
# * argsort: one kernel for a row that fits one block, else one block-sort kernel + ``sort_merge_pass_nodes``
#   per doubling pass; SwitchGLU sorts the S*k flattened expert indices twice (``order``, ``inv_order``).
# * ``indices.flatten()``: ``indices`` is the strided slice ``argpartition(...)[..., -k:]``, so flattening it
#   copies (one kernel, no executor op of its own in the item list).
# * gather_mm on sorted rows: ``gather_mm_sorted`` nodes each (three of them: gate, up, down).


def argsort_nodes(n: int, kn) -> int:
    """Kernels MLX's CUDA argsort launches for one row of ``n`` elements (``kn``: the table's ``kernel_nodes``)."""
    blocks = -(-n // kn.sort_block_elements)
    return 1 + kn.sort_merge_pass_nodes * max(0, (blocks - 1).bit_length())


def gemm_workspace(ctx: CallContext, rows: int, out_cols: int, matmul: str) -> int:
    """Bytes of the cuBLASLt workspace the kernel table charges to one matmul (``gemm_workspace`` in
    profiles/kernels/cuda.yaml, with its source): MLX CUDA allocates it as a temporary of the graph, so it stays
    alive with the graph's other temporaries; 0 on a backend without one, above ``max_rows`` or for a matmul the
    table does not name."""
    w = ctx.routes.gemm_workspace
    if w is None or rows > w.max_rows or matmul not in w.matmuls:
        return 0
    return min(w.max_bytes, rows * out_cols * w.bytes_per_output_element)


def mlp_items(p: Profile, ctx: CallContext, *, moe: bool) -> list[Item]:
    """The feed-forward block: dense SwiGLU, or the mlx-lm SwitchGLU MoE (+ shared experts)."""
    S, s = ctx.q_len, ctx.act
    h = p.hidden_size
    tr = traits_of(p.mlx_model_type)
    items = [fast_op(ctx, "rms_norm", S * h * s, weight=h)]
    if moe and p.moe is not None:
        m = p.moe
        E, k = m.num_experts, m.experts_per_token
        I = m.moe_intermediate_size or p.intermediate_size
        T = S * k
        items.append(Item("moe.router", S * E * s * 2 + S * E * 4 + S * k * (4 + s) * 2, 6, out=S * k * (4 + s),
                          elems=S * h + E * h + 4 * S * E))
        sort = T >= 64  # SwitchGLU sorts tokens by expert when indices.size >= 64
        gc = ctx.routes.executor.graph_commit
        kn = gc.kernel_nodes if gc is not None else None
        if sort:
            # the flatten copy, argsort(indices), argsort(order), order // k, x[order // k], indices[order]
            items.append(Item("moe.sort", T * 4 * 4 + T * h * s, 5, out=T * (h * s + 8), elems=S * h + 4 * T,
                              nodes=1 + 2 * argsort_nodes(T, kn) + 3 if kn else -1))
        # gate and up (gather_mm: every expert's weight is an input), the compiled SwiGLU writes into one
        # of them (donation), down
        if tr.expert_bias:
            # SwitchLinear with bias: each projection adds bias[indices] (a (T, out) gather) in place
            items.append(Item("moe.experts", T * I * s * 4 + T * h * s * 2, 10, out=T * h * s,
                              nodes=10 + 3 * (kn.gather_mm_sorted - 1) if sort and kn else -1,
                              op_bytes=(T * I * s, T * I * s, 0, T * I * s, T * I * s, 0, 0, T * h * s, T * h * s, 0),
                              elems=(T * h + E * I * h + T, E * I + T, 2 * T * I, T * h + E * I * h + T, E * I + T,
                                     2 * T * I, 2 * T * I, T * I + E * h * I + T, E * h + T, 2 * T * h)))
        else:
            items.append(Item("moe.experts", T * I * s * 2 + T * h * s, 4, out=T * h * s,
                              nodes=4 + 3 * (kn.gather_mm_sorted - 1) if sort and kn else -1,
                              op_bytes=(T * I * s, T * I * s, 0, T * h * s),
                              elems=(T * h + E * I * h + T, T * h + E * I * h + T, 2 * T * I, T * I + E * h * I + T)))
        if sort:
            items.append(Item("moe.unsort", T * h * s, 1, elems=T * h + T))
        if tr.router_scores == "fp32" and s < 4:
            # fp32 routing weights (the DeepSeek-V3 gate: sigmoid of the fp32 gates): ``y * scores[..., None]``
            # promotes y, so the (T, hidden) expert outputs are cast to a new fp32 buffer (y's bf16 buffer cannot
            # hold it) and the product writes into that; the sum over the k experts is an fp32 (S, hidden) and
            # ``.astype(y.dtype)`` one more (S, hidden). Traced on the H200 (commits_kimis6.json, step 512: every
            # layer's graph adds 459 MiB where the items had 349; T x hidden x 4 = 112 MiB)
            items.append(Item("moe.combine", T * h * 4 + S * h * 4 + S * h * s, 4, out=S * h * s,
                              op_bytes=(T * h * 4, 0, S * h * 4, S * h * s),
                              elems=(T * h, T * h + T, T * h, S * h)))
        else:
            # (y * scores) reuses the unsorted y (donation), then the sum over the k experts
            items.append(Item("moe.combine", S * h * s, 2, out=S * h * s, elems=2 * T * h + T))
        if m.shared_experts:
            Ish = (p.intermediate_size or I) if tr.shared_expert == "intermediate" else I * m.shared_experts
            items.append(Item("moe.shared_expert", S * Ish * s * 2 + S * h * s * 2, 6, out=S * h * s,
                              elems=2 * S * h + 3 * Ish * h + 3 * S * Ish + 2 * S * h))
    else:
        I = p.intermediate_size or 0
        if not I:
            raise UnsupportedError(f"unsupported: {p.name} has no intermediate_size, so its MLP activations are unknown")
        ws = gemm_workspace(ctx, S, h, "mlp_down")
        if tr.fused_gate_up:
            # one gate|up matmul, the compiled SwiGLU on its two column views (each counts the 2*S*I span; it
            # cannot write into a view, so it allocates), down
            items.append(Item("mlp", S * I * s * 3 + S * h * s + ws, 3, 3, out=S * h * s,
                              op_bytes=(2 * S * I * s, S * I * s, S * h * s + ws),
                              elems=(S * h + 2 * I * h, 4 * S * I, S * I + h * I)))
        elif tr.gelu_approx:
            # gate, up, gelu_approx (a new buffer), the product (in place), down
            items.append(Item("mlp", S * I * s * 3 + S * h * s + ws, 5, 3, out=S * h * s, nodes=6,
                              op_bytes=(S * I * s, S * I * s, S * I * s, 0, S * h * s + ws),
                              elems=(S * h + I * h, S * h + I * h, 3 * S * I, 2 * S * I, S * I + h * I)))
        else:
            # gate, up, down; the compiled SwiGLU writes into gate's or up's buffer (donation, measured)
            items.append(Item("mlp", S * I * s * 2 + S * h * s + ws, 4, 3, out=S * h * s,
                              op_bytes=(S * I * s, S * I * s, 0, S * h * s + ws),
                              elems=(S * h + I * h, S * h + I * h, 2 * S * I, S * I + h * I)))
    if tr.sandwich_norm:
        items.append(fast_op(ctx, "rms_norm", S * h * s, weight=h, donates=True))
    items.append(residual(ctx, S, h))
    return items
