"""How many of a call's items are alive at once: the executor's run-ahead window (``window_max``)
and, on CUDA, the graph commits (``graph_ends``, ``graph_window_max``)."""
from __future__ import annotations

import bisect
from dataclasses import replace
from math import ceil

from .ops.items import Item




class _Live:
    """Bytes live over a span of executor slots: the items the span covers (each item's bytes spread
    evenly over its slots: an op's output exists from the moment the host allocates it) + the ``carry``
    of earlier items whose output is still waiting for a consumer inside the span."""

    def __init__(self, items: list[Item], op_weight: int, view_weight: int):
        self.items = items
        bounds, cum = [0], [0.0]
        b, c = 0, 0.0
        for it in items:
            slots = it.ops * op_weight + it.views * view_weight
            b += slots if slots > 1 else 1
            bounds.append(b)
            c += it.bytes
            cum.append(c)
        self.bounds, self.cum = bounds, cum

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
        bounds = self.bounds
        # only the items that overlap [lo, hi) add anything (the others' overlap is <= 0), in the same order
        first = max(0, bisect.bisect_right(bounds, lo) - 1)
        stop = min(len(self.items), bisect.bisect_left(bounds, hi))
        for i in range(first, stop):
            it = self.items[i]
            a, b = bounds[i], bounds[i + 1]
            ov = min(b, hi) - max(a, lo)
            if ov > 0:
                terms[it.term] = terms.get(it.term, 0.0) + it.bytes * ov / (b - a)
        for i, add in self.carried(lo)[1]:
            k = self.items[i].term + ".carried"
            terms[k] = terms.get(k, 0.0) + add
        return {k: int(round(v)) for k, v in terms.items()}


def carried_per_item(items: list[Item]) -> list[float]:
    """``_Live.carried`` of a window starting inside each item, for every item in one pass: the same additions
    in the same order (items j-8 .. j-2 whose carry reaches j, then item j-1's output and carry). One rule for
    ``window_max`` and the CUDA fit bounds (``peak.fast_cuda``), which must agree with it byte for byte."""
    n = len(items)
    out_of = [it.bytes if it.out < 0 else it.out for it in items]
    carry = [it.carry for it in items]
    reach = [i + it.carry_items for i, it in enumerate(items)]
    if n >= _NUMPY_CARRIED:
        return _carried_numpy(out_of, carry, reach)
    carried = [0.0] * n
    carriers = [i for i in range(n) if carry[i]]
    nc, p0 = len(carriers), 0
    for j in range(1, n):
        c = 0.0
        while p0 < nc and carriers[p0] < j - 8:
            p0 += 1
        p = p0
        while p < nc and carriers[p] < j - 1:
            i = carriers[p]
            if reach[i] >= j:
                c += carry[i]
            p += 1
        add = out_of[j - 1]
        if carry[j - 1] and reach[j - 1] >= j:
            add += carry[j - 1]
        if add:
            c += add
        carried[j] = c
    return carried


#: From this many items ``carried_per_item`` runs in numpy (a GDN call on CUDA: ~2,800 items, ~1 ms in the loop, a
#: few hundred such calls per offset's bucket bounds and per prefix table).
_NUMPY_CARRIED = 64


def _carried_numpy(out_of: list, carry: list, reach: list) -> list[float]:
    """``carried_per_item``'s loop over every item at once (``carried_array``), as a list."""
    return carried_array(out_of, carry, reach).tolist()


def carried_array(out_of, carry, reach):
    """``carried_per_item``'s loop over every item at once, with the same float additions in the same order, from
    the items' outputs (``bytes`` where ``out < 0``), carries and carry reaches (``i + carry_items``), as lists or
    arrays: for each ``j`` the carries of items ``j - 8 .. j - 2`` that reach ``j`` (ascending; a carry that does not
    reach adds ``0.0``, which leaves a sum unchanged), then item ``j - 1``'s output plus its carry where it reaches
    ``j``, where that is not 0. Byte counts are integers below 2**53 (exact as float64), so ``out + carry`` is the
    loop's integer sum. Checked against the loop on generated items (tests/test_speed_paths.py). ``peak.fast_cuda``
    calls it with arrays it indexes per distinct item (no per-item attribute reads)."""
    import numpy as np

    o = np.asarray(out_of, dtype=np.float64)
    n = len(o)
    cy = np.asarray(carry, dtype=np.float64)
    rc = np.asarray(reach, dtype=np.int64)
    j = np.arange(n)
    c = np.zeros(n)
    if not n:
        return c
    for d in range(8, 1, -1):
        i = np.maximum(j - d, 0)
        c = c + np.where((j - d >= 0) & (cy[i] != 0) & (rc[i] >= j), cy[i], 0.0)
    i = np.maximum(j - 1, 0)
    add = o[i] + np.where((cy[i] != 0) & (rc[i] >= j), cy[i], 0.0)
    c = np.where(add != 0, c + add, c)
    c[0] = 0.0
    return c


