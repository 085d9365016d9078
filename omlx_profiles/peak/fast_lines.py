"""Piecewise-linear upper (and lower) bounds of one prefill call's peak, as a function of the call's offset.

``peak.fast`` answers a request from these without replaying it. One call of ``q`` queries at offset ``off``
(tokens already in the cache) holds the caches, adds rows and runs its ops over the executor window; every
term is linear in ``off`` once the call's *layout* is fixed: the kernel routes (which change at kv-length
thresholds of the kernel table), the sliding caches' rows (which saturate at the window) and each cache
update's shape (copy into a grown buffer, or in place). So a bound is linear on each piece between those
breakpoints, and two samples per piece give it exactly: one line per executor-window position, whose upper
envelope is the call's window maximum.

What a request's history leaves unknown is taken at its worst, so the line bounds every history:

* a growing ``KVCache`` holds at most ``max(256 * ceil(S / 256), 256) - 1`` rows past the offset (``R``; a
  call grows only from fewer than ``q`` rows past it, then holds ``< 256 * ceil(q / 256)`` past the new
  offset), and the call's copy of the old buffer is charged at that capacity;
* a sliding cache holds at most ``min(off + 255, window - 1 + S)`` rows (a one-token call grows the buffer
  up to 255 rows ahead; a multi-token call keeps ``window - 1`` rows plus the call's own);
* the cache update's layout: a copy (6 ops, the old buffer's bytes) or in place (2 ops, nothing). The window
  maximum never falls when an item takes fewer executor slots or more bytes (every window of the wider
  layout maps into one of the narrower), so the update is charged with the copy's bytes in the in-place
  op count: one layout bounds both (``_contract``). The lower bound does the reverse, except for the
  copies it knows happen: a call that must grow every ``KVCache`` (``CallModel.grows``) and, without a
  prefix, a rotating cache after a full chunk keep their copy layout and bytes (at least the offset's rows).

The call's query count enters through buckets (a call of ``q <= Q`` queries is charged as ``Q``, within the
same route: bucket tops include every query-length threshold of the kernel table).
"""
from __future__ import annotations

from dataclasses import replace

from ..units import DTYPE_BYTES
from ..kv.replay import STEP
from ..registry.profile import Profile
from . import executor
from .ops.items import EntryStep
from .ops.recurrent import state_snapshot_bytes
from .call import call_window, items_of_call, pinned_bytes, run_ahead_ops
from .replay import KV_SCALED_KINDS, scale_up

from .fast_pieces import FAR, GROWING, INF, Pieces, _hull, _monotone, cycle_reach, last_same, reach  # noqa: F401


