"""The prose of a ``Breakdown``: which call peaked, what each term holds, which SDPA route each layer
kind took (``Breakdown.explanation``, printed by ``estimate``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..registry.profile import Profile
from ..units import format_bytes
from .kernels import KernelRoutes, SdpaCall
from .ops.attention import mask_kind, route_for
from .ops.items import CallContext
from ..mlxlm.recipe_files import traits_of


@dataclass(frozen=True)
class CallPeak:
    """The peak of one call, term by term (what ``explain`` describes; ``prefill`` finds the highest)."""

    index: int
    q_len: int
    kv_len: int
    held_before: int
    growth: int
    snapshot: int
    pinned: dict[str, int]
    window: int
    window_terms: dict[str, int]
    routes: dict[str, str]

    @property
    def total(self) -> int:
        return self.held_before + self.growth + self.snapshot + sum(self.pinned.values()) + self.window


def routes_used(p: Profile, steps: dict, ctx: CallContext) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, stps in steps.items():
        lt = p.layer_types[name]
        e, st = lt.entries[0], stps[0]
        if e.kind in ("full", "sliding", "chunked") and p.num_heads:
            if p.mla is not None and traits_of(p.mlx_model_type).mla == "expanded":
                call = SdpaCall(p.num_heads, e.n_kv, p.mla.qk_nope_head_dim + p.mla.qk_rope_head_dim,
                                  p.mla.v_head_dim, ctx.q_len, st.kv_len, mask_kind(p, e, st, ctx.q_len), False,
                                  ctx.dtype, ctx.nax)
            else:
                call = SdpaCall(p.num_heads, e.n_kv, e.k_width, e.v_width, ctx.q_len, st.kv_len,
                                  mask_kind(p, e, st, ctx.q_len), bool(p.attention_sinks), ctx.dtype, ctx.nax)
        elif e.kind == "latent" and p.mla is not None:
            H = p.num_heads or 1
            if ctx.q_len == 1:
                call = SdpaCall(H, 1, p.mla.kv_lora_rank, p.mla.kv_lora_rank, 1, st.kv_len, "none", False, ctx.dtype, ctx.nax)
            else:
                call = SdpaCall(H, H, p.mla.qk_nope_head_dim, p.mla.v_head_dim, ctx.q_len, st.kv_len, "additive",
                                  False, ctx.dtype, ctx.nax)
        else:
            continue
        r = route_for(ctx, call, p.mlx_model_type)
        out[name] = f"{r.route} ({r.name}; D={call.head_dim}/{call.v_head_dim}, qL={call.q_len}, kL={call.kv_len}, mask={call.mask})"
    return out


def explain(p: Profile, req: Any, kr: KernelRoutes, best: CallPeak, peak: int, resident_after: int,
             held_start: int, window: int, n_calls: int) -> tuple[str, ...]:
    lines = [
        f"{p.name} on {kr.backend} (kernel table for MLX {kr.mlx_version}), {req.new_tokens} new tokens"
        + (f" after {req.cached} cached" if req.cached else "") + f", {req.schedule} schedule, chunk {req.chunk}: "
        f"{n_calls} call(s)",
        f"peak {format_bytes(peak)} over what was held before the prompt, reached in call {best.index} "
        f"(qL={best.q_len}, kL={best.kv_len})",
        f"  held by the caches before that call: {format_bytes(best.held_before - held_start)} (+ {format_bytes(held_start)} prefix held before the prompt)",
        f"  rows that call adds to every cache: {format_bytes(best.growth)}",
    ]
    if best.snapshot:
        lines.append(f"  conv-state views of the previous chunk: {format_bytes(best.snapshot)}")
    pinned = sum(best.pinned.values())
    if pinned:
        lines.append(f"  residual stream and masks built once per forward: {format_bytes(pinned)}")
    gc = kr.executor.graph_commit
    if gc is not None:
        lines.append(f"  ops in flight (up to {gc.window_graphs} committed CUDA graphs of <= "
                     f"{gc.max_nodes} nodes / {gc.max_mega_elements} Mi-elements ahead of the GPU"
                     + (f", or {window} ops when the GPU keeps up" if gc.op_window_bound else "")
                     + f"): {format_bytes(best.window)}")
    else:
        lines.append(f"  ops in flight ({window} ops: the executor allocates ahead of the device): {format_bytes(best.window)}")
    top = sorted(best.window_terms.items(), key=lambda kv: -kv[1])[:5]
    for k, v in top:
        lines.append(f"    {k}: {format_bytes(v)}")
    for name, r in best.routes.items():
        lines.append(f"  SDPA of '{name}' layers: {r}")
    if gc is not None:
        lines.append("  assumes a warmed-up process: the first prefill after loading a model commits smaller CUDA graphs "
                     "that MLX does not count toward its in-flight limit (measured up to +46% on an H200); run one "
                     "short prefill (64 tokens) at load")
    lines.append(f"after the prompt the caches hold {format_bytes(resident_after)}")
    return tuple(lines)