def window_max(items: list[Item], window: int, op_weight: int = 1, view_weight: int = 0, *,
               all_sums: list | None = None) -> tuple[int, dict[str, int]]:
    """Max over windows of ``window`` executor slots of the bytes live there (``_Live``).

    The sum is piecewise linear in the window's position between item boundaries, so the maximum has an
    edge on a boundary: every boundary is tried as the window's start and as its end. Returns the max and
    the per-term bytes of that window. ``all_sums``: when given, the ``{window start: bytes}`` of every
    position tried is appended to it (the fast path builds its envelope from them; passed in, never a global).
    """
    if not items:
        return 0, {}
    live = _Live(items, op_weight, view_weight)
    w, best_lo = _scan(live, carried_per_item(items), window, all_sums)
    out = live.terms(best_lo, best_lo + w)
    return sum(out.values()), out


def window_sums(items: list[Item], windows: list[tuple[int, int, int]], all_sums: list) -> None:
    """``window_max``'s ``all_sums`` for each window ``(slots, op weight, view weight)`` in turn, without the
    terms of the largest (``peak.fast_lines`` samples only the sums: the terms were a fifth of a line's cost) and
    with one ``carried_per_item`` (and one ``_Live`` per weight pair) for all the windows: the same sums."""
    if not items:
        return
    carried = carried_per_item(items)
    lives: dict[tuple[int, int], _Live] = {}
    for window, ow, vw in windows:
        live = lives.get((ow, vw))
        if live is None:
            live = lives[ow, vw] = _Live(items, ow, vw)
        _scan(live, carried, window, all_sums)


def _scan(live: _Live, carried: list[float], window: int, all_sums: list | None) -> tuple[float, float]:
    """(window width, start of the largest window) over ``live``'s items; every sum tried into ``all_sums``."""
    # ``live.sum(lo, lo + w)`` inlined, with the same float operations in the same order (the golden estimates
    # are byte-identical): this loop is most of an estimate's time. ``carried(lo)`` depends only on the item
    # ``j`` that contains ``lo`` (every item it visits ends at or before ``lo``), so it is computed once per j.
    # (a window starting at lo = b[idx] has j = idx; lo < total, so j < n)
    items = live.items
    b, cum, n = live.bounds, live.cum, len(items)
    total, last = b[-1], live.cum[-1]
    w = min(window, total)
    size = [it.bytes for it in items]
    if n >= _NUMPY_SCAN and w > 0:
        got = _scan_numpy(b, cum, size, carried, w)
        if got is not None:
            sums, best_lo = got
            if all_sums is not None:
                all_sums.append(sums)
            return w, best_lo

    bisect_right = bisect.bisect_right
    best, best_lo = -1.0, 0.0
    sums: dict[float, float] = {}
    # the windows starting on a boundary b[idx] (upto(lo) = cum[idx]) and ending on one (upto(hi) = cum[idx]):
    # interpolating at a boundary adds exactly 0.0, so only the other end needs a search
    for idx, bnd in enumerate(b):
        lo = bnd
        if lo + w <= total and lo not in sums:
            hi = lo + w
            k = bisect_right(b, hi) - 1
            up_hi = last if k >= n else cum[k] + size[k] * (hi - b[k]) / (b[k + 1] - b[k])
            v = up_hi - cum[idx] + carried[idx]
            sums[lo] = v
            if v > best:
                best, best_lo = v, lo
        lo = bnd - w
        if lo >= 0 and lo not in sums:
            j = bisect_right(b, lo) - 1
            up_lo = cum[j] + size[j] * (lo - b[j]) / (b[j + 1] - b[j])
            v = cum[idx] - up_lo + carried[j]
            sums[lo] = v
            if v > best:
                best, best_lo = v, lo
    if all_sums is not None:
        all_sums.append(sums)
    return w, best_lo


#: From this many items ``_scan`` runs in numpy (a call of a few hundred items on CPU / Metal: every estimate there).
_NUMPY_SCAN = 64


