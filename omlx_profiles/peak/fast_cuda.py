"""Per-request fit checks on CUDA in microseconds: the exact full-chunk calls once, the rest bounded.

MLX's CUDA backend commits a graph every ~100 kernel nodes or ~1 Gi input elements and keeps up to 11 in
flight (``executor.graph_window_max``), so where the live window's edges fall moves with the call's query
count and offset: no line in the prompt length holds (``peak.fast`` answers CUDA with the exact replay,
13-290 ms a request). But without a cached prefix a prompt of ``N`` tokens makes ``k = (N-1) // c`` full
calls of ``c`` queries at offsets ``0, c, ..., (k-1)c`` whose caches and items do not depend on ``N``:
each one's exact total is computed once per chunk size (``prepare``), and the exact replay's maximum over
the full calls it evaluates is a table look-up. The only calls that depend on ``N`` are the shorter call
(``r = (N-1) % c`` queries at offset ``k c``) and the last token; ``CudaFit.bounds`` gives

* a lower bound: the full calls' part of the exact replay (exact);
* an upper bound: that, or a bound of the shorter call and of the last token where they may be higher
  (see ``_Buckets``), whichever is larger.

Where the two meet the verdict is exact; between them ``Estimator.fits`` replays.
"""
from __future__ import annotations

import bisect

import numpy as np

from ..errors import UnsupportedError
from ..kv.replay import MAX_CALLS, STEP
from ..registry.profile import Profile
from .call import activation_dtype, call_window, items_of_call, pinned_bytes, run_ahead_ops, validate_profile
from .executor import window_max
from .kernels import KernelRoutes, tiled_state
from .ops.recurrent import state_snapshot_bytes
from .replay import KV_SCALED_KINDS, EntryState, entry_bytes, scale_up


