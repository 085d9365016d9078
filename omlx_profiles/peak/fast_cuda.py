"""Per-request fit checks on CUDA in microseconds: the exact full-chunk calls once, the rest bounded.

MLX's CUDA backend commits a graph every ~100 kernel nodes or ~1 Gi input elements and keeps up to 11 in
flight (``executor.graph_window_max``), so where the live window's edges fall moves with the call's query
count and offset: no line in the prompt length holds (``peak.fast`` answers CUDA with the exact replay,
13-290 ms a request). But without a cached prefix a prompt of ``N`` tokens makes ``k = (N-1) // c`` full
calls of ``c`` queries at offsets ``0, c, ..., (k-1)c`` whose caches and items do not depend on ``N``:
each one's exact total is computed once per chunk size (``prepare``), and the exact replay's maximum over
the full calls (every one: ``full_call_totals``) is a running maximum of that table. The only calls that depend on ``N`` are the shorter call
(``r = (N-1) % c`` queries at offset ``k c``) and the last token; ``CudaFit.bounds`` gives

* a lower bound: the full calls' part of the exact replay (exact);
* an upper bound: that, or a bound of the shorter call and of the last token where they may be higher
  (per bucket of the shorter call's query count: ``CudaFit``), whichever is larger.

Where the two meet the verdict is exact; between them ``Estimator.fits`` evaluates those 1-2 calls (``CudaFit.exact``).
The CUDA envelope (``peak.envelope``: the reported total, monotone in the prompt) reads the buckets' bounds
cumulated over the block (``cum_upper``, ``block_max``): a look-up, so ``fits`` against it needs no call at all.
"""
from __future__ import annotations

import bisect
import operator

import numpy as np

from ..errors import UnsupportedError
from ..kv.replay import MAX_CALLS, STEP
from ..kv.work import GRAPH_CALL_COST
from ..registry.profile import Profile
from .call import (activation_dtype, call_window, growth_bytes, held_bytes, items_of_call, pinned_bytes, run_ahead_ops,
                   validate_profile)
from .executor import carried_array, window_max
from .fast_pieces import last_same
from .kernels import _TILED_VERSION, KernelRoutes, tiled_state
from .replay import EntryState, fill_prefix
from .request import check_table_chunk


class CallWalk:
    """The calls of a prompt without a prefix, stepped one at a time as ``prefill._prefill_peak`` steps
    them (the same cache replay, the same held / growth bytes, ``call_peak`` for a call's total), so a
    caller can evaluate any call it wants: its totals are the exact replay's per-call totals."""

    def __init__(self, profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None, nax: bool,
                 kv_scale: float, worst: str | None, *, only_worst: bool = False, prefix_calls: tuple[tuple[int, int], ...] = ()):
        validate_profile(profile)
        self.p = profile
        self.kr = routes
        self.dt, self.act = activation_dtype(profile, dtype)
        self.nax = nax
        self.kv_scale = kv_scale
        self.worst = worst
        # the variants a call's total is the maximum of: the op model, and its worst case where the basis is
        # not measured (``only_worst``: the worst case alone, as ``prefill._prefill_peak(worst=...)`` runs it)
        self.variants = (worst,) if only_worst and worst else ((None, worst) if worst else (None,))
        self.prefix_calls = tuple(prefix_calls)
        self.window = routes.executor.window_for(chunk)
        self.tiled = tiled_state()[1]
        self.counts: dict[str, int] = {}
        for n in profile.layer_names:
            self.counts[n] = self.counts.get(n, 0) + 1
        self.reset()

    def reset(self) -> None:
        self.states = {name: [EntryState(e) for e in lt.entries] for name, lt in self.p.layer_types.items()}
        self.offset = fill_prefix(self.states, self.prefix_calls) if self.prefix_calls else 0
        self.q_prev = 0
        self.ci = 0

    def clone(self) -> "CallWalk":
        """An independent copy at the same call (the caches' states copied). Each state's cache entry (the
        profile's, never written) is shared, not deep-copied: ``copy.deepcopy`` of the states spent most of a clone
        copying the entries' pydantic models (a bucket build clones ~60 times per offset; session 13)."""
        import copy

        c = copy.copy(self)
        c.states = {name: [_copy_state(st) for st in sts] for name, sts in self.states.items()}
        return c

    def held(self) -> tuple[int, int]:
        return held_bytes(self.p, self.states, self.counts, self.act, self.q_prev, self.kv_scale)

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
        growth = growth_bytes(self.states, steps, self.counts, act, self.kv_scale)
        base = kv_before + growth + snap_before + sum(pinned_bytes(self.p, steps, s, act).values())
        variants = []
        for worst in self.variants:
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

    def window_bound(self, variant, op_elems, ops=None, embedded=None) -> int | None:
        """An upper bound of the window term of every call whose items lie between ``op_elems``' call and
        this variant's items (``free_graph_window``; the worst case's run-ahead window is already free of
        graph starts: a larger item never lowers it). ``embedded``: the bottom's ops mapped onto these (``_Ops.embed``,
        op counts that differ); then ``None`` for a worst case, whose run-ahead window counts ops, not nodes."""
        worst, items = variant
        gc = self.kr.executor.graph_commit
        inflight = gc.window_graphs
        if embedded is not None and worst:
            return None
        if embedded is not None:
            # op counts that differ (``_Ops.embed``): the chain's intervals widen by every op a shorter call lacks,
            # graph after graph (Qwen3.5-35B-A3B chunk 512, 480-511 queries: 10.5 GB against 2.16 GB exact at the
            # top); a window from any op, counting the fewest nodes, stays close (2.27 GB) at a third of the cost.
            # ``op_elems`` is not read here (a caller may pass None: the bottom's per-op elements cost a pass)
            lo_nodes, lo_el, slack = embedded
            w = free_graph_window(items, gc.max_nodes, gc.max_mega_elements, inflight, self.act, lo_el, ops,
                                  lo_nodes, slack)
        elif op_elems is None:
            w = free_graph_window(items, gc.max_nodes, gc.max_mega_elements, inflight, self.act, None, ops)
        else:  # the chain bound (tighter where the graph ends move little within the bucket)
            w = chain_graph_window(items, gc.max_nodes, gc.max_mega_elements, inflight, self.act, op_elems, ops)
        if worst:
            w2, _ = window_max(items, run_ahead_ops(self.kr), 1, 0)
            if w2 > w:
                w = w2
        elif embedded is None:
            whole = whole_call_window(items, gc.max_nodes, gc.max_mega_elements, inflight, self.act, ops)
            if whole is not None and whole < w:
                w = whole
        return w

def _copy_state(st: EntryState) -> EntryState:
    """An independent copy of one cache entry's replay state (its integers, its rotating / chunked state's integers),
    sharing the entry itself."""
    import copy

    c = EntryState.__new__(EntryState)
    for k in EntryState.__slots__:  # integers, the entry, and the two sub-states (copied below)
        setattr(c, k, getattr(st, k))
    if st.rot is not None:
        c.rot = copy.copy(st.rot)
    if st.chk is not None:
        c.chk = copy.copy(st.chk)
    return c


#: The full-call tables of the exact replay (``full_call_totals``), least recently used last out.
_FULL: dict = {}
_FULL_KEEP = 32