def _scan_numpy(b: list, cum: list, size: list, carried: list, w: int):
    """``_scan``'s loop over every boundary at once: ``({window start: bytes}, start of the largest)`` with the same
    float operations per window, the same windows in the same order, the first of equal maxima; ``None`` where a
    product ``size * slots`` could pass 2**53 (then numpy's float product is not Python's exact integer one: the
    loop decides). The loop tries, per boundary in order, the window starting there (while it ends by the total)
    and the one ending there (while it starts at or after 0), each start once: the boundaries rise, so a start tried
    twice is a window ending at a boundary that another starts at, tried first as that start. Checked against the
    loop on generated items (tests/test_speed_paths.py)."""
    import numpy as np

    n = len(size)
    B = np.asarray(b, dtype=np.int64)
    C = np.asarray(cum, dtype=np.float64)
    S = np.asarray(size, dtype=np.float64)
    R = np.append(np.asarray(carried, dtype=np.float64), 0.0)  # (a window starting at the total is never tried)
    total = b[-1]
    hi = B + w
    k = np.searchsorted(B, hi, side="right") - 1
    kk = np.minimum(k, n - 1)
    d_hi = hi - B[kk]
    lo = B - w
    j = np.maximum(np.searchsorted(B, lo, side="right") - 1, 0)
    jj = np.minimum(j, n - 1)
    d_lo = lo - B[jj]
    if max(float(np.max(np.abs(S[kk] * d_hi))), float(np.max(np.abs(S[jj] * d_lo)))) >= 2.0 ** 52:
        return None
    up_hi = np.where(k >= n, C[-1], C[kk] + S[kk] * d_hi / (B[kk + 1] - B[kk]))
    v_start = up_hi - C + R
    up_lo = C[jj] + S[jj] * d_lo / (B[jj + 1] - B[jj])
    v_end = C - up_lo + R[jj]
    ok_start = hi <= total
    ok_end = (lo >= 0) & ~np.isin(lo, B)
    keys = np.empty(2 * len(B), dtype=np.int64)
    keys[0::2], keys[1::2] = B, lo
    vals = np.empty(2 * len(B))
    vals[0::2], vals[1::2] = v_start, v_end
    ok = np.empty(2 * len(B), dtype=bool)
    ok[0::2], ok[1::2] = ok_start, ok_end
    keys, vals = keys[ok], vals[ok]
    sums = dict(zip(keys.tolist(), vals.tolist()))
    g = int(np.argmax(vals))
    return sums, (int(keys[g]) if vals[g] > -1.0 else 0.0)


def graph_ends(items: list[Item], max_nodes: int, max_mega_elements: int, act: int) -> list[float]:
    """Where MLX's CUDA backend commits a CUDA graph while it encodes ``items`` (in executor slots, one
    per op): after any op that takes the graph past ``max_nodes`` kernel nodes
    (``node_count_ > max_ops``) or past ``max_mega_elements`` Mi-elements of kernel inputs
    (``(bytes_in_graph_ >> 20) > max_mb``; ``set_input_array`` adds ``data_size()``, elements not bytes,
    once per kernel that reads the array). An item's nodes and input elements are spread evenly over its
    ops. The encoding of a chunk ends with a commit (``finalize``).

    Speed (the CUDA replay's inner loop: golden's and every CUDA request's CPU): a call's layers share their
    item objects, so each distinct item's per-op counts are worked out once (``_commit_counts``); an item that
    ends no graph (its whole nodes and elements keep both counters below their limits, with a margin far above
    rounding) is added in one step, with the same float additions the op-by-op walk makes for it
    (``need * npo`` with ``need = ops``); every other item takes the walk (``_commit_walk``)."""
    el_limit = (max_mega_elements + 1) << 20
    node_limit = max_nodes + 1 - 1e-9
    node_safe = max_nodes + 1 - _COMMIT_MARGIN  # below it the walk's ``need`` is the whole item, no limit reached
    m1 = max_nodes + 1
    ends: list[float] = []
    pos = 0.0
    n_nodes = 0.0
    n_el = 0.0
    memo: dict[int, tuple] = {}
    get = memo.get
    for it in items:
        c = get(id(it))
        if c is None:
            c = memo[id(it)] = _commit_counts(it, act)
        ops, npo, even, per_op, whole_n, whole_e = c
        if per_op is not None:
            pos, n_nodes, n_el = _commit_walk(ends, ops, npo, even, per_op, pos, n_nodes, n_el, max_nodes, node_limit,
                                              el_limit)
            continue
        nn = n_nodes + whole_n
        ne = n_el + whole_e
        if nn < node_safe and ne < el_limit:
            n_nodes, n_el = nn, ne
            pos += ops
            continue
        # ``_commit_walk``'s evenly spread branch, inline (a GDN call walks ~3,000 items; the same operations)
        left = ops
        while left > 0:
            need = left
            if npo > 0:
                k = ceil((m1 - n_nodes) / npo - 1e-9)
                if k < need:
                    need = k if k > 1 else 1
            if even > 0:
                k = ceil((el_limit - n_el) / even - 1e-9)
                if k < need:
                    need = k if k > 1 else 1
            if n_nodes == 0.0 and n_el == 0.0 and need < left:
                a, b = need * npo, need * even
                if a >= node_limit or b >= el_limit:  # every full graph of the rest of the item: this step
                    t = left // need
                    ends.extend([pos + need * i for i in range(1, t + 1)])
                    pos += need * t
                    left -= need * t
                    continue
            n_nodes += need * npo
            n_el += need * even
            pos += need
            left -= need
            if n_nodes >= node_limit or n_el >= el_limit:
                ends.append(pos)
                n_nodes = n_el = 0.0
    if not ends or ends[-1] < pos:
        ends.append(pos)
    return ends