class CallWalk:
    """The calls of a prompt without a prefix, stepped one at a time as ``prefill._prefill_peak`` steps
    them (the same cache replay, the same held / growth bytes, ``call_peak`` for a call's total), so a
    caller can evaluate any call it wants: its totals are the exact replay's per-call totals."""

    def __init__(self, profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None, nax: bool,
                 kv_scale: float, worst: str | None):
        validate_profile(profile)
        self.p = profile
        self.kr = routes
        self.dt, self.act = activation_dtype(profile, dtype)
        self.nax = nax
        self.kv_scale = kv_scale
        self.worst = worst
        self.window = routes.executor.window_for(chunk)
        self.tiled = tiled_state()[1]
        self.counts: dict[str, int] = {}
        for n in profile.layer_names:
            self.counts[n] = self.counts.get(n, 0) + 1
        self.reset()

    def reset(self) -> None:
        self.states = {name: [EntryState(e) for e in lt.entries] for name, lt in self.p.layer_types.items()}
        self.offset = 0
        self.q_prev = 0
        self.ci = 0

    def clone(self) -> "CallWalk":
        """An independent copy at the same call (the caches' states copied)."""
        import copy

        c = copy.copy(self)
        c.states = copy.deepcopy(self.states)
        return c

    def held(self) -> tuple[int, int]:
        kv = snap = scaled = 0
        p, act, counts, q_prev = self.p, self.act, self.counts, self.q_prev
        for name, sts in self.states.items():
            for st in sts:
                b = counts[name] * entry_bytes(st.e, st.rows(), act, st.off > 0)
                if st.e.kind in KV_SCALED_KINDS:
                    scaled += b
                else:
                    kv += b
                if st.e.kind == "state" and st.off > 0 and q_prev > 1:
                    snap += counts[name] * state_snapshot_bytes(p, p.layer_types[name], st.e, q_prev, act)
        return kv + scale_up(scaled, self.kv_scale), snap

    def step(self, s: int, *, evaluate: bool, last: bool = False) -> tuple[int | None, frozenset]:
        """Run the next call (``s`` queries); returns its exact total (``None`` unless ``evaluate``) and
        the layer types whose caches it changed (the replay evaluates the last such call it skipped)."""
        if not evaluate:
            grew = self._advance(s)[3]
            self._moved(s)
            return None, grew
        base, variants, grew = self.parts(s, last)
        return base + max(self.window_of(v, s) for v in variants), grew

    def _advance(self, s: int):
        kv_before, snap_before = self.held()
        steps = {name: tuple(st.step(s) for st in sts) for name, sts in self.states.items()}
        grew = frozenset(name for name, stps in steps.items() if any(
            stp.new_rows != stp.old_rows or stp.zero_rows or stp.trim_rows for stp in stps))
        return kv_before, snap_before, steps, grew

    def _moved(self, s: int) -> None:
        self.offset += s
        self.q_prev = s
        self.ci += 1

    def parts(self, s: int, last: bool = False):
        """Run the next call and return what ``call_peak`` adds up, split in two: the bytes outside the
        executor window (held before, rows added, state snapshot, pinned) and, per model variant (the op
        model, and its worst case where the basis is not ``measured``), ``(worst, items)``; and the layer
        types whose caches it changed."""
        kv_before, snap_before, steps, grew = self._advance(s)
        act = self.act
        growth = growth_scaled = 0
        for name, sts in self.states.items():
            for st, stp in zip(sts, steps[name]):
                e = st.e
                if e.kind == "state":
                    add = e.state_bytes(act) if stp.old_rows == 0 else 0
                else:
                    add = max(0, stp.new_rows - stp.old_rows) * e.row_elements * act
                if e.kind in KV_SCALED_KINDS:
                    growth_scaled += self.counts[name] * add
                else:
                    growth += self.counts[name] * add
        growth += scale_up(growth_scaled, self.kv_scale)
        base = kv_before + growth + snap_before + sum(pinned_bytes(self.p, steps, s, act).values())
        variants = []
        for worst in (None, self.worst) if self.worst else (None,):
            _, items = items_of_call(self.p, s, self.offset, steps, self.kr, self.tiled, self.dt, act, self.nax,
                                     last=last, direct=False, bound=worst == "bound")
            variants.append((worst, items))
        self._moved(s)
        return base, variants, grew

    def window_of(self, variant, s: int) -> int:
        """The exact window term of one variant of a call of ``s`` queries (``call_peak``'s)."""
        worst, items = variant
        w, _ = call_window(items, self.kr.executor, s, self.act)
        if worst:
            w2, _ = window_max(items, run_ahead_ops(self.kr), 1, 0)
            if w2 > w:
                w = w2
        return w

    def window_bound(self, variant, op_elems) -> int:
        """An upper bound of the window term of every call whose items lie between ``op_elems``' call and
        this variant's items (``free_graph_window``; the worst case's run-ahead window is already free of
        graph starts: a larger item never lowers it)."""
        worst, items = variant
        gc = self.kr.executor.graph_commit
        w = free_graph_window(items, gc.max_nodes, gc.max_mega_elements, gc.max_inflight_graphs + gc.margin_graphs,
                              self.act, op_elems)
        if worst:
            w2, _ = window_max(items, run_ahead_ops(self.kr), 1, 0)
            if w2 > w:
                w = w2
        return w