class CallModel:
    """Samples one call's total (held + added + pinned + window) for a profile, backend and history chunk."""

    def __init__(self, profile: Profile, routes, tiled: dict, dtype: str, nax: bool, worst: str | None,
                 kv_scale: float, fresh_history: bool = False, prev_one: bool = False):
        self.fresh_history = fresh_history
        self.prev_one = prev_one  # the calls follow a one-token call (a prompt shorter than a chunk after a prefix)
        self.p = profile
        self.routes = routes
        self.tiled = tiled
        self.dtype = dtype
        self.act = DTYPE_BYTES[dtype]
        self.nax = nax
        self.worst = worst
        self.kv_scale = kv_scale
        self.counts: dict[str, int] = {}
        for n in profile.layer_names:
            self.counts[n] = self.counts.get(n, 0) + 1
        # floor/ceil of every item's bytes: the line through two samples may sit this much below a third
        self.slack = 64 + 64 * len(profile.layer_names)
        self.period = _layer_period(profile)
        #: ChunkedKVCache sizes (llama4's chunked attention): bounded after a prefix only (``peak.prefix_lines``,
        #: ``peak.fast_cuda_prefix``; ``FastPeak`` answers such a model exactly)
        self.chunks = sorted({e.chunk for lt in profile.layer_types.values() for e in lt.entries if e.kind == "chunked"})

    def reach(self, S: int, last: bool = False) -> int:
        """``reach(S)``; for a prompt without a cached prefix, the chunk calls' own capacity phases: the
        history is then fixed (``cycle_reach``). The last token follows one more call, which either fits (fewer
        rows left) or grows by its own step (fewer than 256 left past it): at most ``cycle_reach + 255``."""
        if self.fresh_history:
            return cycle_reach(S) if not last else min(reach(S), cycle_reach(S) + STEP - 1)
        return reach(S)

    def grows(self, Q: int, S: int) -> bool:
        """Every call of ``Q`` queries after the first (history chunk ``S``) grows every ``KVCache``: fewer
        than ``Q`` rows are ever free past the offset before it (``reach``), so the update is the copy layout
        (6 ops, the old buffer of at least ``offset`` rows and the ``256 * ceil(Q / 256)`` zero rows), never
        in place; the caches then hold at least ``offset + 256 * ceil(Q / 256)`` rows."""
        return self.reach(S) < Q

    # -- breakpoints ---------------------------------------------------------------------------------
    def windows(self) -> set[int]:
        return {e.window for lt in self.p.layer_types.values() for e in lt.entries if e.kind == "sliding"}

    def kv_thresholds(self, q: int | None = None) -> set[int]:
        """Key counts where a route (or its tile) changes, for calls of ``q`` queries (``None``: any)."""
        t: set[int] = set()
        for r in self.routes.table.routes:
            w = r.when
            if q is not None and ((w.query_len_min and q < w.query_len_min) or (w.query_len_max and q > w.query_len_max)):
                continue
            if w.kv_len_min:
                t.add(w.kv_len_min)
            if r.kv_tile:
                t.add(r.kv_tile)
        if q is None or q > 1:
            for min_kv, tile in self.tiled.values():
                t.update((min_kv, tile))
        mla = self.p.mla
        if mla is not None and getattr(mla, "index_topk", None):
            t.add(mla.index_topk + 1)  # DSA scores its keys past the top-k (ops/mla.py)
        return t

    def q_tops(self, S: int) -> list[int]:
        """Query-count buckets for a history chunk ``S``: every route threshold on the query length, and
        powers of 4 in between; ``S`` last."""
        tops = {1, S - 1 if S > 1 else 1, S}  # the chunk's own bucket holds full calls only
        gqas = {(self.p.num_heads or e.n_kv) // max(1, e.n_kv) for lt in self.p.layer_types.values()
                for e in lt.entries if getattr(e, "n_kv", 0)}
        for r in self.routes.table.routes:
            w = r.when
            if w.query_len_max:
                tops.add(w.query_len_max)
            if w.query_len_min and w.query_len_min > 1:
                tops.add(w.query_len_min - 1)
            if w.gqa_times_query_max:
                for g in gqas | {1}:
                    if g:
                        tops.add(w.gqa_times_query_max // g)
            if r.q_tile:
                tops.add(r.q_tile)
        for w in getattr(self.routes.executor, "inflight_ops_by_chunk", None) or ():
            tops.add(w.chunk)
        self.changes = set(self._split_layouts(S, sorted(t for t in tops if 1 <= t <= S)))
        q = 4
        while q < S:  # powers of 4 in between: a shorter call is charged at most 4x its queries
            tops.add(q)
            q *= 4
        # every 256-row step: the rows a growing call adds (``256 * ceil(q / 256)``) are one per bucket, and
        # a call of q queries is charged at most 255 more (the lower bound's band stays at a few KB)
        tops.update(range(STEP, S, STEP))
        return sorted(self.changes | {t for t in tops if 1 <= t <= S})

    def _layout(self, q: int, S: int) -> tuple:
        """The call's item structure (what sets the window positions) at ``q`` queries."""
        off = 4 * STEP + S
        steps, _, _ = self._steps(q, S, off, "one" if q == 1 else "upper")
        _, items = items_of_call(self.p, q, off, steps, self.routes, self.tiled, self.dtype, self.act, self.nax,
                               last=False, direct=False, bound=self.worst == "bound")
        return tuple((it.term, it.ops, it.views, it.carry_items, it.out < 0) for it in items)

    def _split_layouts(self, S: int, tops: list[int]) -> list[int]:
        """More bucket tops wherever the item structure changes with the query count inside a bucket (an op
        the op model adds past a token count, e.g. the MoE's sorted gather): within a bucket the structure
        is one, so a call of fewer queries is never above the bucket's (every item grows with them)."""
        out: list[int] = []
        prev = 0
        for Q in tops:
            lo = prev + 1
            while lo < Q:
                base = self._layout(lo, S)
                if self._layout(Q, S) == base:
                    break
                a = last_same(lambda q: self._layout(q, S), lo, Q)  # the first change is at a + 1
                out.append(a)
                lo = a + 1
            out.append(Q)
            prev = Q
        return out

    def breaks(self, Q: int, S: int, mode: str, known: str | None = None) -> list[int]:
        b = {1}
        for W in self.windows():
            if mode in ("upper", "fit") and not _slides_known(known):
                b.update((W - 256, W - 255, W - 256 + S))
            elif mode in ("last", "one"):
                b.update((W - 256 + (Q if mode == "last" else S), W - 1))
            else:  # lower: the rotating buffer's rows saturate, and pass the call's own (``_steps``)
                b.update((W - 1, W, W - 1 + S, W + S, W - 1 + Q, W + Q))
        for C in self.chunks:  # a chunked cache's offset saturates at its chunk, its buffer at chunk + S (``_steps``)
            b.update((C, C + 1, C + S, C + S + 1))
        sliding = bool(self.windows())
        first = 1
        if sliding and self.fresh_history and S > 1 and (mode == "lower" or _slides_known(known)):
            # the rotating rows are known from the first full chunk on (``_steps``): a sample before it charges
            # the unknown history's, and the upper lines' running maximum (or a line through both) would carry
            # that into every later call (gemma-3-4b metal, chunk 700, the call at 700: 31-141 MB over). Every
            # caller asks these lines at offsets of at least a chunk (a call after a full chunk), so they start there
            b.add(S)
            if mode != "lower":
                first = S
        for t in self.kv_thresholds(1 if mode in ("last", "one") else Q):
            if mode in ("last", "one"):
                b.add(t - 1)
                continue
            b.add(t - Q)
            if sliding:
                b.add(t - Q - (0 if mode == "lower" else 255))
        return sorted(x for x in b if x >= first)

    # -- one synthetic call --------------------------------------------------------------------------
    def _steps(self, Q: int, S: int, off: int, mode: str, known: str | None = None) -> tuple[dict, int, int]:
        """The call's cache steps in the bounding configuration, and two byte counts: what the caches hold
        during the call at most (``hold``: held before + rows added), and what the call adds at most (``add``).
        ``known`` (the last token of a prompt whose ``KVCache`` rows are known, ``FastPeak._refined``): every
        ``KVCache`` grows by one step from exactly the offset (``"grow"``), or updates in place (``"fit"``: its
        capacity's rows past the offset are the caller's, not counted here); ``"slide"``: a call after a full
        chunk of a prompt without a prefix (or past the first full chunk after one), whose rotating caches'
        rows are known as in the lower bound; ``("phase", free, trimmed)``: a full call of a chunk that is not
        whole 256-row steps, after a full chunk, whose ``KVCache`` holds ``free`` rows past the offset and is
        trimmed to it (``kv.replay.kv_call``) or not, then grows by ``256 * ceil(Q / 256)`` (rotating rows
        known too); ``("phasefit", free)``: the shorter call of such a prompt whose queries fit in the ``free``
        rows (in place, nothing added; rotating rows known)."""
        p, act = self.p, self.act
        R = self.reach(S, mode in ("last", "one"))
        G = -(-Q // STEP) * STEP
        steps: dict = {}
        hold = hold_kv = add = add_kv = 0
        for name, lt in p.layer_types.items():
            c = self.counts[name]
            out = []
            for e in lt.entries:
                rb = e.row_elements * act * c
                if e.kind == "none":
                    out.append(EntryStep("none", 0, 0, 0))
                elif e.kind == "state":
                    out.append(EntryStep("state", 1, 1, 0))
                    hold += c * e.state_bytes(act)
                    if mode != "lower":  # the previous call's conv views (at most a chunk's)
                        hold += c * state_snapshot_bytes(p, lt, e, S, act)
                elif e.kind in GROWING:
                    if isinstance(known, tuple) and known[0] == "phasefit":  # in place at ``free`` rows past off
                        old = off + known[1]
                        out.append(EntryStep(e.kind, old, old, off + Q))
                        hk, ak = old * rb, 0
                    elif isinstance(known, tuple):  # ("phase", free rows, trimmed): a full call of an odd chunk
                        old = off + known[1]
                        new = (off if known[2] else old) + G
                        out.append(EntryStep(e.kind, old, new, off + Q, zero_rows=G))
                        hk, ak = max(old, new) * rb, max(0, new - old) * rb
                    elif mode == "lower" and self.grows(Q, S) and off:
                        # every such call grows (``grows``): the copy layout, its old buffer at least the offset
                        out.append(EntryStep(e.kind, off, off + G, off + Q, zero_rows=G))
                        hk, ak = (off + G) * rb, 0
                    elif mode == "lower":
                        out.append(EntryStep(e.kind, off + Q, off + Q, off + Q))
                        hk, ak = (off + Q) * rb, 0
                    elif known == "grow":
                        out.append(EntryStep(e.kind, off, off + STEP, off + 1, zero_rows=STEP))
                        hk, ak = (off + STEP) * rb, STEP * rb
                    elif known == "fit":
                        out.append(EntryStep(e.kind, off, off, off + 1))
                        hk, ak = off * rb, 0
                    elif mode in ("last", "one"):
                        old = off + R
                        out.append(EntryStep(e.kind, old, old + STEP, off + 1, zero_rows=STEP))
                        hk, ak = (off + R + 1) * rb, STEP * rb
                    elif mode == "fit":  # the call fits in the capacity: in place, nothing added
                        old = off + R
                        out.append(EntryStep(e.kind, old, old, off + Q))
                        hk, ak = old * rb, 0
                    else:  # the call grows: from fewer than Q rows past the offset (and at most R)
                        old = off + min(Q - 1, R)
                        out.append(EntryStep(e.kind, old, old + G, off + Q, zero_rows=G))
                        hk, ak = (old + G) * rb, G * rb
                    if e.kind in KV_SCALED_KINDS:
                        hold_kv += hk
                        add_kv += ak
                    else:
                        hold += hk
                        add += ak
                elif e.kind == "sliding":
                    W = e.window
                    if (mode == "lower" or _slides_known(known)) and self.fresh_history and off >= S > 1:
                        # after a full chunk of a prompt without a prefix the rotating buffer is known: it
                        # holds min(offset, window - 1 + S) rows in temporal order, trims to window - 1
                        # and concatenates the call's (``RotatingState``)
                        old = min(off, W - 1 + S)
                        new = min(old, W - 1) + Q
                        out.append(EntryStep("sliding", old, new, new, trim_rows=W - 1 if old > W - 1 else 0))
                        hold += max(old, new) * rb
                        if mode != "lower":
                            add += Q * rb
                    elif mode == "lower":
                        old = min(off, W - 1)
                        out.append(EntryStep("sliding", old + Q, old + Q, old + Q))
                        hold += (old + Q) * rb
                    elif mode in ("last", "one"):
                        # the previous call kept window - 1 rows plus its own: for the last token that call
                        # has at most ``Q`` queries (the caller's bucket), else at most a chunk
                        old = min(off + 255, W - 1 + (Q if mode == "last" else 1 if self.prev_one else S))
                        out.append(EntryStep("sliding", old, old + STEP, min(off + 1, W), zero_rows=STEP))
                        hold += (old + STEP) * rb
                        add += STEP * rb
                    else:  # the previous call: a chunk (window - 1 rows plus its own), or one token (<= window)
                        old = min(off + 255, W if self.prev_one else W - 1 + S)
                        keep = min(old, W - 1)
                        out.append(EntryStep("sliding", old, keep + Q, keep + Q, trim_rows=keep))
                        hold += max(old, keep + Q) * rb
                        add += Q * rb
                elif e.kind == "chunked" and mode != "lower":
                    # llama4's ChunkedKVCache (``kv.replay.ChunkedState``): before each call it trims its buffer to
                    # the last ``chunk`` rows, then grows like a KVCache from there, so a call at offset ``off``
                    # starts from min(off, chunk) rows (its keys: that plus the call's), holds at most R rows past
                    # them in capacity (the same growth rule), and before the trim at most the previous call's
                    # min(off, chunk + S) + R; a call that grows copies at most min(Q - 1, R) rows past them and adds
                    # 256 * ceil(Q / 256) zero rows. Each is non-decreasing in ``off``, linear between ``breaks``.
                    C = e.chunk
                    o2 = off if off < C else C
                    before = min(off, C + S) + R
                    if mode in ("last", "one"):
                        old = o2 + R
                        out.append(EntryStep("chunked", old, old + STEP, o2 + 1, zero_rows=old + STEP - o2))
                        hold += (before + STEP) * rb
                        add += STEP * rb
                    elif mode == "fit":
                        old = o2 + R
                        out.append(EntryStep("chunked", old, old, o2 + Q))
                        hold += before * rb
                    else:
                        old = o2 + min(Q - 1, R)
                        out.append(EntryStep("chunked", old, old + G, o2 + Q, zero_rows=old + G - o2))
                        hold += (before + G) * rb
                        add += G * rb
                else:
                    raise ValueError(f"no bound for a {e.kind} cache")  # chunked, lower: answered exactly
            steps[name] = tuple(out)
        hold += scale_up(hold_kv, self.kv_scale)
        add += scale_up(add_kv, self.kv_scale)
        return steps, hold, add

    def add_bytes(self, S: int) -> int:
        """What a call of ``S`` queries adds to the caches at most (rows of every cache; no fresh state)."""
        return self._steps(S, S, 1, "upper")[2]

    def sample(self, Q: int, S: int, off: int, mode: str, contract: bool = True,
               known: str | None = None) -> tuple[list[dict], int, int]:
        """Every executor-window position's bytes (per window slid) of the bounding call, plus its ``hold``
        and ``add`` (``_steps``); ``pinned`` is in the window sums."""
        steps, hold, add = self._steps(Q, S, off, mode, known)
        last = mode == "last"
        q = 1 if mode in ("last", "one") else Q
        starts: list[int] = []
        ctx, items = items_of_call(self.p, q, off, steps, self.routes, self.tiled, self.dtype, self.act, self.nax,
                                 last=last, direct=False, bound=self.worst == "bound", layer_starts=starts)
        if contract:
            # the lower bound keeps a copy it knows happens: a growing cache's (``grows``), a sliding
            # cache's after a full chunk of a prompt without a prefix (``_steps``)
            grows = mode == "lower" and off > 0 and (self.grows(Q, S) or self.fresh_history and off >= S > 1)
            items = [_contract(it, mode, grows) for it in items]
        run_ahead = run_ahead_ops(self.routes) if self.worst else None
        ex = self.routes.executor
        wins = [(ex.window_for(q), ex.op_weight, ex.view_weight)] + ([(run_ahead, 1, 0)] if run_ahead else [])
        all_sums: list[dict] = []
        if ex.graph_commit is None:  # CUDA's graph commits count ops from the call's start: every item stays
            items = _drop_periods(items, starts, self.period, wins)  # the slots as slid (contracted)
            executor.window_sums(items, wins[::-1], all_sums)  # the run-ahead window's, then the call's
        else:  # (no line holds with graph commits: ``FastPeak.exact_only``)
            if run_ahead is not None:
                executor.window_max(items, run_ahead, 1, 0, all_sums=all_sums)
            call_window(items, ex, q, self.act, all_sums)
        pinned = sum(pinned_bytes(self.p, steps, q, self.act).values())
        return [{pos: v + pinned for pos, v in s.items()} for s in all_sums], hold, add

    def pieces(self, Q: int, S: int, mode: str, q_min: int = 1, known: str | None = None,
               both: bool = True) -> tuple[Pieces, Pieces | None]:
        """``_pieces`` of the call; a multi-token call that may either grow the caches or fit in them
        (``self.reach(S) >= q_min``) is the maximum of both layouts -- unless ``known`` fixes its ``KVCache``
        layout (a phase: grown from known free rows, or in place)."""
        t, b = self._pieces(Q, S, mode, known, both)
        if mode == "upper" and self.reach(S) >= q_min and not isinstance(known, tuple):
            t2, b2 = self._pieces(Q, S, "fit", both=both)
            t, b = t.merged(t2), (b.merged(b2) if both else None)
        return t, b

    def _pieces(self, Q: int, S: int, mode: str, known: str | None = None,
                both: bool = True) -> tuple[Pieces, Pieces | None]:
        """(held + peak, added + peak) of the call as ``Pieces`` over the offset. Between the breakpoints
        (``breaks``) a piece whose window layout still changes (an item that appears past a kv length the
        op model sets, e.g. DSA's indexer top-k) is split where it changes (bisection on the offset).
        ``both`` False: the first only (``None`` for the second: half the line arithmetic of a point's lines)."""
        # one token: a growing cache may grow or not, a sliding one rotate in place or not: one item bounds
        # both layouts of every update (``_contract``); the lower bound always takes the copy's slots
        contract = mode in ("lower", "last", "one") and not (known and not self.windows())
        if self.chunks and mode in ("upper", "fit"):
            # a chunked cache grows or fits on its own phase (its offset saturates at the chunk), not with the
            # full caches': every update charged with the copy's bytes in the in-place op count bounds both
            # layouts of each (``_contract``; CPU / Metal windows count ops, so fewer slots never lower one)
            contract = True
        memo: dict[int, tuple] = {}

        def at(off: int):
            r = memo.get(off)
            if r is None:
                r = memo[off] = self.sample(Q, S, off, mode, contract, known)
            return r

        def layout(r) -> tuple:
            return tuple(frozenset(x) for x in r[0])

        segs: list[tuple[int, int]] = []

        def split(lo: int, hi: int) -> None:
            if hi <= lo or layout(at(lo)) == layout(at(hi)):
                segs.append((lo, hi))
                return
            mid = (lo + hi) // 2
            split(lo, mid)
            split(mid + 1, hi)

        br = self.breaks(Q, S, mode, known)
        for k, lo in enumerate(br):
            split(lo, br[k + 1] - 1 if k + 1 < len(br) else lo + FAR)
        lower = mode == "lower"
        tot, beyond = [], []
        last_hi = segs[-1][1]
        for lo, hi in segs:
            (s1, h1, d1), (s2, h2, d2) = at(lo), at(hi)
            lt, lb = [], []
            span = hi - lo
            pairs = ((lt, h1, h2), (lb, d1, d2)) if both else ((lt, h1, h2),)
            for x, y in zip(s1, s2):
                for pos, v1 in x.items():
                    v2 = y[pos]
                    for out, e1, e2 in pairs:
                        a1, a2 = v1 + e1, v2 + e2
                        b = (a2 - a1) / span if span else 0.0
                        a = a1 - b * lo
                        out.append((a - self.slack, b) if lower else (a + self.slack, b))
            # lower: each position's line is below its window, and the maximum is above every window. The
            # last piece has no end: a line that only takes over past the samples is kept
            end = INF if hi == last_hi else hi
            tot.append(_hull(lt, lo, end))
            if both:
                beyond.append(_hull(lb, lo, end))
        starts = [lo for lo, _ in segs]
        if lower:
            return Pieces(starts, tot), (Pieces(starts, beyond) if both else None)
        return _monotone(Pieces(starts, tot)), (_monotone(Pieces(starts, beyond)) if both else None)


def _layer_period(p: Profile) -> tuple[int, int, int] | None:
    """``(a, Lp, k)``: layers ``a .. a + k Lp - 1`` repeat one pattern of ``Lp`` layer types (past DeepSeek's first
    dense layers, before the last layer, which may skip its output), ``k`` times; ``None`` where nothing repeats."""
    from .layers import dense_layer

    keys = [(n, dense_layer(p, i)) for i, n in enumerate(p.layer_names)]
    a = next((i for i, k in enumerate(keys) if not k[1]), len(keys))
    body = keys[a:-1]
    for lp in range(1, len(body) // 4 + 1):
        if all(body[i] == body[i + lp] for i in range(len(body) - lp)):
            return a, lp, len(body) // lp
    return None


def _drop_periods(items: list, starts: list[int], period, windows) -> list:
    """The call's items with the middle repeats of its layer pattern left out: an executor window's bytes depend
    only on the items it covers and the 8 before it (``executor.carried_per_item``), and the layers of one
    pattern repeat the same items, so every window that starts inside a repeat (and ends before the last ones)
    sums exactly what the same window one repeat earlier sums. Kept: what comes before the pattern, the first
    repeats (a window starting in the first, the one after it as the representative of every inner window,
    enough for the look-back), the last ones a window can reach from them, and what follows: every distinct
    window sum survives (to the float rounding of the running sums, far inside ``CallModel.slack``), in a
    fraction of the slots (62 layers -> a few repeats where the window is short). ``windows``: (slots,
    op weight, view weight) of every window slid over the items."""
    if period is None or not starts:
        return items
    a, lp, k = period
    lo, hi = starts[a], starts[a + lp]
    per = items[lo:hi]
    if not per:
        return items
    # the first repeat (windows looking back into what precedes it), the representative (one repeat of look-back
    # before it: 8 items, more repeats where one holds fewer), and the repeats a window touches before the end
    back = 1 if len(per) >= 8 else -(-8 // len(per))
    keep = 0
    for w, ow, vw in windows:
        slots = sum(max(1, it.ops * ow + it.views * vw) for it in per)
        keep = max(keep, back + 1 + -(-w // slots) + 1)
    if keep >= k:
        return items
    return items[:starts[a + keep * lp]] + items[starts[a + k * lp]:]


def _slides_known(known) -> bool:
    return known == "slide" or isinstance(known, tuple)


def _contract(it, mode: str, grows: bool = False):
    """A cache update in the layout that bounds both: the copy's bytes in the in-place op count (upper), or
    nothing in the copy's op count (lower)."""
    if it.term != "kv_update_copy":
        return it
    if mode == "lower":
        if it.ops == 6 and it.bytes and grows:  # a growing cache's copy, known to happen (``CallModel.grows``)
            return it
        return replace(it, bytes=0, ops=max(it.ops, 6), out=0)
    return replace(it, ops=min(it.ops, 2))