#: Nodes below the limit under which ``graph_ends`` adds an item in one step (far above float rounding: the walk's
#: ``ceil(... - 1e-9)`` can only give the whole item there). tests/test_speed_paths.py sets it to infinity (every
#: item walked) and compares.
_COMMIT_MARGIN = 1e-6


def _commit_counts(it: Item, act: int) -> tuple:
    """One item's counts for ``graph_ends``: ``(ops, nodes per op, elements per op where spread evenly, elements per
    op where given, the whole item's nodes and even elements as the walk adds them in one step)``."""
    ops = max(1, it.ops)
    nodes = it.nodes if it.nodes >= 0 else it.ops
    per_op = it.elems if isinstance(it.elems, tuple) and len(it.elems) == ops else None
    even = 0.0 if per_op else (it.elems or it.bytes // max(act, 1)) / ops
    npo = nodes / ops
    return ops, npo, even, per_op, ops * npo, ops * even


def _commit_walk(ends: list, ops: int, npo: float, even: float, per_op, pos: float, n_nodes: float, n_el: float,
                 max_nodes: int, node_limit: float, el_limit: int) -> tuple[float, float, float]:
    """``graph_ends`` over one item op by op (or straight to the op that crosses a limit); appends the ends.

    A graph that starts inside an evenly spread item (both counters 0 after a commit) takes the same step every time
    while the item lasts: the same ``need`` from the same zero counters, the same products, the same test. Where that
    step ends a graph, its repeats are added at once (``ends`` an arithmetic run of integer-valued floats, exact below
    2**53), the same floats the op-by-op loop appends. Why: a gated-DeltaNet call's recurrence items end a graph every
    ~25-100 ops, 5-7 times an item; this loop was most of a CUDA full call's exact replay (session 13)."""
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
            if n_nodes == 0.0 and n_el == 0.0 and need < left:
                a, b = need * npo, need * epo  # 0.0 + x == x: the loop's sums from zero counters
                if a >= node_limit or b >= el_limit:
                    t = left // need  # every one of these steps is this one (need <= left throughout)
                    ends.extend([pos + need * i for i in range(1, t + 1)])
                    pos += need * t
                    left -= need * t
                    continue
        n_nodes += need * npo
        n_el += need * epo
        pos += need
        left -= need
        if n_nodes >= node_limit or n_el >= el_limit:
            ends.append(pos)
            n_nodes = n_el = 0.0
    return pos, n_nodes, n_el


def split_ops(items: list[Item]) -> list[Item]:
    """Items with ``op_bytes`` as one item per op, so a window edge inside the item counts what each op
    really allocated. Each op's output stays alive until the item's last op has run (``carry``); the last
    op keeps the item's own ``out`` / ``carry`` (its final output's consumer is the next item). Each distinct
    item (a call's layers share theirs) is split once; its occurrences share the split items (equal values)."""
    out: list[Item] = []
    memo: dict[int, list[Item] | None] = {}
    get = memo.get
    append, extend = out.append, out.extend
    for it in items:
        k = id(it)
        parts = get(k, _UNSPLIT)
        if parts is _UNSPLIT:
            parts = memo[k] = _split_one(it)
        if parts is None:
            append(it)
        else:
            extend(parts)
    return out


_UNSPLIT = object()


def split_item(it: Item) -> list[Item]:
    """``split_ops([it])``."""
    return _split_one(it) or [it]


def _split_one(it: Item) -> list[Item] | None:
    """``split_ops`` of one item: its per-op items, or ``None`` where it stays whole."""
    n = max(1, it.ops)
    if not it.op_bytes or len(it.op_bytes) != n or n == 1:
        return None
    nodes = it.nodes if it.nodes >= 0 else it.ops
    el = it.elems if isinstance(it.elems, tuple) and len(it.elems) == n else ((it.elems or 0) // n,) * n
    out = []
    for k, b in enumerate(it.op_bytes):
        if k == n - 1:
            out.append(Item(it.term, b, 1, 0, carry=it.carry, carry_items=it.carry_items,
                            out=it.bytes if it.out < 0 else it.out, elems=el[k], nodes=nodes / n))
        else:
            out.append(Item(it.term, b, 1, 0, carry=b, carry_items=n - 1 - k, out=0, elems=el[k], nodes=nodes / n))
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

    Where the call commits at most ``inflight + 1`` graphs, the last window runs from the call's first op to
    its last: every byte the call allocates, whatever graph each op lands in. Then an item's
    ``placement_margin`` (bytes charged only as a bound against the replay ending graphs elsewhere than MLX
    does, e.g. CUDA's donated residual adds) cannot cover anything and is dropped: a real run can only hold
    less than the whole call, in any placement.
    """
    if not items:
        return 0, {}
    items = split_ops(items)
    ends = graph_ends(items, max_nodes, max_mega_elements, act)
    if len(ends) <= inflight + 1 and any(it.placement_margin for it in items):
        items = [_without_margin(it) if it.placement_margin else it for it in items]
    live = _Live(items, 1, 0)
    starts = [0.0] + ends[:-1]
    if len(ends) < 64:
        best, best_w = -1.0, (0.0, 0.0)
        for g, hi in enumerate(ends):
            lo = starts[max(0, g - inflight)]
            v = live.sum(lo, hi)
            if v > best:
                best, best_w = v, (lo, hi)
    else:  # ``live.sum`` of every graph's window at once (a gated-DeltaNet chunk: thousands of graphs)
        best_w = _best_window(live, items, starts, ends, inflight)
    out = live.terms(*best_w)
    return sum(out.values()), out


def _without_margin(it: Item) -> Item:
    """The item as allocated: ``placement_margin`` bytes fewer; its final output (``out``) is still the one it
    wrote (in place, for a donated residual add)."""
    return replace(it, bytes=it.bytes - it.placement_margin, out=it.bytes if it.out < 0 else it.out,
                   placement_margin=0)


def _best_window(live: _Live, items: list[Item], starts: list[float], ends: list[float],
                 inflight: int) -> tuple[float, float]:
    """The first window of largest ``live.sum(lo, hi)`` over the graphs (``graph_window_max``'s loop), in numpy:
    the same float operations in the same order per window (``upto`` interpolated in the item that holds the edge,
    ``carried_per_item`` of the item a window starts in: ``_Live.carried``'s additions), so the same window wins
    (checked against the loop on every model kind's calls: tests/test_fits_cuda.py). Qwen3.5-35B-A3B on CUDA,
    chunk 2048: ~4,400 graphs a call, 185 -> ~40 ms."""
    import numpy as np

    b = np.asarray(live.bounds, dtype=np.float64)
    cum = np.asarray(live.cum, dtype=np.float64)
    size = np.asarray([it.bytes for it in items], dtype=np.float64)
    n = len(items)
    carried = np.asarray(carried_per_item(items), dtype=np.float64)
    hi = np.asarray(ends, dtype=np.float64)
    lo = np.asarray(starts, dtype=np.float64)[np.maximum(np.arange(len(ends)) - inflight, 0)]

    def upto(x):
        j = np.searchsorted(b, x, side="right") - 1
        jj = np.minimum(j, n - 1)
        v = cum[jj] + size[jj] * (x - b[jj]) / (b[jj + 1] - b[jj])
        return np.where(j < n, v, cum[-1]), jj

    up_hi, _ = upto(hi)
    up_lo, j_lo = upto(lo)
    g = int(np.argmax(up_hi - up_lo + carried[j_lo]))
    return float(lo[g]), float(hi[g])
