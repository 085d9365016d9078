"""The vocabulary of the transient model: an ``Item`` (what consecutive ops allocate), one cache
entry's rows during a call (``EntryStep``), the call's context, and the cost of an ``mx.fast`` op."""
from __future__ import annotations

from dataclasses import dataclass

from ..kernels import KernelRoutes


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
    placement_margin: int = 0  # bytes of ``bytes`` the op does NOT allocate, charged as a bound against CUDA graph
    # placement (executor.graph_window_max drops them where every graph of the call is inside the window)
    grows: bool = False  # ``ops`` and ``nodes`` grow with the call's query count and every op is alike (a per-token
    # loop's span): the CUDA fit bounds (``peak.fast_cuda``) may compare two calls whose counts differ here


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


def fast_op(ctx: CallContext, op: str, input_bytes: int, count: int = 1, weight: int = 0,
          donates: bool = False) -> Item:
    # ``input_bytes`` is the total over the ``count`` calls (q and k: two rope calls); ``weight``: the
    # norm weight's elements per call
    """An ``mx.fast`` op (rms_norm, rope): one fused kernel writing its output, or the backend's
    decomposition (``fast_ops`` in the kernel table: peak in units of the input bytes, op count).

    ``donates``: the input is an op's output that nothing else reads, so the fused kernel writes in place
    (``RMSNorm::eval_gpu``: ``if (x.is_donatable()) out.copy_shared_buffer(x)``) and allocates nothing:
    Gemma's post-attention / post-feed-forward norms, and on CUDA Qwen3-style per-head q/k norms of a
    reshaped projection (a reshape shares the buffer without holding it). Measured on the H200 inside a
    model's graph (probe_donation_s7.py): 0 bytes for both; an input still referenced elsewhere gets a new
    output. (The session-3 single-op probe saw the q_norm case allocate: its operand had just been returned
    by ``mx.eval``, whose Synchronizer holds it until MLX's worker thread runs.)"""
    elems = input_bytes // ctx.act + weight * count
    donates = donates and not ctx.bound
    cost = getattr(ctx.routes.fast_ops, op, None)
    if cost is None:
        return Item(op, 0 if donates else input_bytes, count, elems=elems)
    mult = cost.transient.get(ctx.dtype, cost.transient.get("fp32", 1.0))
    ops = cost.ops_half if (ctx.dtype != "fp32" and cost.ops_half) else cost.ops
    return Item(op, int(input_bytes * mult), ops * count, cost.views * count, out=input_bytes, elems=elems)


def residual(ctx: CallContext, S: int, h: int) -> Item:
    """The block's residual add ``h = x + r`` of ``S`` rows of width ``h``. Where the backend donates a
    single-use operand to it (``donation.residual_add``: MLX CUDA, set_binary_op_output_data) it writes into
    ``r``, the sublayer's output nothing else reads, and allocates nothing; its output (that buffer) is still
    alive for the next item (``out``). The graph-commit counters keep its kernel (``ops``, ``elems``).

    Where the backend donates but the bytes are still charged as a bound against graph placement
    (``donation.residual_add_whole_call``: CUDA), they are the item's ``placement_margin``: the CUDA window
    drops them when it holds every graph of the call (``executor.graph_window_max`` says why that is safe)."""
    b = S * h * ctx.act
    d = ctx.routes.donation
    if d.residual_add and not ctx.bound:
        return Item("residual", 0, 1, out=b, elems=2 * S * h)
    margin = b if d.residual_add_whole_call and not ctx.bound else 0
    return Item("residual", b, 1, elems=2 * S * h, placement_margin=margin)
