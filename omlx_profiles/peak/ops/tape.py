"""Where a decomposed ``mx.fast`` op's bytes sit among its executor slots, on a backend that runs RMSNorm and RoPE as
several ordinary ops (MLX's CPU backend): one layer's items split where the kernel table says their ops allocate.

Why: the run-ahead window (``peak.executor``) counts what the ops of ~113 consecutive dispatches allocate; an item's
bytes are otherwise spread evenly over its slots. The exact CPU-executor replay (benchmarks/cpu_replay/, session 12
and 13) shows the real shape: an RMSNorm allocates 4/7 of its bytes in its first two ops (the fp32 copy and its
square), nothing in the next seven slots, the rest at its end; and MLX's tape, a breadth-first walk from the
outputs run in reverse, runs a per-head q/k norm and the RoPE that reads it interleaved: both norms' first ops,
the zero-byte ops of both (statistics, RoPE's frequency arithmetic), then the norms' tails, RoPE's tables,
products and concatenation right before the cache update and SDPA. With the bytes spread evenly the window at the
score matmul missed 1.7 MB of qwen3 head_dim 256's 13.4 MB peak there, and over-counted the windows after SDPA.
"""
from __future__ import annotations

from dataclasses import replace

from .items import CallContext, Item


def placed(ctx: CallContext, items: list[Item]) -> list[Item]:
    """``items`` with every decomposed RMSNorm split by the kernel table's ``placement`` and every such norm whose
    output RoPE reads next merged with it (``norm_rope_tail_dispatches``); carries re-aimed at the same items.
    Unchanged where the table has no placement (fused kernels) or for the worst-case items."""
    fo = ctx.routes.fast_ops
    cost = fo.rms_norm
    if ctx.bound or cost is None or ctx.dtype not in cost.placement:
        return items
    parts = cost.placement[ctx.dtype]
    per = (sum(p[0] for p in parts), sum(p[1] for p in parts))
    new: list[Item] = []
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(items):
        it = items[i]
        calls = _calls(it, per)
        a = len(new)
        if calls and fo.norm_rope_tail_dispatches and i + 1 < len(items) and _decomposed_rope(ctx, items[i + 1]):
            new += _norm_then_rope(it, items[i + 1], parts, calls, fo.norm_rope_tail_dispatches // 2)
            spans += [(a, len(new) - 1), (len(new) - 1, len(new))]
            i += 2
            continue
        if _decomposed_rope(ctx, it) and it.carry and it.out >= 0:
            it = replace(it, out=max(0, it.out - it.carry))  # q's rotated output is the carry, not also the output
        new += _split(it, parts, calls) if calls else [it]
        spans.append((a, len(new)))
        i += 1
    if len(new) == len(items):
        return items
    # a carry that reached original item j now reaches j's last piece
    for k, (a, b) in enumerate(spans):
        last = new[b - 1]
        if last.carry and last.carry_items:
            t = k + last.carry_items
            end = spans[t][1] - 1 if t < len(spans) else len(new) - 1 + (t - len(spans) + 1)
            new[b - 1] = replace(last, carry_items=end - (b - 1))
    return new


def _calls(it: Item, per: tuple[int, int]) -> int:
    """How many norm calls the item is (q and k: two), 0 where it is not a decomposed norm of this shape."""
    if it.term != "rms_norm" or it.bytes <= 0 or not per[0] or it.ops % per[0]:
        return 0
    c = it.ops // per[0]
    return c if it.views == c * per[1] else 0


def _decomposed_rope(ctx: CallContext, it: Item) -> bool:
    return it.term == "rope" and ctx.routes.fast_ops.rope is not None and it.bytes > 0


def _shares(total: int, weights: list[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` (integers summing to ``total``: the rest on the last share)."""
    w = sum(weights)
    out = [int(total * x / w) for x in weights[:-1]]
    return out + [total - sum(out)]


def _split(it: Item, parts, calls: int) -> list[Item]:
    """The norm's ``calls`` calls run part by part (the calls of one item run together, as the tape runs q's and
    k's norms level by level); the item's output (``out``) and carry stay on its last piece."""
    sizes = _shares(it.bytes, [p[2] for p in parts])
    out = [Item(it.term, b, p[0] * calls, p[1] * calls, out=b) for p, b in zip(parts, sizes)]
    out[-1] = replace(out[-1], out=it.out if it.out >= 0 else it.bytes, carry=it.carry, carry_items=it.carry_items)
    return [x for x in out if x.ops or x.views] or [it]


def _norm_then_rope(norm: Item, rope: Item, parts, calls: int, tail_ops: int) -> list[Item]:
    """A norm and the RoPE reading it: the norm's first part, then every other slot of both with no bytes, then
    the norm's remaining bytes and RoPE's over the last ``tail_ops`` ops. The norm's output waits for RoPE's
    products inside that tail (``carry`` of the middle piece); RoPE's own output and carry stay on the tail."""
    first = parts[0]
    early = _shares(norm.bytes, [first[2], sum(p[2] for p in parts[1:])])[0]
    ops = norm.ops + rope.ops
    views = norm.views + rope.views
    tail_ops = min(tail_ops, ops - first[0] * calls - 1)
    head = Item(norm.term, early, first[0] * calls, first[1] * calls, out=early)
    mid_ops = ops - head.ops - tail_ops
    mid = Item(norm.term, 0, mid_ops, views - head.views, out=0, carry=norm.out if norm.out >= 0 else norm.bytes,
               carry_items=1)
    r_out = rope.out if rope.out >= 0 else rope.bytes
    tail = Item(rope.term, norm.bytes - early + rope.bytes, tail_ops, 0, out=max(0, r_out - rope.carry),
                carry=rope.carry, carry_items=rope.carry_items)
    return [head, mid, tail]