def full_call_totals(profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None, nax: bool,
                     kv_scale: float, worst: str | None, prefix_calls: tuple[tuple[int, int], ...], k: int) -> list[int]:
    """The exact totals of a prompt's first ``k`` full chunk calls after ``prefix_calls`` (``(size, count)`` runs;
    one variant: the op model, or its ``worst`` case alone, as ``prefill._prefill_peak`` runs them), from a table
    kept per profile, routes, chunk, prefix and variant and extended on demand: these calls do not depend on the
    prompt's length.

    Why the replay needs them: it evaluates the first call, the last three and the last cache-growing ones, which
    is every candidate for the highest call where a call's total only grows with its offset (CPU, Metal). On CUDA
    where MLX's graph commits end moves with the offset, so a full call can peak above every later one (Llama-3.1-8B
    chunk 512, 49,154 tokens: one 2 MiB above the evaluated ones, tests/test_cuda_call_subset.py): the replay adds
    the highest full call from this table, so it equals the all-calls replay. Costs each full call once per table
    (a few ms each), not per request."""
    # routes are rebuilt per request around the same loaded table (``KernelRoutes.for_backend``): keyed by it; profiles
    # that differ only in what the peak never reads (names, weights, context length) share one table
    key = (_shape_key(profile), id(routes.table), routes.backend, routes.mlx_version, routes.supports_bool_mask,
           routes.bool_to_additive_buffers, chunk, dtype, nax, kv_scale, worst, tuple(prefix_calls), _TILED_VERSION[0])
    ent = _FULL.pop(key, None)
    if ent is None or ent[1] is not routes.table:
        walk = CallWalk(profile, routes, chunk, dtype, nax, kv_scale, worst, only_worst=True,
                        prefix_calls=tuple(prefix_calls))
        ent = (None, routes.table, walk, [])
    walk, F = ent[2], ent[3]
    while len(F) < k:
        F.append(walk.step(chunk, evaluate=True)[0])  # an error leaves the table out (its walk is half-stepped)
    _FULL[key] = ent  # most recently used last
    while len(_FULL) > _FULL_KEEP:
        del _FULL[next(iter(_FULL))]
    return F


_SHAPES: dict[int, tuple] = {}
#: Profile fields the peak model does not read (only messages name the profile): not part of a table's key.
_NOT_READ = frozenset({"name", "ids", "aliases", "source", "weights", "max_context", "kv_bits_fails"})


def _shape_key(profile: Profile) -> tuple:
    """What of ``profile`` the per-call totals depend on, as a key (memoized per profile object, kept alive)."""
    import dataclasses

    v = _SHAPES.get(id(profile))
    if v is None or v[0] is not profile:
        if len(_SHAPES) >= 512:
            _SHAPES.clear()
        v = _SHAPES[id(profile)] = (profile, tuple((f.name, repr(getattr(profile, f.name)))
                                                   for f in dataclasses.fields(profile)
                                                   if f.compare and f.name not in _NOT_READ))
    return v[1]


def op_elements(items: list, act: int) -> np.ndarray:
    """Per executor op, the input elements ``graph_ends`` counts for it once ``split_ops`` has split the items
    (an item with per-op bytes becomes one item per op, each with its share of the elements -- or, where the
    item gives none, its own bytes' worth)."""
    return _Ops(items, act).per_el


def _item_sig(it) -> tuple:
    return (it.term, it.ops, it.views, it.nodes, it.carry_items, it.out < 0, len(it.op_bytes),
            isinstance(it.elems, tuple), it.grows)


def _loose_sig(sig: tuple) -> tuple:
    """An item's structure without its op and node counts: what two calls of a ``grows`` item share."""
    return sig[:1] + sig[2:3] + sig[4:]


def _sig(items: list) -> tuple:
    """The structure of a call's items (what must match for one call's sizes to bound another's). A call's
    layers share their item objects (``items_of_call`` builds one list per layer type): each is read once, and the
    per-item loop runs in C (``map`` over ids): a GDN call has ~8,000 items and a block build reads ~60 calls.
    Item structures are interned, so two calls' equal structures are the same objects and compare by identity."""
    return tuple(map(_item_sigs(items).__getitem__, map(id, items)))


#: Interned item structures (equal tuples -> one object); bounded, and only a speed-up: every comparison is ``==``.
_INTERN: dict = {}


def _item_sigs(items: list) -> dict:
    """``{id(item): _item_sig(item)}`` for the distinct items of a call (interned)."""
    uniq = dict(zip(map(id, items), items))
    if len(_INTERN) >= 1 << 16:
        _INTERN.clear()
    intern = _INTERN.setdefault
    out = {}
    for k, it in uniq.items():
        s = _item_sig(it)
        out[k] = intern(s, s)
    return out


def _shape(items: list) -> tuple:
    """``_sig`` without the op and node counts of ``grows`` items (what ``_Ops.embed`` lets two calls differ in):
    where a bucket's structure changes for good (a route, a kernel's node count)."""
    return _shape_of(_sig(items))


_SHAPES_OF: dict = {}


def _shape_of(sig: tuple) -> tuple:
    """``_shape`` from a call's ``_sig`` (memoized: the two ends of a bucket are compared more than once)."""
    v = _SHAPES_OF.get(id(sig))
    if v is None or v[0] is not sig:
        if len(_SHAPES_OF) >= 256:
            _SHAPES_OF.clear()
        memo = {}
        for k, x in dict(zip(map(id, sig), sig)).items():
            y = _loose_sig(x) if x[-1] else x
            memo[k] = _INTERN.setdefault(y, y)
        v = _SHAPES_OF[id(sig)] = (sig, tuple(map(memo.__getitem__, map(id, sig))))
    return v[1]


