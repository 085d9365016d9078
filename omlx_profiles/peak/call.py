"""One call of a prompt: its ops in executor order (``items_of_call``), their peak over the executor window
(``call_peak``) and what outlives the window (``pinned_bytes``). ``prefill.py`` runs these over a prompt's calls.
"""
from __future__ import annotations

from ..units import DTYPE_BYTES, check_dtype
from ..errors import InputError, UnsupportedError
from ..mlxlm.recipe_files import traits_of
from ..registry.profile import Profile
from ..units import check_count
from .executor import graph_window_max, window_max
from .explain import CallPeak, routes_used
from .kernels import KernelRoutes, tiled_state
from .layers import dense_layer, embedding_items, layer_items, logits_items
from .ops.items import CallContext, Item
from .ops.recurrent import deferred_conv_bytes, state_snapshot_bytes
from .replay import KV_SCALED_KINDS, EntryState, calls_of, entry_bytes, fill_prefix, scale_up
from .request import Request

SMALL_ARRAYS = 64 * 1024


def validate_profile(p: Profile) -> None:
    if not p.hidden_size:
        raise UnsupportedError(f"{p.name} has no hidden_size, so its activations are unknown")
    if p.num_heads is None and p.mla is None:
        raise UnsupportedError(f"{p.name} has no num_heads (query heads), so its attention scores are unknown")


def activation_dtype(p: Profile, dtype: str | None) -> tuple[str, int]:
    """The activation dtype (``dtype`` or the profile's) and its bytes per element."""
    dt = check_dtype(dtype, p.dtype)
    return dt, DTYPE_BYTES[dt]


def call_items(profile: Profile, request: Request, call: int, *, backend: str = "cpu",
               mlx_version: str | None = None, dtype: str | None = None,
               routes: KernelRoutes | None = None) -> list[Item]:
    """The ops of the prompt's ``call``-th call (0-based, prefix calls not counted) in the order the
    executor runs them: the sequence ``prefill_peak`` slides its window over. Exposed so the model can be
    checked against traces of the real executor (benchmarks/cuda/probe_commits.py records every CUDA graph
    MLX commits; ``executor.graph_ends`` of these items must land on the same count)."""
    validate_profile(profile)
    p = profile
    dt, act = activation_dtype(p, dtype)
    kr = routes or KernelRoutes.for_backend(backend, mlx_version)
    _, tiled = tiled_state()
    prefix_calls, calls = calls_of(request)
    check_count("call", call, minimum=0)
    if call >= len(calls):
        raise InputError(f"call must be below {len(calls)} (the prompt's number of calls), got {call}")
    states = {name: [EntryState(e) for e in lt.entries] for name, lt in p.layer_types.items()}
    offset = fill_prefix(states, prefix_calls)
    for ci, s in enumerate(calls):
        steps = {name: tuple(st.step(s) for st in sts) for name, sts in states.items()}
        if ci == call:
            return items_of_call(p, s, offset, steps, kr, tiled, dt, act, False, last=ci == len(calls) - 1,
                               direct=request.schedule == "direct")[1]
        offset += s
    raise AssertionError("unreachable")


def items_of_call(p: Profile, s: int, offset: int, steps: dict, kr: KernelRoutes, tiled: dict, dt: str, act: int,
                nax: bool, *, last: bool, direct: bool, bound: bool = False,
                layer_starts: list | None = None) -> tuple[CallContext, list[Item]]:
    """The call's items in executor order; ``layer_starts``: when given, the index of each layer's first item is
    appended to it (``peak.fast_lines`` drops repeated layer periods from the window scan)."""
    ctx = CallContext(q_len=s, offset=offset, act=act, dtype=dt, routes=kr, tiled=tiled, nax=nax, last=last,
                        bound=bound)
    per_type: dict[str, list[Item]] = {}
    per_type_cache_only: dict[str, list[Item]] = {}
    items: list[Item] = list(embedding_items(p, ctx))
    n = len(p.layer_names)
    compute_all = last or direct
    for i, name in enumerate(p.layer_names):
        if layer_starts is not None:
            layer_starts.append(len(items))
        lt = p.layer_types[name]
        cache_only = (i == n - 1) and not compute_all and not p.sends_output
        cache = per_type_cache_only if cache_only else per_type
        dense = dense_layer(p, i)
        key = (name, dense)
        if key not in cache:
            cache[key] = layer_items(p, lt, steps[name], ctx, cache_only=cache_only, dense=dense)
        items.extend(cache[key])
    if compute_all:
        items.extend(logits_items(p, ctx) if last else [])
        if direct:
            items.append(Item("logits", s * (p.vocab_size or 0) * act, 1))
    return ctx, items