def op_elements(items: list, act: int) -> np.ndarray:
    """Per executor op, the input elements ``graph_ends`` counts for it once ``split_ops`` has split the items
    (an item with per-op bytes becomes one item per op, each with its share of the elements -- or, where the
    item gives none, its own bytes' worth)."""
    parts = []
    for it in items:
        n = max(1, it.ops)
        e = it.elems
        if it.op_bytes and len(it.op_bytes) == n and n > 1:
            el = e if isinstance(e, tuple) and len(e) == n else ((e or 0) // n,) * n
            parts.append(np.array([x if x else b // max(act, 1) for x, b in zip(el, it.op_bytes)], dtype=np.float64))
        elif isinstance(e, tuple) and len(e) == n:
            parts.append(np.asarray(e, dtype=np.float64))
        else:
            parts.append(np.full(n, (e or it.bytes // max(act, 1)) / n))
    return np.concatenate(parts) if parts else np.zeros(0)


def free_graph_window(items: list, max_nodes: int, max_mega_elements: int, inflight: int, act: int,
                      op_elems: np.ndarray | None = None) -> int:
    """An upper bound of ``executor.graph_window_max`` over the same items that does not need to know where
    the graphs start: the live bytes from ANY op position ``x`` to the end of the ``inflight + 1``-th graph
    a chain started at ``x`` would commit.

    Why it holds: a graph that starts at ``x`` ends at the first op that takes its kernel nodes past
    ``max_nodes`` or its input elements past the limit (``graph_ends``' rule), so its end ``G(x)`` only
    moves right as ``x`` does (nodes and elements are never negative). The real chain starts at one such
    ``x`` (a graph start, or 0) and its next ends are ``G(x), G(G(x)), ...``; the window the model takes for
    graph ``g`` runs from the start of graph ``g - inflight`` to the end of ``g``, i.e. from some chain
    start ``x`` to at most ``G^(inflight+1)(x)``, and the live bytes of a span only grow with its end. Both
    thresholds are taken a hair high (a float sum that lands on one ends a real graph there; here one op
    later at most), and each term's rounding is covered by 1 B per item.

    ``op_elems``: per op, the input elements to count instead of the items' own (``op_elements`` of another
    call of the same structure; fewer elements end graphs later: a query bucket's smallest call)."""
    from .executor import _Live, split_ops

    if not items:
        return 0
    n_ops = np.array([max(1, it.ops) for it in items], dtype=np.int64)
    nodes = np.array([it.nodes if it.nodes >= 0 else it.ops for it in items], dtype=np.float64)
    per_node = np.repeat(nodes / n_ops, n_ops)
    per_el = op_elements(items, act) if op_elems is None else op_elems
    items = split_ops(items)
    live = _Live(items, 1, 0)
    m = len(items)
    ops = np.diff(np.asarray(live.bounds, dtype=np.int64))
    byts = np.array([it.bytes for it in items], dtype=np.float64)
    per_byte = np.repeat(byts / ops, ops)
    total = int(per_node.size)
    node_cum = np.concatenate(([0.0], np.cumsum(per_node)))
    el_cum = np.concatenate(([0.0], np.cumsum(per_el)))
    upto = np.concatenate(([0.0], np.cumsum(per_byte)))
    owner = np.repeat(np.arange(m), ops)  # the item a window starting at op position x reads ``carried`` of
    node_lim = max_nodes + 1 + 1e-6
    el_lim = float((max_mega_elements + 1) << 20) * (1 + 1e-9)
    x = np.arange(total)
    # the first op end y > x whose graph from x reaches either limit (searchsorted: the first y with cum >= target)
    yn = np.searchsorted(node_cum, node_cum[:-1] + node_lim, side="left")
    ye = np.searchsorted(el_cum, el_cum[:-1] + el_lim, side="left")
    G = np.minimum(np.minimum(yn, ye), total)
    G = np.maximum(G, x + 1)
    G = np.append(G, total)
    ends = G[:-1]
    for _ in range(inflight):
        ends = G[ends]
    carried = np.array(_carried(items))
    best = float(np.max(upto[ends] - upto[:-1] + carried[owner])) if total else 0.0
    # float sums of up to ~1e6 ops: a relative hair on top, and 1 B per item for the terms' rounding
    return int(best * (1 + 1e-12)) + 1 + m


def _carried(items: list) -> list[float]:
    """``_Live.carried`` of a window starting inside each item, for every item in one pass (the same
    additions as ``executor.window_max`` makes: items j-8 .. j-2 whose carry reaches j, then item j-1's
    output and carry)."""
    n = len(items)
    out_of = [it.bytes if it.out < 0 else it.out for it in items]
    carry = [it.carry for it in items]
    reach = [i + it.carry_items for i, it in enumerate(items)]
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
        c += add
        carried[j] = c
    return carried


def _same_shape(a: list, b: list, act: int) -> bool:
    """Two calls' items have the same structure (terms, op and node counts, reach) and every size in ``b`` is
    at least ``a``'s: then ``b``'s sizes bound every call between the two (each item's bytes and input
    elements grow with the query count within one structure: activations linearly, scores with q x kL)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if (x.term != y.term or x.ops != y.ops or (x.out < 0) != (y.out < 0) or x.views != y.views or x.nodes != y.nodes
                or x.carry_items != y.carry_items or len(x.op_bytes) != len(y.op_bytes)
                or isinstance(x.elems, tuple) != isinstance(y.elems, tuple)):
            return False
        if x.bytes > y.bytes or x.carry > y.carry or (x.bytes if x.out < 0 else x.out) > (y.bytes if y.out < 0 else y.out):
            return False
        if isinstance(x.elems, tuple):
            if len(x.elems) != len(y.elems) or any(u > v for u, v in zip(x.elems, y.elems)):
                return False
        elif (x.elems or x.bytes // act) > (y.elems or y.bytes // act):
            return False
        if any(u > v for u, v in zip(x.op_bytes, y.op_bytes)):
            return False
    return True


#: A bucket of shorter calls (or last tokens) is split while its bound is above the full calls' part and it is
#: wider than this many queries: the precompute per offset stays at a few dozen call bounds.
MIN_BUCKET = 128
#: Buckets whose two ends have items of different structure are split; past this many in one offset's class
#: the class is answered exactly from then on (``CudaFit._shapeless``).
MAX_MISSES = 24


class _Leaves:
    """The buckets of one offset: ``starts[i] .. starts[i+1]-1`` queries bounded by ``ups[i]`` (exact where
    ``exact[i]``: a one-query bucket)."""

    __slots__ = ("starts", "ups", "exact")

    def __init__(self, leaves: list[tuple[int, int, bool]]):
        leaves.sort()
        self.starts = [a for a, _, _ in leaves]
        self.ups = [u for _, u, _ in leaves]
        self.exact = [e for _, _, e in leaves]

    def at(self, r: int) -> tuple[int, bool]:
        i = bisect.bisect_right(self.starts, r) - 1
        return self.ups[i], self.exact[i]


class CudaFit:
    """Bounds of a CUDA prefill's total (held before + peak; no cached prefix) for one profile and chunk size,
    as ``CudaFit.bounds(new_tokens)``: a few list look-ups once ``prepare`` (or earlier requests) built the
    offset's tables.

    Per full call ``j`` (offset ``j c``): its exact total ``F[j]``, the layer types whose caches it changed,
    the caches' state after it, and the last token's exact total after ``j + 1`` full calls (a prompt of
    ``(j + 1) c + 1`` tokens). ``prefill_peak`` evaluates the first call, the last three and, per layer type,
    the last call before them that changed its caches: the full calls' part of that maximum is a look-up
    (``_full_part``). Per offset ``k c`` (built on first use, or by ``prepare``): buckets of the shorter
    call's query count ``r`` and of the last token after it, each bounded by the bucket's largest call
    (items, held and added bytes at its top) over a graph window free of where graphs start
    (``free_graph_window``, with the bucket's smallest input elements), split while the bound is above the
    full calls' part, down to ``MIN_BUCKET`` queries (or one query, where the bound is the exact call)."""

    def __init__(self, profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None = None,
                 nax: bool = False, kv_scale: float = 1.0, worst: str | None = None):
        self.c = chunk
        self.walk = CallWalk(profile, routes, chunk, dtype, nax, kv_scale, worst)
        self.act = self.walk.act
        self.max_k = (profile.max_context - 1) // chunk if profile.max_context else None
        self.F: list[int] = []
        self.GM: list[int | None] = [None]  # GM[m]: max of F at each layer type's last changing call in 1..m
        self._lastj: dict[str, int] = {}
        self.snaps = [self.walk.clone()]  # the caches after j full calls
        self.L0: dict[int, int] = {}
        self._shapeless: set[str] = set()
        self._exact: dict[int, int] = {}  # "call" / "last": no bucket holds (see ``MAX_MISSES``)
        self._leaves: dict[int, tuple] = {}  # per offset: shorter-call leaves, last-token leaves (2 classes)
        w = self.walk.clone()
        self.one = w.step(1, evaluate=True, last=True)[0]  # a one-token prompt

    # -- the full calls ---------------------------------------------------------------------------------
    def _extend(self, k: int) -> None:
        while len(self.F) < k:
            j = len(self.F)
            if j >= MAX_CALLS:
                raise UnsupportedError(f"more than {MAX_CALLS} prefill calls")
            f, grew = self.walk.step(self.c, evaluate=True)
            self.F.append(f)
            if j >= 1:
                for t in grew:
                    self._lastj[t] = j
                self.GM.append(max((self.F[i] for i in self._lastj.values()), default=None))
            self.snaps.append(self.walk.clone())

    def _full_part(self, k: int, r: int) -> int | None:
        """The exact replay's maximum over the full calls it evaluates (``prefill._TAIL_CALLS``)."""
        if k == 0:
            return None
        F = self.F
        n = k + (2 if r else 1)
        if n <= 4:
            return max(F[:k])
        vals = [F[0], F[k - 1]] if r else [F[0], F[k - 2], F[k - 1]]
        g = self.GM[n - 4]
        if g is not None:
            vals.append(g)
        return max(vals)

    def _last0(self, k: int) -> int:
        v = self.L0.get(k)
        if v is None:
            v = self.L0[k] = self.snaps[k].clone().step(1, evaluate=True, last=True)[0]
        return v

    # -- the shorter call and the last token ----------------------------------------------------------------
    def _build(self, k: int) -> tuple:
        c, act = self.c, self.act
        floor = self._full_part(k, 1)
        base_state = self.snaps[k]
        memo_p: dict[int, tuple] = {}
        memo_l: dict[int, tuple] = {}

        def p_parts(q):
            v = memo_p.get(q)
            if v is None:
                v = memo_p[q] = base_state.clone().parts(q)[:2]
            return v

        def l_parts(q):
            v = memo_l.get(q)
            if v is None:
                w = base_state.clone()
                w.step(q, evaluate=False)
                v = memo_l[q] = w.parts(1, last=True)[:2]
            return v

        # the last token grows the caches where the call before it ends on a capacity step (offset + r a
        # multiple of 256): those lengths are a class of their own (a copy more), bounded together
        grows = [r for r in range(1, c) if (k * c + r) % STEP == 0]
        grow_set = set(grows)
        rest = [r for r in range(1, c) if r not in grow_set]

        def leaves(kind: str, parts, s_of, rs: list) -> _Leaves:
            out = []
            todo = [(0, len(rs) - 1)] if rs else []
            if kind in self._shapeless:
                todo, out = [], [(rs[0], None, False)] if rs else []
            misses = 0
            while todo:
                i, j = todo.pop()
                a, b = rs[i], rs[j]
                if i == j:
                    base, var = parts(a)
                    out.append((a, base + max(self.walk.window_of(v, s_of(a)) for v in var), True))
                    continue
                base_a, var_a = parts(a)
                base_b, var_b = parts(b)
                up = None
                if all(_same_shape(x[1], y[1], act) for x, y in zip(var_a, var_b)):
                    up = max(base_a, base_b) + max(self.walk.window_bound(y, op_elements(x[1], act))
                                                   for x, y in zip(var_a, var_b))
                else:
                    misses += 1
                    if misses > MAX_MISSES:
                        # the items' structure changes with nearly every query count (a gated-DeltaNet loop
                        # split by its own rule): no bucket holds; these lengths are answered exactly
                        self._shapeless.add(kind)
                        out += [(rs[x], None, False) for x, _ in [(i, j)] + todo]
                        break
                if up is not None and ((floor is not None and up <= floor) or b - a < MIN_BUCKET):
                    out.append((a, up, False))
                    continue
                m = (i + j) // 2
                todo += [(i, m), (m + 1, j)]
            return _Leaves(out)

        res = (leaves("call", p_parts, lambda q: q, list(range(1, c))), leaves("last", l_parts, lambda q: 1, rest),
               leaves("last", l_parts, lambda q: 1, grows), grow_set)
        self._leaves[k] = res
        return res

    # -- public ------------------------------------------------------------------------------------------
    def bounds(self, new_tokens: int) -> tuple[int, int | None]:
        """(lower, upper) of the exact replay's total for a prompt of ``new_tokens`` without a prefix; equal
        where it is known exactly; upper ``None`` where no bucket bounds the shorter call or the last token
        (``exact`` answers then)."""
        if new_tokens <= 1:
            return self.one, self.one
        k, r = divmod(new_tokens - 1, self.c)
        if len(self.F) < k:
            self._extend(k)
        if not r:
            v = self._full_part(k, 0)
            w = self._last0(k)
            v = w if v is None or w > v else v
            return v, v
        lv = self._leaves.get(k) or self._build(k)
        lo = self._full_part(k, r)
        p, pe = lv[0].at(r)
        t, te = (lv[2] if r in lv[3] else lv[1]).at(r)
        if lo is None:
            lo = 0
        if p is None or t is None:
            return lo, None
        hi = max(lo, p, t)
        if pe and p > lo:
            lo = p
        if te and t > lo:
            lo = t
        return lo, hi

    def exact(self, new_tokens: int) -> int:
        """The exact replay's total, from the tables and the two calls that depend on the length."""
        lo, hi = self.bounds(new_tokens)
        if lo == hi:
            return lo
        if len(self._exact) >= 4096:
            self._exact.clear()
        v = self._exact.get(new_tokens)
        if v is not None:
            return v
        k, r = divmod(new_tokens - 1, self.c)
        w = self.snaps[k].clone()
        p = w.step(r, evaluate=True)[0]
        t = w.step(1, evaluate=True, last=True)[0]
        f = self._full_part(k, r)
        v = self._exact[new_tokens] = max(p, t) if f is None else max(f, p, t)
        return v

    def prepare(self, max_k: int | None = None) -> None:
        """Every table up to the model's context (or ``max_k`` full calls)."""
        K = max_k if max_k is not None else self.max_k
        if K is None:
            return
        self._extend(K)
        for k in range(K + 1):
            if k not in self._leaves:
                self._build(k)
            if k:
                self._last0(k)


def cuda_fit_for(profile: Profile, backend: str, mlx_version: str | None, dtype: str | None, nax: bool,
                 chunk: int) -> CudaFit | None:
    """The ``CudaFit`` of a backend whose executor commits graphs (CUDA), or ``None``: another backend, or a
    profile whose peak ``prefill_peak`` reports unknown there (it raises the reason; so does the replay)."""
    from .basis import MEASURED, basis_for, no_bound_reason
    from .ops.recurrent import unverified_peak

    kr = KernelRoutes.for_backend(backend, mlx_version)
    if kr.executor.graph_commit is None or unverified_peak(profile, kr):
        return None
    b = basis_for(profile, kr)
    if b.kind != MEASURED and no_bound_reason(profile, kr):
        return None
    return CudaFit(profile, kr, chunk, dtype, nax, 1.0, None if b.kind == MEASURED else (b.worst or b.kind))