class _Ops:
    """One call's items as per-op arrays (executor order, after ``split_ops``): kernel nodes, input elements,
    bytes, and for a window starting at each op the outputs carried into it (``_Live.carried``); plus the
    items' structure, to compare two calls. Built once per item list (a bucket's ends are shared); a call's
    layers share their item objects, so each distinct item is read once."""

    __slots__ = ("sig", "byts", "outs", "carries", "m", "counts", "special", "nodes", "item_node", "item_el", "_memo",
                 "_lazy")

    def __init__(self, items: list, act: int, light: bool = False):
        """``light``: the structure, nodes and input elements only (where a caller needs no window:
        ``peak.fast_cuda_prefix``'s fewest-elements calls). The per-op arrays (``per_node``, ``per_el``, ``per_byte``,
        ``owner``, ``carried``) are built on first use: a bucket's bottom call needs none of them where its ops are
        mapped per item (``embed``), and each is a pass over up to ~500k ops (a GDN call)."""
        from .executor import split_item

        self._memo: dict = {}  # arrays that depend on these items alone (``cached``)
        a = max(act, 1)
        # one row per DISTINCT item (a call's layers share their item objects), then every per-item array by an
        # index over the call's items: the per-item loops run in C (``map``), the values are the same
        ids = list(map(id, items))
        uniq = dict(zip(ids, items))
        where = {k: i for i, k in enumerate(uniq)}
        inv = np.fromiter(map(where.__getitem__, ids), dtype=np.int64, count=len(ids))
        sigs = _item_sigs(items)
        rows = []
        for k, it in uniq.items():
            n = max(1, it.ops)
            e = it.elems
            special = bool((it.op_bytes and len(it.op_bytes) == n and n > 1) or (isinstance(e, tuple) and len(e) == n))
            rows.append((it.bytes, it.bytes if it.out < 0 else it.out, it.carry, n,
                         (it.nodes if it.nodes >= 0 else it.ops) / n, 0.0 if special else (e or it.bytes // a) / n,
                         special, sigs[k], None if light else split_item(it)))
        self.sig = tuple(map(sigs.__getitem__, ids))

        def col(i, dtype):
            return np.array([r[i] for r in rows], dtype=dtype)[inv]

        counts = col(3, np.int64)
        if not light:
            self.byts = col(0, np.float64)
            self.outs = col(1, np.float64)
            self.carries = col(2, np.float64)
        self.counts = counts
        self.special = col(6, bool)
        per_node = col(4, np.float64)
        self.nodes = per_node * counts
        self.item_node = per_node  # per item: every op of an item has its nodes / ops (``embed`` reads them per item)
        self.item_el = col(5, np.float64)  # per item, where not ``special`` (then per op: ``per_el``)
        self._lazy = (items, a, rows, inv)
        if not light:
            self.m = int(np.array([len(r[8]) for r in rows], dtype=np.int64)[inv].sum())  # split items (``split_ops``)

    @property
    def per_node(self) -> np.ndarray:
        """Per op: the kernel nodes ``graph_ends`` counts for it."""
        return self.cached("per_node")

    @property
    def per_el(self) -> np.ndarray:
        """Per op: the input elements ``graph_ends`` counts for it."""
        return self.cached("per_el")

    @property
    def per_byte(self) -> np.ndarray:
        """Per op: the bytes it allocates (its split item's bytes per op)."""
        return self.cached("per_byte")

    @property
    def owner(self) -> np.ndarray:
        """Per op: the split item a window starting there is in."""
        return self.cached("owner")

    @property
    def carried(self) -> np.ndarray:
        """Per split item: the outputs carried into a window starting in it (``_Live.carried``)."""
        return self.cached("carried")

    def _per_el(self) -> np.ndarray:
        items, a, rows, _ = self._lazy
        counts = self.counts
        per_el = np.repeat(self.item_el, counts)
        if any(r[6] for r in rows):
            starts = np.concatenate(([0], np.cumsum(counts)))
            vals_of: dict[int, list] = {}  # per distinct item: its ops' input elements
            for idx in np.flatnonzero(self.special).tolist():
                it = items[idx]
                vals = vals_of.get(id(it))
                if vals is None:
                    n = int(counts[idx])
                    e = it.elems
                    if it.op_bytes and len(it.op_bytes) == n and n > 1:
                        el = e if isinstance(e, tuple) and len(e) == n else ((e or 0) // n,) * n
                        vals = [x if x else b // a for x, b in zip(el, it.op_bytes)]
                    else:
                        vals = e
                    vals = vals_of[id(it)] = np.asarray(vals, dtype=np.float64)
                per_el[starts[idx]:starts[idx + 1]] = vals
        return per_el

    def special_values(self, idx: np.ndarray, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(per_el[ops], per_byte[ops])`` for ``ops``, the ops of the items at ``idx`` in order (``special`` items: a
        few dozen a call), from those items alone where the per-op arrays are not built (``embed``'s bottom call)."""
        m = self._memo
        if "per_el" in m and "per_byte" in m:
            return m["per_el"].take(ops), m["per_byte"].take(ops)
        items, a = self._lazy[0], self._lazy[1]
        els, byts = [], []
        for i in idx.tolist():
            it = items[i]
            n = int(self.counts[i])
            e = it.elems
            if it.op_bytes and len(it.op_bytes) == n and n > 1:  # split per op (``split_ops``): 1 op of its bytes each
                el = e if isinstance(e, tuple) and len(e) == n else ((e or 0) // n,) * n
                els.append(np.asarray([x if x else b // a for x, b in zip(el, it.op_bytes)], dtype=np.float64))
                byts.append(np.asarray(it.op_bytes, dtype=np.float64) / np.ones(n, dtype=np.int64))
            else:  # per-op elements, not split: its bytes per op, n times
                els.append(np.asarray(e, dtype=np.float64))
                byts.append(np.repeat(np.array([it.bytes], dtype=np.float64) / np.array([n], dtype=np.int64), n))
        return np.concatenate(els), np.concatenate(byts)

    def _split_arrays(self) -> None:
        """``per_byte``, ``carried`` and the split items' op counts (of the items ``split_ops`` makes), in the memo."""
        _, _, rows, inv = self._lazy
        parts = [r[8] for r in rows]
        # per distinct item, its split items' op counts and bytes per op (the same division, element by element),
        # outputs, carries and carry reaches (``carried_per_item``'s inputs, read once per distinct split item)
        p_all = [it for q in parts for it in q]
        p_ops = np.array([max(1, it.ops) for it in p_all], dtype=np.int64)
        p_bpo = np.array([it.bytes for it in p_all], dtype=np.float64) / p_ops
        # the split items of every item in call order, as indices into the distinct items' split items
        p_len = np.array([len(q) for q in parts], dtype=np.int64)
        p_start = np.concatenate(([0], np.cumsum(p_len)))[:-1]
        lens = p_len[inv]
        first = np.repeat(p_start[inv] - (np.cumsum(lens) - lens), lens)
        flat = first + np.arange(int(lens.sum()))
        ops, bpo = p_ops[flat], p_bpo[flat]
        self._memo["per_byte"] = np.repeat(bpo, ops)
        self._memo["split_counts"] = ops  # per split item, its ops (``owner`` / ``carried_op`` repeat by them)
        # ``carried_per_item(split)`` in its numpy form (equal to the loop: tests/test_speed_paths.py), from the
        # distinct split items' values
        p_out = np.array([it.bytes if it.out < 0 else it.out for it in p_all], dtype=np.float64)
        p_carry = np.array([it.carry for it in p_all], dtype=np.float64)
        p_ci = np.array([it.carry_items for it in p_all], dtype=np.int64)
        self._memo["carried"] = carried_array(p_out[flat], p_carry[flat], np.arange(len(flat)) + p_ci[flat])

    def cached(self, name: str):
        """An array of these items alone, built once (a bucket's top is bounded, embedded and split from more
        than once): ``upto`` (cumulative bytes from op 0), ``node_cum`` (cumulative nodes), ``carried_op`` (the
        carried bytes into a window starting at each op), ``item`` / ``local`` (each op's item, and its index there)."""
        v = self._memo.get(name)
        if v is None:
            if name == "per_node":
                v = np.repeat(self.item_node, self.counts)
            elif name == "per_el":
                v = self._per_el()
            elif name in ("per_byte", "carried", "split_counts"):
                self._split_arrays()
                return self._memo[name]
            elif name == "owner":  # the split item a window starting at each op is in
                counts = self.cached("split_counts")
                v = np.repeat(np.arange(len(counts)), counts)
            elif name == "upto":
                v = _cum0(self.per_byte)
            elif name == "node_cum":
                v = _cum0(self.per_node)
            elif name == "el_cum":
                v = _cum0(self.per_el)
            elif name == "bytes_rise":  # the cumulative bytes only grow (``_max_window``'s blocks rely on it)
                v = bool(np.all(self.per_byte >= 0))
            elif name == "carried_op":  # ``carried[owner]``: the same values, one pass (no index array)
                v = np.repeat(self.carried, self.cached("split_counts"))
            elif name == "item":
                v = np.repeat(np.arange(len(self.counts)), self.counts)
            elif name == "local":
                starts = np.concatenate(([0], np.cumsum(self.counts)))[:-1]
                v = np.arange(int(self.counts.sum())) - starts[self.cached("item")]
            else:
                raise KeyError(name)
            self._memo[name] = v
        return v

    def below(self, b: "_Ops") -> bool:
        """Same structure, and every size here at most ``b``'s (then ``b`` bounds every call between them)."""
        return (self.sig == b.sig and bool(np.all(self.byts <= b.byts)) and bool(np.all(self.outs <= b.outs))
                and bool(np.all(self.carries <= b.carries)) and bool(np.all(self.per_el <= b.per_el))
                and bool(np.all(self.per_byte <= b.per_byte)))


    def embed(self, b: "_Ops") -> tuple | None:
        """Where the two calls' items differ only in the op and node counts of ``grows`` items (a per-token loop's
        spans: ``peak.ops.recurrent.deltanet_spans``), this call (the bottom of a query bucket) mapped onto ``b``'s
        ops (its top), for ``free_graph_window``: ``(lo_nodes, lo_el, slack)`` per op of ``b``;
        ``None`` where they differ otherwise, or a size here is above ``b``'s.

        The mapping: a ``grows`` item's ops here are the LAST ops of the same item in ``b`` (the ops a shorter call
        lacks are taken at the item's start, so a window edge maps into the same item and its carried bytes are
        ``b``'s). A call between the two has at least this call's ops and nodes and at most ``b``'s, per item, and
        a graph that starts at an op of it ends, mapped, no later than one counting ``lo_nodes`` / ``lo_el`` (the
        fewest nodes and input elements a call of the bucket has at each op of ``b``, 0 where it may lack the op)
        from the same op: ``free_graph_window`` over those reaches at least as far as every call's window. Bytes are
        ``b``'s per op: a ``grows`` item whose bytes per op fall with its op count (a span's fixed part: ``3 st_b``
        of the first chain span, a readout's state) can hold more per op at fewer ops; ``slack`` covers the two
        items a window can cut (``ops_b x`` the per-op excess here, each)."""
        sa, sb = self.sig, b.sig
        if len(sa) != len(sb) or self.m != b.m:
            return None
        if not (np.all(self.byts <= b.byts) and np.all(self.outs <= b.outs) and np.all(self.carries <= b.carries)):
            return None
        ca, cb = self.counts, b.counts
        if _shape_of(sa) != _shape_of(sb):
            return None
        diff = np.fromiter(map(operator.ne, sa, sb), dtype=bool, count=len(sa))  # interned: mostly identity
        if np.any(diff & (self.special | b.special)) or np.any(ca > cb) or np.any(self.nodes > b.nodes + 1e-9):
            return None
        d = cb - ca
        # per item, not per op: an item's ops share its nodes, elements and bytes per op (``split_ops`` splits only
        # ``special`` items, whose elements / bytes are per op; those have one structure here and in b, so d = 0 and
        # their ops map one to one): the ops b has and this call lacks (the first d of each item) get 0, the others
        # the smaller of the two calls' values; a ``special`` item's elements compared and taken op by op. The same
        # floats as the per-op gathers this replaces, at ~2 passes over the ops instead of ~12 (session 12)
        same = ~diff
        bpo_a = self.byts / np.maximum(ca, 1)
        bpo_b = b.byts / np.maximum(cb, 1)
        special = self.special | b.special  # (never with diff, above: same structure, same op count)
        plain = same & ~special
        if np.any(plain & ((self.item_el > b.item_el) | (bpo_a > bpo_b))):
            return None
        sp = np.flatnonzero(special)
        if sp.size:  # the special items' ops, here and in b (one to one)
            starts_a = np.concatenate(([0], np.cumsum(ca)))[:-1]
            starts_b = np.concatenate(([0], np.cumsum(cb)))[:-1]
            n_sp = cb[sp]
            inner = np.arange(int(n_sp.sum())) - np.repeat(np.cumsum(n_sp) - n_sp, n_sp)
            oa = np.repeat(starts_a[sp], n_sp) + inner
            ob = np.repeat(starts_b[sp], n_sp) + inner
            ea, ba = self.special_values(sp, oa)
            eb, bb = b.special_values(sp, ob)
            if np.any(ea > eb) or np.any(ba > bb):
                return None
        two = np.empty(2 * len(cb), dtype=np.int64)  # per item: its first d ops (0), then the rest
        two[0::2] = d
        two[1::2] = cb - d
        vals = np.zeros(2 * len(cb))
        vals[1::2] = np.minimum(self.item_node, b.item_node)
        lo_nodes = np.repeat(vals, two)
        vals[1::2] = np.minimum(self.item_el, b.item_el)
        lo_el = np.repeat(vals, two)
        if sp.size:
            lo_el[ob] = np.minimum(ea, eb)
        slack = 0.0
        if diff.any():
            # per-op bytes of a grows item (not special: even over its ops) here and in b
            ppa = self.byts / np.maximum(ca, 1)
            ppb = b.byts / np.maximum(cb, 1)
            ex = np.where(diff, cb * np.maximum(ppa - ppb, 0.0), 0.0)
            slack = 2.0 * float(ex.max())
        return lo_nodes, lo_el, slack


def _cum0(x: np.ndarray) -> np.ndarray:
    """``np.concatenate(([0.0], np.cumsum(x)))`` in one array (the same sequential sums, one pass fewer)."""
    out = np.empty(x.size + 1, dtype=np.float64)
    out[0] = 0.0
    np.cumsum(x, out=out[1:])
    return out


#: Keys per ``_first_reach`` block: each block's answers lie in a slice of ``cum`` about this long (plus a graph's
#: width), whose binary search takes ~12 levels where the whole array's takes ~19 (2x faster at ~500k ops).
_REACH_BLOCK = 4096


def _first_reach(cum: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``np.searchsorted(cum, target, side="left")`` (the first ``y`` with ``cum[y] >= target[x]``) for a
    NON-DECREASING ``target`` (``cum[:-1] + limit``: a float sum rounds monotonically in its addend), the same
    integers: block by block, each block's keys searched in the slice of ``cum`` between its first and last
    key's answers (all its answers lie there). Why: the graph-end searches were most of a CUDA bucket bound's
    cost (a searchsorted over ~500k ops per key mispredicts ~19 levels; a slice of ~4k ops, ~12)."""
    n = target.size
    if n <= 2 * _REACH_BLOCK:
        return np.searchsorted(cum, target, side="left")
    out = np.empty(n, dtype=np.intp)
    starts = np.arange(0, n, _REACH_BLOCK)
    ends = np.minimum(starts + _REACH_BLOCK, n) - 1
    lo = np.searchsorted(cum, target[starts], side="left").tolist()
    hi = np.searchsorted(cum, target[ends], side="left").tolist()
    for s, e, a, b in zip(starts.tolist(), ends.tolist(), lo, hi):
        out[s:e + 1] = np.searchsorted(cum[a:b + 1], target[s:e + 1], side="left")
        out[s:e + 1] += a
    return out


def _graph_ends(node_cum: np.ndarray, el_cum: np.ndarray, tn: float, te: float, total: int) -> np.ndarray:
    """Per op ``x`` (and one past the last), the end of a graph that starts there (``G``, ``free_graph_window``):
    the first op end whose nodes reach ``node_cum[x] + tn`` or whose input elements reach ``el_cum[x] + te``,
    at least ``x + 1``, at most ``total``; exactly ``min(searchsorted(node), searchsorted(elements))``. The
    elements' search runs only where they end the graph before the nodes do (``el_cum`` at the nodes' end - 1
    already reaches the target): a few keys in a thousand on the models seen (most graphs end on nodes).
    Few arrays of the ops' length, reused in place (each fresh one costs about what a pass over it does)."""
    G = np.empty(total + 1, dtype=np.intp)
    yn = G[:total]
    yn[:] = _first_reach(node_cum, node_cum[:-1] + tn)
    te_x = el_cum[:-1] + te
    idx = yn - 1  # a positive limit: no op end at or before x reaches it, so yn >= 1 and yn - 1 indexes el_cum
    need = np.flatnonzero(el_cum.take(idx) >= te_x)
    del idx
    if need.size:
        yn[need] = np.minimum(yn[need], _first_reach(el_cum, te_x[need]))
    np.minimum(yn, total, out=yn)
    # at least x + 1: already so where the limits are positive and no cumulative sum absorbs them (then none
    # smaller does either); else taken explicitly
    if not (tn > 0 and te > 0 and node_cum[-1] + tn > node_cum[-1] and el_cum[-1] + te > el_cum[-1]):
        np.maximum(yn, np.arange(1, total + 1), out=yn)
    G[total] = total
    return G


def _graph_chain(node_cum: np.ndarray, el_cum: np.ndarray, tn: float, te: float, total: int,
                 steps: int | None = None) -> list[int]:
    """``[0, G(0), G(G(0)), ...]`` up to ``total`` (or ``steps`` ends, padded with ``total``), ``G`` as
    ``_graph_ends`` gives it: the same searches and the same float sums, at the chain's positions only. Why: a chain
    visits about one op in a hundred (a graph's ~100 nodes), and ``_graph_ends`` of every op was most of a CUDA
    prefix cell's ``chain_graph_window`` (session 13)."""
    guard = not (tn > 0 and te > 0 and node_cum[-1] + tn > node_cum[-1] and el_cum[-1] + te > el_cum[-1])
    n_at, e_at = node_cum.item, el_cum.item
    n_ss, e_ss = node_cum.searchsorted, el_cum.searchsorted
    out = [0]
    x = 0
    left = -1 if steps is None else steps
    while x < total and left:
        y = int(n_ss(n_at(x) + tn))
        t = e_at(x) + te
        if e_at(y - 1) >= t:  # the elements end it first (``_graph_ends``' ``need``)
            z = int(e_ss(t))
            if z < y:
                y = z
        if y > total:
            y = total
        if guard and y < x + 1:
            y = x + 1
        out.append(y)
        x = y
        left -= 1
    if steps is not None:
        out += [total] * (steps + 1 - len(out))
    return out


def _g_at(node_cum: np.ndarray, el_cum: np.ndarray, tn: float, te: float, total: int, xs: np.ndarray) -> np.ndarray:
    """``_graph_ends(...)[xs]`` at a few positions ``xs`` (``total``: the end, which maps to itself)."""
    out = np.full(xs.shape, total, dtype=np.intp)
    inner = xs < total
    x = xs[inner]
    yn = np.searchsorted(node_cum, node_cum[x] + tn, side="left")
    te_x = el_cum[x] + te
    need = np.flatnonzero(el_cum.take(np.maximum(yn - 1, 0)) >= te_x)  # elements end it first (``_graph_ends``)
    if need.size:
        yn[need] = np.minimum(yn[need], np.searchsorted(el_cum, te_x[need], side="left"))
    out[inner] = np.maximum(np.minimum(yn, total), x + 1)
    return out


def _g_range(node_cum: np.ndarray, el_cum: np.ndarray, tn: float, te: float, total: int, a: int, t: int) -> np.ndarray:
    """``_graph_ends(...)[a:t + 1]`` (``t <= total``): the same searches over one range of positions, the node search in
    the slice of ``node_cum`` the range's answers lie in (every op end at or before a position is below its target)."""
    b = min(t, total - 1)
    keys = node_cum[a:b + 1] + tn
    top = int(np.searchsorted(node_cum, keys[-1], side="left"))
    g = np.searchsorted(node_cum[a:top + 1], keys, side="left")
    g += a
    te_x = el_cum[a:b + 1] + te
    need = np.flatnonzero(el_cum.take(g - 1) >= te_x)
    if need.size:
        g[need] = np.minimum(g[need], _first_reach(el_cum, te_x[need]))
    np.minimum(g, total, out=g)
    np.maximum(g, np.arange(a + 1, b + 2), out=g)
    return np.append(g, total) if t == total else g


#: ``_max_window``: ops per block, and the fewest ops for which the blocks are worth it (below: every op at once).
_WINDOW_BLOCK = 512
_WINDOW_BLOCKED = 16 * _WINDOW_BLOCK
#: ``_max_window``: blocks whose chains are sampled first (windows as long as the call: every op at once; 0: none).
_WINDOW_SAMPLES = 16


def _max_window(node_cum: np.ndarray, el_cum: np.ndarray, tn: float, te: float, total: int, steps: int,
                upto: np.ndarray, carried: np.ndarray, rising: bool) -> float:
    """``max over x of (upto[G^steps(x)] - upto[x]) + carried[x]`` (floats), ``G`` the graph end from each op
    (``_graph_ends``): the live bytes of a window from ``x`` to the end of the ``steps``-th graph from it.

    Exactly that float, computed for the blocks of ops that can hold it (branch and bound): for the ops of a block
    ``[lo, hi]`` the window is at most ``(upto[G^steps(hi)] - upto[lo]) + max(carried[lo..hi])`` -- ``G`` and ``upto``
    only grow (``rising``: no op of negative bytes; else every op is computed), and a float sum or difference rounds
    monotonically in each operand, so no op's float exceeds its block's. Blocks whose bound is at most the best found
    are skipped (on a gated-DeltaNet call ~85% of them: one layer's worth of windows is the maximum), the others
    computed op by op as before. Why: a GDN bucket bound walked all ~500k ops of its top call (session 12)."""
    def every_op() -> float:
        G = _graph_ends(node_cum, el_cum, tn, te, total)
        # G applied ``steps`` times by squaring (compositions of one map: the same positions as one at a time)
        ends, e, P = None, steps, G
        while True:
            if e & 1:
                ends = P if ends is None else P.take(ends)
            e >>= 1
            if not e:
                break
            P = P.take(P)
        w = upto.take(ends[:-1])  # (upto[ends] - upto[:-1]) + carried, in place
        w -= upto[:-1]
        w += carried
        return float(np.max(w))

    if total < _WINDOW_BLOCKED or not rising:
        return every_op()
    B = _WINDOW_BLOCK
    lo = np.arange(0, total, B)
    hi = np.minimum(lo + B, total) - 1
    # a few blocks' chains first: where they run as long as the call (a bucket's fewest-nodes bottom mapped onto its
    # top, graphs ended by elements over few nodes), the blocks would skip nothing and end in ``every_op`` below after
    # searching every block's chain (half of a gated-DeltaNet bucket bound's window cost, session 13): every op at
    # once now. Only the path changes: both give the same float (the block bound is exact)
    if _WINDOW_SAMPLES:
        pick = np.arange(0, hi.size, max(1, hi.size // _WINDOW_SAMPLES))
        e = hi[pick]
        for _ in range(steps - 1):
            e = _g_at(node_cum, el_cum, tn, te, total, e)
        if np.median(e - lo[pick]) > total // 4:
            return every_op()
    e = hi
    for j in range(steps):
        if j == steps - 1:
            tail = e  # G^(steps-1)(hi): the last position whose graph end a chain from the block reads
        e = _g_at(node_cum, el_cum, tn, te, total, e)
    ub = upto.take(e) - upto.take(lo)
    ub += np.maximum.reduceat(carried, lo)

    def blocks(i: int, j: int) -> float:  # the exact maximum over the ops of blocks i..j
        a, b = int(lo[i]), int(hi[j])
        g = _g_range(node_cum, el_cum, tn, te, total, a, int(tail[j]))
        pos = np.arange(a, b + 1)
        for _ in range(steps):
            pos = g.take(pos - a)
        w = upto.take(pos)
        w -= upto[a:b + 1]
        w += carried[a:b + 1]
        return float(np.max(w))

    first = int(np.argmax(ub))
    if int(tail[first]) - int(lo[first]) > total // 4:
        return every_op()  # windows as long as the call (graphs ended by elements over few nodes): nothing to skip
    best = blocks(first, first)
    ub[first] = -np.inf
    cand = np.flatnonzero(ub > best)
    if cand.size:
        cuts = np.flatnonzero(np.diff(cand) > 1) + 1  # runs of consecutive blocks: one range each
        runs = np.split(cand, cuts)
        # each run's graph ends are searched from its first op to its last block's tail: past about the ops of the
        # call, every op at once is cheaper
        if sum(int(tail[r[-1]]) - int(lo[r[0]]) for r in runs) > total // 2:
            return max(best, every_op())
        for run in runs:
            m = blocks(int(run[0]), int(run[-1]))
            if m > best:
                best = m
    return best


def free_graph_window(items: list, max_nodes: int, max_mega_elements: int, inflight: int, act: int,
                      op_elems: np.ndarray | None = None, ops: _Ops | None = None, op_nodes: np.ndarray | None = None,
                      slack: float = 0.0) -> int:
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
    call of the same structure; fewer elements end graphs later: a query bucket's smallest call). ``ops``:
    the items' ``_Ops``, where already built. ``op_nodes`` / ``slack``: per op, the kernel nodes to count instead of
    the items' own, and bytes to add (``_Ops.embed``: a bucket whose calls' op counts differ, mapped onto its top's
    ops; fewer nodes end graphs later, so a window from any op reaches at least as far as any call's)."""
    if not items:
        return 0
    o = ops or _Ops(items, act)
    per_el = o.per_el if op_elems is None else op_elems
    total = int(o.counts.sum())  # (per_node.size, without building it: an embedded bucket brings its own)
    node_cum = o.cached("node_cum") if op_nodes is None else _cum0(op_nodes)
    el_cum = o.cached("el_cum") if op_elems is None else _cum0(per_el)
    upto = o.cached("upto")
    node_lim = max_nodes + 1 + 1e-6
    el_lim = float((max_mega_elements + 1) << 20) * (1 + 1e-9)
    # the first op end y > x whose graph from x reaches either limit (searchsorted: the first y with cum >= target)
    best = _max_window(node_cum, el_cum, node_lim, el_lim, total, inflight + 1, upto, o.cached("carried_op"),
                       o.cached("bytes_rise")) if total else 0.0
    # float sums of up to ~1e6 ops: a relative hair on top, and 1 B per item for the terms' rounding
    return int((best + slack) * (1 + 1e-12)) + 1 + o.m



def chain_graph_window(items: list, max_nodes: int, max_mega_elements: int, inflight: int, act: int,
                       op_elems: np.ndarray, ops: _Ops | None = None) -> int:
    """An upper bound of ``executor.graph_window_max`` over every call between a query bucket's bottom
    (``op_elems``: its per-op input elements, the fewest) and its top (``items``: the most bytes and elements),
    same item structure: the graph-commit chain followed as an interval of positions.

    Why it holds: a graph starting at op ``x`` ends at ``G(x)``, the first op that takes its kernel nodes or input
    elements past the limit; nodes are the same for every call of the bucket and elements grow with the query
    count, so ``G_top(x) <= G_r(x) <= G_bottom(x)``, and ``G`` only moves right with ``x``. The chain starts at 0,
    so the ``g``-th graph start of every call of the bucket lies in ``[L_g, H_g]`` with ``L_{g+1} = G_top(L_g)``
    (thresholds a hair low) and ``H_{g+1} = G_bottom(H_g)`` (a hair high). The model's window for graph ``g`` runs
    from the start of graph ``g - inflight`` to the end of ``g``: its live bytes are at most the top's bytes from
    ``L_{g-inflight}`` to ``H_{g+1}`` plus the largest carry into a start in ``[L, H]`` (every item's bytes and
    carries grow with the query count). Where the chain is the same at both ends the intervals are points and
    the bound is the top's own window (+1 B per item for the terms' rounding): much tighter than
    ``free_graph_window``, which lets a window start at any op."""
    if not items:
        return 0
    o = ops or _Ops(items, act)
    total = int(o.per_node.size)
    node_cum = o.cached("node_cum")
    upto = o.cached("upto")
    el_lim = float((max_mega_elements + 1) << 20)

    # ``graph_ends`` ends a graph once its running sums reach max_nodes + 1 - 1e-9 nodes or el_lim elements, jumping
    # over evenly spread ops with a 1e-9 slack on the op count: the thresholds below bracket that rule, widened by
    # the float error of differences of cumulative sums (a few ulps), so the low chain never ends a graph later and
    # the high one never earlier than the real one
    tol_n = 8 * float(np.spacing(max(node_cum[-1], 1.0))) + 1e-12

    def chain(per_el, high, steps=None):
        el_cum = o.cached("el_cum") if per_el is None else _cum0(per_el)
        tol_e = 8 * float(np.spacing(max(el_cum[-1], el_lim)))
        if high:
            tn, te = max_nodes + 1 - 1e-9 + tol_n, el_lim + tol_e
        else:
            npo = float(np.max(o.per_node)) if total else 1.0
            epo = float(np.max(o.per_el)) if total else 0.0
            tn = max_nodes + 1 - 1e-9 * max(1.0, npo) - tol_n
            te = el_lim - 1e-9 * max(1.0, epo) - tol_e
        return _graph_chain(node_cum, el_cum, tn, te, total, steps)

    L = chain(None, False)
    H = chain(op_elems, True, len(L) - 1)
    cmax = o.cached("carried_op")
    best = 0.0
    n = len(L) - 1
    if n:
        # graph g: from start g - inflight to end g (position g + 1); its live bytes are the top's from L[s] to
        # H[g + 1] plus the largest carry into a start in [L[s], H[s]]: every graph at once, the carries' range
        # maxima by one reduceat (starts and ends interleaved; the odd rows are the gaps between, unused)
        La, Ha = np.array(L), np.array(H)
        s = np.maximum(np.arange(n) - inflight, 0)
        lo, hi = La[s], np.minimum(Ha[s], total - 1)
        if np.any(lo > hi):  # not a chain pair (never seen): the per-graph form, which raises on it
            for g in range(n):
                sg = max(0, g - inflight)
                v = upto[min(H[g + 1], total)] - upto[L[sg]] + float(np.max(cmax[L[sg]:min(H[sg], total - 1) + 1]))
                if v > best:
                    best = v
        else:
            idx = np.empty(2 * n, dtype=np.intp)
            idx[0::2] = lo
            idx[1::2] = hi + 1  # <= total: an index of cmax with one element appended
            rmax = np.maximum.reduceat(np.append(cmax, 0.0), idx)[0::2]
            v = upto[np.minimum(Ha[1:n + 1], total)] - upto[lo] + rmax  # the same float operations, per graph
            m = float(np.max(v))
            if m > best:
                best = m
    return int(best * (1 + 1e-12)) + 1 + o.m


def whole_call_window(items: list, max_nodes: int, max_mega_elements: int, inflight: int, act: int,
                      ops: _Ops | None = None) -> int | None:
    """An upper bound of ``executor.graph_window_max`` over every call of a query bucket whose top is ``items``
    (same item structure, sizes and input elements at most the top's), where the items carry placement margins
    (``Item.placement_margin``: CUDA's donated residual adds) and even the top commits at most ``inflight + 1``
    graphs; else ``None``.

    Why it holds: a graph from op ``x`` ends no later in a call of fewer input elements (``chain_graph_window``), so
    no call of the bucket commits more graphs than the top, counted here with thresholds a hair low (more graphs,
    never fewer). Each such call's window is then its whole call with the margins dropped
    (``graph_window_max``): its items' bytes less their margins, each at most the top's (a margin is its item's
    whole size). Without this the bucket bounds keep the margins the exact window drops, and the reported total
    (the envelope) stays above the replay by them (Llama-3.1-8B tensor rank, 8k: +1 GiB)."""
    from .executor import split_ops

    kept = 0  # margins ``split_ops`` keeps (an item split per op loses it: its bytes stay charged)
    for it in items:
        if it.placement_margin and not (it.op_bytes and len(it.op_bytes) == max(1, it.ops) and it.ops > 1):
            kept += it.placement_margin
    if not kept or not items:
        return None
    o = ops or _Ops(items, act)
    total = int(o.per_node.size)
    node_cum = o.cached("node_cum")
    el_cum = o.cached("el_cum")
    tol_n = 8 * float(np.spacing(max(node_cum[-1], 1.0))) + 1e-12
    el_lim = float((max_mega_elements + 1) << 20)
    tol_e = 8 * float(np.spacing(max(el_cum[-1], el_lim)))
    npo = float(np.max(o.per_node)) if total else 1.0
    epo = float(np.max(o.per_el)) if total else 0.0
    tn = max_nodes + 1 - 1e-9 * max(1.0, npo) - tol_n
    te = el_lim - 1e-9 * max(1.0, epo) - tol_e
    x, graphs = 0, 0
    while x < total:
        if graphs > inflight:
            return None
        yn = int(np.searchsorted(node_cum, node_cum[x] + tn, side="left"))
        ye = int(np.searchsorted(el_cum, el_cum[x] + te, side="left"))
        x = max(min(yn, ye, total), x + 1)
        graphs += 1
    allocated = float(np.sum(o.per_byte)) - kept
    return int(allocated * (1 + 1e-12)) + 1 + len(split_ops(items))


#: A bucket of shorter calls (or last tokens) is split while its bound is above the full calls' part and it is
#: wider than this many queries: the bound is the bucket's top call followed over the graph chains its calls can
#: take (``chain_graph_window``), and a graph end that moves within the bucket costs up to ~100 MB there (Llama-3.1-8B
#: chunk 2048: 16-query buckets 0-150 MiB over their top's exact total, 128-query ones ~300 MiB); the CUDA envelope
#: reports these bounds (``cum_upper``), so they are kept narrow where they are the prompt's highest term.
MIN_BUCKET = 32
#: The first offset (no full call below its buckets) of a call whose op counts grow with the query count (a
#: gated-DeltaNet: ``_Ops.embed``): a bucket is kept once it spans at most 1/EMBED_RATIO of its start, whatever its
#: width. Its bounds cost ~0.1-0.3 s each (up to a million ops a call at chunk 4096), and MIN_BUCKET's rule made
#: ~180 of them at chunk 4096 (Qwen3.5-35B-A3B: 21 -> 140 s for tests/test_fits_cuda.py's case); prompts of at most
#: a chunk report up to that bucket's top bound.
EMBED_RATIO = 4
#: Buckets whose two ends have items of different structure are split; past this many in one offset's class
#: the class is answered exactly from then on (``CudaFit._shapeless``).
MAX_MISSES = 24


class _Leaves:
    """The buckets of one offset: ``starts[i] .. starts[i+1]-1`` queries bounded by ``ups[i]`` (exact where
    ``exact[i]``: a one-query bucket)."""

    __slots__ = ("starts", "ups", "exact", "cum")

    def __init__(self, leaves: list[tuple[int, int, bool]]):
        leaves.sort()
        self.starts = [a for a, _, _ in leaves]
        self.ups = [u for _, u, _ in leaves]
        self.exact = [e for _, _, e in leaves]
        # cum[i]: the largest bound of leaves 0..i (None from the first leaf without one on)
        self.cum, m = [], 0
        for u in self.ups:
            m = None if m is None or u is None else max(m, u)
            self.cum.append(m)

    def at(self, r: int) -> tuple[int, bool]:
        i = bisect.bisect_right(self.starts, r) - 1
        return self.ups[i], self.exact[i]

    def cum_at(self, r: int) -> int | None:
        """The largest bound over the leaves that start at or below ``r`` (0 where none does)."""
        i = bisect.bisect_right(self.starts, r) - 1
        return self.cum[i] if i >= 0 else 0



class _Skipping:
    """``1 .. c - 1`` without the lengths of ``grows`` (an arithmetic ``range``), as a sequence (``len`` and
    non-negative indexing) that holds no list: ``CudaFit._build`` bisects over it, and a chunk of 2^30 tokens
    must cost what a chunk of 2,048 does, not 2^30 integers (hostile pass 8: 19-24 GB, OOM-killed)."""

    def __init__(self, c: int, grows: range):
        self.c, self.g = c, grows
        self.n = (c - 1) - len(grows)

    def __len__(self) -> int:
        return self.n

    def _skipped_upto(self, r: int) -> int:
        g = self.g
        return 0 if not len(g) or r < g.start else min(len(g), (r - g.start) // g.step + 1)

    def __getitem__(self, t: int) -> int:
        if not 0 <= t < self.n:
            raise IndexError(t)
        r = t + 1
        while True:  # the t-th kept length: t + 1 plus the skipped lengths at or below it (a fixpoint in <= 2 steps)
            nxt = t + 1 + self._skipped_upto(r)
            if nxt == r:
                return r
            r = nxt

class CudaFit:
    """Bounds of a CUDA prefill's total (held before + peak; no cached prefix) for one profile and chunk size,
    as ``CudaFit.bounds(new_tokens)``: a few list look-ups once ``prepare`` (or earlier requests) built the
    offset's tables.

    Per full call ``j`` (offset ``j c``): its exact total ``F[j]``, the caches' state after it, and the last
    token's exact total after ``j + 1`` full calls (a prompt of ``(j + 1) c + 1`` tokens). ``prefill_peak`` takes
    the highest full call (``full_call_totals``): the full calls' part is a running maximum (``_full_part``). Per offset ``k c`` (built on first use, or by ``prepare``): buckets of the shorter
    call's query count ``r`` and of the last token after it, each bounded by the bucket's largest call
    (items, held and added bytes at its top) over a graph window free of where graphs start
    (``free_graph_window``, with the bucket's smallest input elements), split while the bound is above the
    full calls' part, down to ``MIN_BUCKET`` queries (or one query, where the bound is the exact call)."""

    def __init__(self, profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None = None,
                 nax: bool = False, kv_scale: float = 1.0, worst: str | None = None):
        check_table_chunk(chunk)  # every query count up to the chunk is bisected: past a cap its callers replay
        self.c = chunk
        self._args = (profile, routes, chunk, dtype, nax, kv_scale, worst)
        self.max_k = (profile.max_context - 1) // chunk if profile.max_context else None
        self._reset()

    def _reset(self) -> None:
        """Empty tables, for the tiled-kernel registry as it is now (``kernels.register_tiled`` changes routes:
        every table is rebuilt on the next request after it, as ``FastPeak`` does)."""
        self._gen = _TILED_VERSION[0]
        self.walk = CallWalk(*self._args)
        self.act = self.walk.act
        self.F: list[int] = []
        self.FM: list[int] = []  # FM[j]: max of F[:j + 1]
        self.snaps = [self.walk.clone()]  # the caches after j full calls
        self.L0: dict[int, int] = {}
        self._shapeless: set[str] = set()  # "call" / "last": no bucket holds (see ``MAX_MISSES``)
        self._exact: dict[int, int] = {}  # two-call answers (``exact``), per length
        self._pexact: dict[int, int] = {}  # exact totals of k c + 2 and c (``bounds``), kept
        self._bm: list[int | None] = [0]  # block_max(k)
        self._leaves: dict[int, tuple] = {}  # per offset: shorter-call leaves, last-token leaves (2 classes)
        w = self.walk.clone()
        self.one = w.step(1, evaluate=True, last=True)[0]  # a one-token prompt

    # -- the full calls ---------------------------------------------------------------------------------
    def _extend(self, k: int) -> None:
        if len(self.F) >= k:
            return
        if k * GRAPH_CALL_COST > MAX_CALLS:
            # the replay's own ceiling (``peak.prefill``): a CUDA call walks its graphs, ~GRAPH_CALL_COST CPU calls of
            # work; without it a 2^30-token context made ``prepare`` / ``fits`` walk 524,288 calls (hostile pass 8)
            raise UnsupportedError(f"{k:,} full prefill calls of {self.c:,} tokens: on a backend that commits graphs "
                                   f"(CUDA) at most {MAX_CALLS // GRAPH_CALL_COST:,} are replayed; use a larger chunk "
                                   "or fewer tokens")
        # the full calls' exact totals are the raw replay's own table (``full_call_totals``, one per model variant:
        # a call's total is the larger of its variants'), not a second walk of the same calls' graph windows: an
        # estimate walked every full call twice, once for the replay and once here (session 10's profile: a CUDA
        # ``--chunk 1`` estimate spent half its time in each); this walk only steps the caches, for the snapshots
        profile, routes, chunk, dtype, nax, kv_scale, worst = self._args
        tabs = [full_call_totals(profile, routes, chunk, dtype, nax, kv_scale, w, [], k) for w in self.walk.variants]
        while len(self.F) < k:
            j = len(self.F)
            f = max(t[j] for t in tabs)
            self.walk.step(self.c, evaluate=False)
            self.F.append(f)
            self.FM.append(f if j == 0 or f > self.FM[-1] else self.FM[-1])
            self.snaps.append(self.walk.clone())

    def _full_part(self, k: int, r: int) -> int | None:
        """The exact replay's maximum over the full calls (every one: ``full_call_totals``), a running maximum."""
        return self.FM[k - 1] if k else None

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
        # (ranges and a virtual sequence, not lists: a chunk of 2^30 must not build 2^30 integers)
        grows = range((-k * c) % STEP or STEP, c, STEP)
        grow_set = grows  # membership of a range is arithmetic
        rest = _Skipping(c, grows)

        def leaves(kind: str, parts, s_of, rs: list) -> _Leaves:
            cache: dict[int, list] = {}
            sigs: dict[int, tuple] = {}

            def infos(q, var):
                v = cache.get(q)
                if v is None:
                    v = cache[q] = [_Ops(items, act) for _, items in var]
                return v

            def sig(t):
                v = sigs.get(t)
                if v is None:
                    v = sigs[t] = tuple(_shape(items) for _, items in parts(rs[t])[1])
                return v

            def split_at(i, j):
                """Where the items' structure changes first after ``rs[i]`` (a binary search over the structure
                alone: cheaper than a bound), or the middle where both ends share it."""
                if sig(j) == sig(i):
                    return (i + j) // 2
                return last_same(sig, i, j)

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
                emb = None
                if sig(i) != sig(j):  # a route or a kernel's node count changes inside: split there (no bound)
                    oa = ob = ()
                else:
                    oa, ob = infos(a, var_a), infos(b, var_b)
                if oa and all(x.below(y) for x, y in zip(oa, ob)):
                    up = max(base_a, base_b) + max(self.walk.window_bound(y, x.per_el, y_ops)
                                                   for x, y_ops, y in zip(oa, ob, var_b))
                elif oa:
                    # a gated-DeltaNet loop's spans: op counts that grow with the query count (``_Ops.embed``)
                    emb = [x.embed(y) for x, y in zip(oa, ob)]
                    if all(e is not None for e in emb):
                        ws = [self.walk.window_bound(y, None, y_ops, e)  # (the bottom's per-op elements unread)
                              for x, y_ops, y, e in zip(oa, ob, var_b, emb)]
                        if all(w is not None for w in ws):
                            up = max(base_a, base_b) + max(ws)
                if up is None:
                    misses += 1
                    if misses > MAX_MISSES:
                        # the items' structure changes with nearly every query count (a gated-DeltaNet loop
                        # split by its own rule): no bucket holds; these lengths are answered exactly
                        self._shapeless.add(kind)
                        out += [(rs[x], None, False) for x, _ in [(i, j)] + todo]
                        break
                if up is not None and ((floor is not None and up <= floor) or (b - a < MIN_BUCKET and 8 * (b - a) <= a)
                                       or (emb is not None and floor is None and EMBED_RATIO * (b - a) <= a)):
                    out.append((a, up, False))
                    continue
                m = split_at(i, j) if up is None else (i + j) // 2
                todo += [(i, m), (m + 1, j)]
            return _Leaves(out)

        res = (leaves("call", p_parts, lambda q: q, range(1, c)), leaves("last", l_parts, lambda q: 1, rest),
               leaves("last", l_parts, lambda q: 1, grows), grow_set)
        self._leaves[k] = res
        return res

    # -- public ------------------------------------------------------------------------------------------
    def bounds(self, new_tokens: int) -> tuple[int, int | None]:
        """(lower, upper) of the exact replay's total for a prompt of ``new_tokens`` without a prefix; equal
        where it is known exactly; upper ``None`` where no bucket bounds the shorter call or the last token
        (``exact`` answers then)."""
        if _TILED_VERSION[0] != self._gen:
            self._reset()
        if new_tokens <= 1:
            return self.one, self.one
        k, r = divmod(new_tokens - 1, self.c)
        if len(self.F) < k:
            self._extend(k)
        if r == 1 or (not k and r == self.c - 1):
            # the envelope's dominating lengths other than n itself (k c + 2, and a chunk c; peak.envelope's P(n)):
            # exact, once per length, so that an envelope over them has no band
            v = self._pexact.get(new_tokens)
            if v is None:
                v = self._pexact[new_tokens] = self._exact_calls(new_tokens)
            return v, v
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

    def cum_upper(self, new_tokens: int) -> int | None:
        """``CU(n)``: the largest bucket bound over every shorter call and last token of ``r' <= r`` queries in the
        prompt's block (``n = k c + 1 + r``), i.e. an upper bound of every such call that only grows with ``r``
        (the CUDA envelope's within-block term, ``peak.envelope``); 0 where ``r = 0``; ``None`` where a bucket up
        to ``r`` has no bound (items whose structure changes with every query count: ``MAX_MISSES``)."""
        if _TILED_VERSION[0] != self._gen:
            self._reset()
        if new_tokens <= 1:
            return 0
        k, r = divmod(new_tokens - 1, self.c)
        if not r:
            return 0
        if len(self.F) < k:
            self._extend(k)
        lv = self._leaves.get(k) or self._build(k)
        v = 0
        for leaves in lv[:3]:
            u = leaves.cum_at(r)
            if u is None:
                return None
            if u > v:
                v = u
        return v

    def block_max(self, k: int) -> int | None:
        """``max over j < k of cum_upper((j + 1) c)``: the largest bucket bound of every block before ``k`` (the CUDA
        envelope carries it into the next block: a bucket bound above the replay there is what an earlier length
        reports); 0 for ``k = 0``, ``None`` where one of them has no bound."""
        bm = self._bm
        while len(bm) <= k:
            j = len(bm) - 1  # bm[j + 1] = max(bm[j], CU at block j's end)
            prev = bm[-1]
            u = self.cum_upper((j + 1) * self.c) if prev is not None else None
            bm.append(None if prev is None or u is None else max(prev, u))
        return bm[k]

    def exact(self, new_tokens: int) -> int:
        """The exact replay's total, from the tables and the calls that depend on the length (the shorter
        call, then the last token, each only where its bucket's bound is above what is known already)."""
        lo, hi = self.bounds(new_tokens)
        if lo == hi:
            return lo
        if len(self._exact) >= 4096:
            self._exact.clear()
        v = self._exact.get(new_tokens)
        if v is None:
            v = self._exact[new_tokens] = self._exact_calls(new_tokens)
        return v

    def _exact_calls(self, new_tokens: int) -> int:
        k, r = divmod(new_tokens - 1, self.c)
        lv = self._leaves.get(k)
        v = self._full_part(k, r) or 0
        w = self.snaps[k].clone()
        if lv is None:
            # the offset's buckets are not built (the envelope's terms 2 and c, and k c + 2, each once): its two calls
            # replayed cost less than its buckets (a gated-DeltaNet's block 0: ~100 bounds), same total
            v = max(v, w.step(r, evaluate=True)[0])
            return max(v, w.step(1, evaluate=True, last=True)[0])
        pu, pe = lv[0].at(r)
        tu, te = (lv[2] if r in lv[3] else lv[1]).at(r)
        if pu is not None and (pe or pu <= v):  # known exactly, or never the highest
            v = max(v, pu) if pe else v
            w.step(r, evaluate=False)
        else:
            v = max(v, w.step(r, evaluate=True)[0])
        if tu is not None and (te or tu <= v):
            v = max(v, tu) if te else v
        else:
            v = max(v, w.step(1, evaluate=True, last=True)[0])
        return v

    def prepare(self, max_k: int | None = None) -> None:
        """Every table up to the model's context (or ``max_k`` full calls)."""
        K = max_k if max_k is not None else self.max_k
        if K is None:
            return
        if _TILED_VERSION[0] != self._gen:
            self._reset()
        self._extend(K)
        for k in range(K + 1):
            if k not in self._leaves:
                self._build(k)
            if k:
                self._last0(k)
            self.bounds(k * self.c + 2)
        self.block_max(K)
        self.bounds(self.c)
        self.bounds(2)


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
    return CudaFit(profile, kr, chunk, dtype, nax, 1.0, b.worst_case)