def call_peak(p: Profile, ci: int, s: int, offset: int, steps: dict, kr: KernelRoutes, tiled: dict, dt: str,
               act: int, nax: bool, window: int, *, last: bool, kv_before: int, snap_before: int, growth: int,
               direct: bool, worst: str | None = None, all_sums: list | None = None) -> CallPeak:
    """One call's peak: the ops' window maximum (``executor``) over its items, what outlives the window
    (``pinned_bytes``), the routes taken. ``all_sums``: when given, every window position's sum is appended to it
    (the fast path's envelope reads them)."""
    ctx, items = items_of_call(p, s, offset, steps, kr, tiled, dt, act, nax, last=last, direct=direct,
                             bound=worst == "bound")
    ex = kr.executor
    run_ahead = run_ahead_ops(kr) if worst else None
    if run_ahead is not None:
        # the backend's whole run-ahead window, whatever the ops' sizes (peak/basis.py): the size rule only
        # ends a command buffer / graph earlier, so the most ops in flight is (tasks + 1) x (ops per buffer + 1)
        wmax, wterms = window_max(items, run_ahead, 1, 0, all_sums=all_sums)
        w2, t2 = call_window(items, ex, s, act, all_sums)
        if w2 > wmax:
            wmax, wterms = w2, t2
    else:
        wmax, wterms = call_window(items, ex, s, act, all_sums)
    pinned = pinned_bytes(p, steps, s, act)
    routes = routes_used(p, steps, ctx)
    kv_len = max((st.kv_len for sts in steps.values() for st in sts), default=offset + s)
    return CallPeak(ci, s, kv_len, kv_before, growth, snap_before, pinned, wmax, wterms, routes)


def run_ahead_ops(kr: KernelRoutes) -> int | None:
    """The most ops MLX lets the host run ahead of the device on this backend, from MLX's source: CUDA
    (window_graphs + 1) graphs of at most max_nodes + 1 kernels (graph_commit in the kernel table: the in-flight
    cap and the completion overlap);
    Metal ``MAX_ACTIVE_TASKS`` (10) + 1 command buffers of at most ``max_ops_per_buffer`` + 1 ops, 50 on the
    Max / Ultra device classes, the largest (mlx/backend/metal/device.cpp: p 20, g 40, s 50, d 50;
    transforms.cpp MAX_ACTIVE_TASKS); None where no such rule is taken from the source (CPU)."""
    gc = kr.executor.graph_commit
    if gc is not None:
        return (gc.window_graphs + 1) * (gc.max_nodes + 1)
    if kr.backend == "metal":
        return (10 + 1) * (50 + 1)
    return None


def call_window(items: list, ex, s: int, act: int, all_sums: list | None = None) -> tuple[int, dict]:
    if ex.graph_commit is not None:
        # how far the host runs ahead: the graph-commit cap (exact, from MLX's source); optionally also how
        # far it got in time on one device (the op window measured per chunk size), the smaller winning
        gc = ex.graph_commit
        wmax, wterms = graph_window_max(items, gc.max_nodes, gc.max_mega_elements,
                                          gc.window_graphs, act)
        if gc.op_window_bound:
            w2, t2 = window_max(items, ex.window_for(s), ex.op_weight, ex.view_weight, all_sums=all_sums)
            if w2 < wmax:
                wmax, wterms = w2, t2
    else:
        wmax, wterms = window_max(items, ex.window_for(s), ex.op_weight, ex.view_weight, all_sums=all_sums)
    return wmax, wterms


def held_bytes(p: Profile, states: dict, counts: dict, act: int, q_prev: int, kv_scale: float) -> tuple[int, int]:
    """What the caches hold before a call: ``(cache bytes, state snapshot bytes)``. The full-attention
    caches scaled by ``kv_scale`` (``prefill_peak``'s docstring); a recurrent state that has started keeps a
    snapshot of the previous call's ``q_prev`` queries (conv views) when that call had more than one.
    One function for the exact replay (``prefill``) and the CUDA fit tables (``fast_cuda``), which must agree
    byte for byte."""
    kv = snap = scaled = 0
    for name, sts in states.items():
        for st in sts:
            b = counts[name] * entry_bytes(st.e, st.rows(), act, st.off > 0)
            if st.e.kind in KV_SCALED_KINDS:
                scaled += b
            else:
                kv += b
            if st.e.kind == "state" and st.off > 0 and q_prev > 1:
                snap += counts[name] * state_snapshot_bytes(p, p.layer_types[name], st.e, q_prev, act)
    return kv + scale_up(scaled, kv_scale), snap


def growth_bytes(states: dict, steps: dict, counts: dict, act: int, kv_scale: float) -> int:
    """The rows a call adds to its caches (a recurrent state: its whole size the first time), the
    full-attention ones scaled by ``kv_scale``. Shared by ``prefill`` and ``fast_cuda`` like ``held_bytes``."""
    growth = growth_scaled = 0
    for name, sts in states.items():
        for st, stp in zip(sts, steps[name]):
            e = st.e
            if e.kind == "state":
                add = e.state_bytes(act) if stp.old_rows == 0 else 0
            else:
                add = max(0, stp.new_rows - stp.old_rows) * e.row_elements * act
            if e.kind in KV_SCALED_KINDS:
                growth_scaled += counts[name] * add
            else:
                growth += counts[name] * add
    return growth + scale_up(growth_scaled, kv_scale)


def pinned_bytes(p: Profile, steps: dict, s: int, act: int) -> dict[str, int]:
    """What outlives the window: the residual stream (the layer input, held until the residual add, and
    the running hidden state) and the masks mlx-lm builds once per forward and every layer reads."""
    h = p.hidden_size
    out = {"residual_stream": s * h * act if s > 1 else 0}
    masks = 0
    if s > 1:
        seen: set[tuple[str, int]] = set()
        for name, stps in steps.items():
            lt = p.layer_types[name]
            for e, st in zip(lt.entries, stps):
                if e.kind not in ("full", "sliding", "chunked", "latent"):
                    continue
                mk = "bool" if (traits_of(p.mlx_model_type).mask == "array" or e.kind in ("sliding", "chunked")) else "causal"
                if mk == "bool":
                    key = (e.kind, st.kv_len)
                    if key not in seen:
                        seen.add(key)
                        # create_causal_mask: two int32 aranges, linds >= rinds (bool S x kL); sliding also
                        # (linds < rinds + window) and the & of the two
                        masks += (3 if e.kind == "sliding" else 1) * s * st.kv_len + 4 * (s + st.kv_len)
    out["masks"] = masks
    # state layers' conv inputs, alive until the call's last (lazy) conv-state copies run
    out["conv_inputs"] = deferred_conv_bytes(p, s, act)
    # arrays the item list does not itemize, each a few KiB: per-row norm statistics, RoPE frequency
    # tables, aranges, router indices, scalars (a chunk of 256 tokens has ~10-20 KiB of them live)
    out["small_arrays"] = SMALL_ARRAYS if s > 1 else 0
    return out
