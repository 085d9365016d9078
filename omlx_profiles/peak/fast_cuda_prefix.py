"""CUDA after a cached prefix: an upper bound of the prefill total that is monotone in the prompt AND the prefix,
read from per-profile tables in microseconds (issue 14 item 4, issue 18's ``fits`` speed).

Why: on CUDA the exact replay is not monotone after a prefix (gpt-oss-20b, 3,000 cached, chunk 700: 454 new tokens
7.8% above 455): MLX's graph commits (``executor.graph_ends``) end where a call's node and element counts say, and
those move with the call's query count and offset. Without a prefix ``peak.fast_cuda.CudaFit`` tabulates the full
calls once (they do not depend on the prompt); after a prefix every call's offset moves with the prefix, so no
table of exact calls serves two prefixes, and every request replayed (22-30 ms, session 8).

What this module bounds instead: every call a request makes after a prefix, whatever the prefix, as a function of
the call's query count ``q`` and offset ``o`` that is non-decreasing in both:

    B(q, o)  >= the total (held + added + pinned + window) of every call of q' <= q queries (not the last token)
                at an offset o' <= o, after any history of calls of at most S tokens (the prefix's and the
                prompt's, each ending on one token)
    BL(p, o) >= the same for the last token (it computes the logits) after a call of p' <= p queries (a rotating
                cache holds window - 1 rows plus that call's)

A request of ``n`` new tokens after ``c`` cached, ``n = k S + 1 + r``, makes ``k`` full calls at ``c .. c + (k-1) S``,
a shorter call of ``r`` at ``c + k S`` and the last token at ``c + n - 1``, so

    U(n, c) = max( B(S, c + (k-1) S) if k,  B(r, c + k S) if r,  BL(p, c + n - 1) ),  p = r, or S (r = 0 < k), or 1
                                                                                  (n = 1: the prefix's last token)

is above the exact replay, non-decreasing in ``c`` (every offset moves right), within a block in ``n`` (``r`` grows
at the same offset, the last token moves right after a longer call) and across blocks (the shorter call of ``S - 1``
becomes a full call of ``S`` at the same offset, the last token follows a chunk). ``peak.envelope.CudaPrefixEnvelope`` reports ``max(E(n, 0), U(n, c))``.

How ``B`` is built: a grid of cells, query buckets ``(Q_{i-1}, Q_i]`` (``CallModel.q_tops``: every route threshold,
powers of 4, every 256-row step) x offset ranges ``[o_lo, o_hi]``. A cell's bound is its top call (``Q_i`` queries
at ``o_hi``) in the bounding history of ``peak.fast_lines.CallModel._steps`` (the caches at the most rows a history
can leave: the same worst case the CPU / Metal lines take), for each cache-update LAYOUT a call of the cell can
take (a growing ``KVCache`` grows (a copy, 6 ops) or fits in place (2 ops); a one-token update of a rotating cache
grows or not), each layout bounded on its own: nodes decide where graphs end, so layouts are not merged as the
lines merge them. Within a cell and layout every call has the same item structure (checked at the cell's corners;
a cell whose corners differ is split) and every item's bytes and input elements grow with ``q`` and ``o``, so the
graph chain of each call lies between the top's (most elements: graphs end earliest) and a chain whose graphs end
on the node limit alone (no elements: the latest any call's can end): ``fast_cuda.chain_graph_window`` over that
interval bounds the window of every call of the cell. The caches' rows grow linearly with the offset: they are
taken out of the cell's value (``Hbase``) and added back at the request's own offset, so a cell charges the
window and what the caches hold past the offset, not a whole cell's worth of rows. Cumulative maxima over lower
cells make ``B`` non-decreasing by construction.

Cost: the cells up to an offset are built the first time a request reaches it (``prepare``: to the model's context);
then a request is a few bisections. Not covered by the query buckets: recurrent layers (gated-DeltaNet, conv state:
their items change structure with nearly every query count; qwen3.5 at chunk 52 builds, in about a minute) -- those
take ``CudaCounts`` (one table per query count a request makes, session 12: ``prefix_table``). Chunked attention
(llama4's ChunkedKVCache) is covered since session 12: its cache grows from min(offset, chunk) on a phase of its
own, so its grow / in-place layouts are enumerated apart from the full caches' (``_groups``, ``_configs``). Not
covered (``None``: the exact envelope answers): a recurrent model with a sliding window or chunked attention, any
model whose items change structure too often inside an offset range (``MAX_SPLITS``).
"""
from __future__ import annotations

import bisect
from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from ..registry.profile import Profile
from .call import items_of_call, pinned_bytes, run_ahead_ops, validate_profile
from .executor import window_max
from .fast_cuda import _Ops, _sig, chain_graph_window, free_graph_window
from .fast_lines import CallModel
from .fast_pieces import GROWING, last_same, reach
from .kernels import _TILED_VERSION, KernelRoutes, tiled_state
from .replay import KV_SCALED_KINDS
from .request import check_table_chunk

#: An offset cell starting at ``o`` is about ``o / CELL_FRACTION`` tokens wide, in whole 256-row steps: the rows the
#: caches hold are charged at the request's own offset, but a growing cache's copy and the attention's keys inside
#: the window are charged at the cell's end, so a cell costs about 1 / CELL_FRACTION of them.
CELL_FRACTION = 8
#: Splits of one offset range (corners of different item structure), or query buckets added past
#: ``CallModel.q_tops``'s, before the profile is given up (``None``: the exact envelope answers).
MAX_SPLITS = 24
#: Bytes added to every cell: float rounding of ``Hbase`` and of the window sums.
SLACK = 256
#: A layout's range is halved (at most ``REFINE`` times) while its window bound is more than 1 / REFINE_REL (and
#: REFINE_ABS bytes) above its top call's own window (``CudaPrefix._part``).
REFINE = 2
REFINE_REL = 16
REFINE_ABS = 32 << 20


class _NoBound(Exception):
    """A cell whose item structure changes too often to bound: the profile is answered by the exact envelope."""


def request_upper(S: int, new: int, cached: int, last, full, call) -> int | None:
    """``U(n, c)`` of a request of ``n = k S + 1 + r`` new tokens after ``c`` cached (module doc), the one formula of
    ``CudaPrefix.upper`` and ``CudaCounts.upper`` (their tables differ, not the request's calls):

        U(n, c) = max( BL(c + n - 1) after a call of p queries,  B_S(c + (k-1) S) if k,  B(r, c + k S) if r )

    with ``p`` the call before the last token: the shorter call ``r``, a full chunk, or (one new token) the prefix's
    own last token. ``last(o, p)``, ``full(o)`` and ``call(q, o)`` are the tables' cumulative bounds, asked in that
    order (``CudaCounts`` builds its tables in it); ``None`` where one has no bound (``_NoBound``)."""
    k, r = divmod(new - 1, S)
    try:
        v = last(cached + new - 1, r if r else (S if k else 1))
        if k:
            u = full(cached + (k - 1) * S)
            if u > v:
                v = u
        if r:
            u = call(r, cached + k * S)
            if u > v:
                v = u
        return v
    except _NoBound:
        return None


class CudaPrefix:
    """``B(q, o)`` and ``BL(o)`` of one profile, chunk size, dtype and KV width (module doc), built lazily by
    offset. ``upper(new, cached)`` is ``U(n, c)``."""

    def __init__(self, profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None = None,
                 nax: bool = False, kv_scale: float = 1.0, worst: str | None = None, exact_q: bool = False,
                 q: int | None = None, last: bool = True):
        validate_profile(profile)
        kinds = {e.kind for lt in profile.layer_types.values() for e in lt.entries}
        if "state" in kinds and not exact_q:
            # a recurrent layer's items change structure with the query count (gated-DeltaNet spans, conv views):
            # cells hold for qwen3.5 at chunk 52, but cost about a minute to build -- not done (the exact envelope).
            # A table of ONE query count (``exact_q``) has no query buckets to split: it is built
            raise UnsupportedError("recurrent state: no CUDA prefix bound")
        #: ``exact_q``: the table bounds calls of exactly ``q`` queries (default ``chunk``; 0: none) after a history of
        #: chunks of at most ``chunk``, and (``last``) the last token after a chunk, not calls of every count up to
        #: it: one bucket, no split by query count (``transient_bound``: one chunk's transient; ``CudaCounts``)
        self.exact_q = exact_q
        self.q = chunk if q is None else q
        self.refine = REFINE
        self.frac = CELL_FRACTION  # cells about offset / frac wide (``_end``)
        self.with_last = last
        self.p = profile
        self.kr = routes
        self.S = chunk
        self.dtype = dtype
        self.nax = nax
        self.kv_scale = float(kv_scale)
        self.worst = worst
        self.max_o = profile.max_context or None
        self._reset()

    def _reset(self) -> None:
        from .call import activation_dtype

        self._gen = _TILED_VERSION[0]
        dt, act = activation_dtype(self.p, self.dtype)
        self.dt, self.act = dt, act
        self.model = CallModel(self.p, self.kr, tiled_state()[1], dt, self.nax, self.worst, self.kv_scale)
        self.R = reach(self.S)
        gc = self.kr.executor.graph_commit
        self.gc = gc
        self.run_ahead = run_ahead_ops(self.kr) if self.worst else None
        self.failed = False
        if self.exact_q:
            self.tops = [self.q] if self.q else []
        else:
            try:
                self.tops = self._split_tops(self.model.q_tops(self.S))
            except _NoBound:
                self.tops, self.failed = [self.S], True
        # Hbase(o) = o * rb: the bytes one more row of every growing cache holds (all layers, KV width applied)
        rb_kv = rb_other = 0
        for name, lt in self.p.layer_types.items():
            c = self.model.counts[name]
            for e in lt.entries:
                if e.kind in GROWING:
                    b = e.row_elements * act * c
                    if e.kind in KV_SCALED_KINDS:
                        rb_kv += b
                    else:
                        rb_other += b
        self.rb = rb_other + rb_kv * self.kv_scale
        self.groups = self._groups()
        # the last token per bucket of the call before it (a rotating cache holds window - 1 rows plus that call's:
        # after a one-token prefix end at most a window, after a chunk window - 1 + S), as ``peak.fast`` does
        S = self.S
        self.ltops = sorted({1, S} | {4 ** j for j in range(1, 8) if 4 ** j < S}) if any(
            g[0] == "sliding" for g in self.groups) and not self.exact_q else [S] if self.with_last else []
        # cells: offset ranges [bounds[j], bounds[j + 1] - 1]; per range the cumulative bound per query bucket
        # (cum[j][i]) and of the last token (cuml[j])
        self.bounds: list[int] = [1]
        self.cum: list[list[int]] = []
        self.cuml: list[list[int]] = []

    def _split_tops(self, tops: list[int]) -> list[int]:
        """``tops`` with a bucket end wherever the call's item structure changes with the query count inside a
        bucket, kernel nodes included (``CallModel.q_tops`` splits on the ops; CUDA's graphs end on nodes: an MoE
        sort takes more nodes past a token count), at a reference offset; a change elsewhere shows as a cell whose
        corners differ (split by offset)."""
        from ..kv.replay import STEP

        off = 4 * STEP + self.S

        def sig(q):
            return tuple(_sig(items) for _, items in self._call(q, off, "one" if q == 1 else "upper", frozenset())[2])

        out: list[int] = []
        prev = 0
        for Q in tops:
            lo = prev + 1
            while lo < Q:
                if len(out) >= len(tops) + MAX_SPLITS:
                    # the structure changes with nearly every query count (a gated-DeltaNet's recurrence spans)
                    raise _NoBound
                base = sig(lo)
                if sig(Q) == base:
                    break
                a = last_same(sig, lo, Q)  # the first change is at a + 1
                out.append(a)
                lo = a + 1
            out.append(Q)
            prev = Q
        return out

    def _groups(self) -> list[tuple]:
        """The cache entries whose one-token update may grow or stay in place independently: every growing
        ``KVCache`` together (one offset and capacity), each rotating window on its own."""
        g: list[tuple] = []
        kinds = {e.kind for lt in self.p.layer_types.values() for e in lt.entries}
        if kinds & set(GROWING):
            g.append(("grow",))
        for W in sorted({e.window for lt in self.p.layer_types.values() for e in lt.entries if e.kind == "sliding"}):
            g.append(("sliding", W))
        # a chunked cache (llama4) grows from min(offset, chunk): its own phase, in any call (session 12)
        g.extend(("chunked", C) for C in self.model.chunks)
        return g

    # -- one cell -----------------------------------------------------------------------------------
    def _configs(self, q_lo: int, Q: int, last: bool) -> list[tuple[str, frozenset]]:
        """The layouts of the calls of ``q_lo .. Q`` queries (``last``: the last token): (``_steps`` mode, the
        groups updated in place)."""
        if last or Q == 1:
            mode = "last" if last else "one"
            out = []
            n = len(self.groups)
            for mask in range(1 << n):
                out.append((mode, frozenset(self.groups[b] for b in range(n) if mask >> b & 1)))
            return out
        out = [("upper", frozenset())]
        if any(g[0] == "grow" for g in self.groups) and self.R >= q_lo:
            out.append(("fit", frozenset()))
        chunked = [g for g in self.groups if g[0] == "chunked"]
        if chunked and self.R >= q_lo:
            # a multi-token call's chunked caches fit in place or grow whatever the full caches do (``_call``)
            out = [(mode, frozenset(chunked[b] for b in range(len(chunked)) if mask >> b & 1))
                   for mode, _ in out for mask in range(1 << len(chunked))]
        return out

    def _call(self, Q: int, off: int, mode: str, inplace: frozenset):
        """(hold, pinned, items variants) of the bounding call of ``Q`` queries at ``off`` in ``mode``, the
        groups in ``inplace`` updated in place (one-token calls)."""
        m = self.model
        S = self.S
        steps, hold, _ = m._steps(Q, S, off, mode)  # "last": Q is the call before it (its sliding rows)
        if m.chunks and mode == "fit":
            # the full caches fit; the chunked ones grow unless in ``inplace``: their steps and the held bytes
            # (every cache's rows and growth at most) are the grow layout's
            up, hold, _ = m._steps(Q, S, off, "upper")
            steps = {name: tuple(u if lt_e.kind == "chunked" else st for st, u, lt_e in
                                 zip(stps, up[name], self.p.layer_types[name].entries))
                     for name, stps in steps.items()}
        if inplace:
            steps = {name: tuple(_in_place(st, lt_e, inplace) for st, lt_e in zip(stps, self.p.layer_types[name].entries))
                     for name, stps in steps.items()}
        q = 1 if mode in ("last", "one") else Q
        last = mode == "last"
        variants = []
        for w in ((None, self.worst) if self.worst else (None,)):
            _, items = items_of_call(self.p, q, off, steps, self.kr, m.tiled, self.dt, self.act, self.nax,
                                     last=last, direct=False, bound=w == "bound")
            variants.append((w, items))
        pinned = sum(pinned_bytes(self.p, steps, q, self.act).values())
        return hold, pinned, variants

    def _bottom_elems(self, q: int, off: int, mode: str, inplace: frozenset, variant, ops: _Ops) -> np.ndarray | None:
        """Per op, input elements at most those of every call of the cell in this layout: the cell's smallest call
        (``q`` queries at ``off``) with the fewest rows any history leaves (``_low_steps``), where its items have
        the top's structure; else ``None`` (the caller then takes none: graphs end on the node limit alone, the
        latest any call's can)."""
        steps = self._low_steps(q, off, mode, inplace)
        qq = 1 if mode in ("last", "one") else q
        _, items = items_of_call(self.p, qq, off, steps, self.kr, self.model.tiled, self.dt, self.act, self.nax,
                                 last=mode == "last", direct=False, bound=variant[0] == "bound")
        if _sig(items) == ops.sig:
            low = _Ops(items, self.act, light=True).per_el
            if low.shape == ops.per_el.shape:
                return np.minimum(low, ops.per_el)
        return None

    def _low_steps(self, q: int, off: int, mode: str, inplace: frozenset) -> dict:
        """The cache steps of a call of ``q`` queries at ``off`` in the layout ``mode`` / ``inplace`` with the fewest
        rows (input elements): a growing ``KVCache`` copies at least the offset's rows (it is sliced to the offset,
        or holds at least that many) and adds at least ``256 * ceil(q / 256)``; a rotating one below."""
        from ..kv.replay import STEP
        from .ops.items import EntryStep

        one = mode in ("last", "one")
        G = STEP if one else -(-q // STEP) * STEP
        qq = 1 if one else q
        out = {}
        for name, lt in self.p.layer_types.items():
            row = []
            for e in lt.entries:
                if e.kind == "none":
                    row.append(EntryStep("none", 0, 0, 0))
                elif e.kind == "state":
                    row.append(EntryStep("state", 1, 1, 0))
                elif e.kind in GROWING:
                    if mode == "fit" or (one and ("grow",) in inplace):
                        row.append(EntryStep(e.kind, off + qq, off + qq, off + qq))
                    else:
                        row.append(EntryStep(e.kind, off, off + G, off + qq, zero_rows=G))
                elif e.kind == "chunked":
                    # at least min(offset, chunk) rows after the trim, the call's keys on top; a grow adds at least
                    # 256 * ceil(q / 256) zero rows (``peak.fast_lines.CallModel._steps``)
                    o2 = min(off, e.chunk)
                    if ("chunked", e.chunk) in inplace:
                        row.append(EntryStep("chunked", o2 + qq, o2 + qq, o2 + qq))
                    else:
                        row.append(EntryStep("chunked", o2, o2 + G, o2 + qq, zero_rows=G))
                elif e.kind == "sliding":
                    # a rotating buffer holds at least min(offset, window - 1) rows before a call (a multi-token
                    # call keeps min(rows, window - 1) and adds its own; a one-token call grows from offset ==
                    # rows), its keys at least that plus the call's; the trim copies none at least
                    old = max(1, min(off, e.window - 1))
                    if one and ("sliding", e.window) in inplace:
                        row.append(EntryStep("sliding", old, old, min(off + 1, e.window - 1)))
                    elif one:
                        row.append(EntryStep("sliding", old, old + 1, min(off + 1, e.window - 1)))
                    else:
                        row.append(EntryStep("sliding", old, old + qq, old + qq))
                else:
                    raise _NoBound
            out[name] = tuple(row)
        return out

    def _window(self, variant, ops: _Ops, low: np.ndarray) -> int:
        w, items = variant
        gc = self.gc
        v = chain_graph_window(items, gc.max_nodes, gc.max_mega_elements, gc.window_graphs, self.act, low, ops)
        # the chain's interval widens with every graph where elements end them (a DeepSeek's unfused scores: the
        # window from the earliest start to the latest end doubled); a window from ANY start does not drift
        v2 = free_graph_window(items, gc.max_nodes, gc.max_mega_elements, gc.window_graphs, self.act, low, ops)
        if v2 < v:
            v = v2
        if w:
            v2, _ = window_max(items, self.run_ahead, 1, 0)
            if v2 > v:
                v = v2
        return v

    def _cell(self, q_lo: int, Q: int, o_lo: int, o_hi: int, last: bool) -> int | None:
        """The cell's bound less ``Hbase`` (the largest over its layouts), or ``None`` where a layout's smallest and
        largest calls differ in structure (a route, an op past a token count: every such threshold is on ``q``,
        ``o`` or ``o + q``, all smallest at one corner and largest at the other, so a change inside shows between
        the two corners)."""
        best = None
        for mode, inplace in self._configs(q_lo, Q, last):
            ql = 1 if mode == "one" else q_lo  # "last": q_lo .. Q the call before it
            v = self._part(ql, Q, o_lo, o_hi, mode, inplace, self.refine)
            if v is None:
                return None
            best = v if best is None or v > best else best
        return best

    def _part(self, q_lo: int, Q: int, o_lo: int, o_hi: int, mode: str, inplace: frozenset, depth: int) -> int | None:
        """One layout's bound of ``total - Hbase(o)`` over every call of ``q_lo .. Q`` queries at an offset ``o`` in
        ``o_lo .. o_hi`` (the top call's total less ``Hbase(o_hi)``: what the caches hold past ``Hbase`` only grows
        with the offset). Where
        it is far above the top call's own window (elements end the graphs: the fewest-elements call's graphs
        end later, and the window from its ends holds more; gemma-3's D=256 fallback scores: x1.2-1.3 over a cell
        of 256 queries and an eighth of the offset), the range is halved along its wider side (relative to the
        query count and the keys) and each half bounded on its own, ``depth`` times at most: the maximum of the
        halves' bounds still holds every call of the range."""
        hold, pinned, var_hi = self._call(Q, o_hi, mode, inplace)
        var_lo = None
        win = own = 0
        for k, v in enumerate(var_hi):
            ops = _Ops(v[1], self.act)
            low = self._bottom_elems(q_lo, o_lo, mode, inplace, v, ops)
            if low is None:  # the fewest-rows call differs: is the range's structure one?
                if var_lo is None:
                    var_lo = self._call(q_lo, o_lo, mode, inplace)[2]
                if _sig(var_lo[k][1]) != ops.sig:
                    return None
                low = np.zeros_like(ops.per_el)
            w = self._window(v, ops, low)
            win = w if w > win else win
            if depth:
                o2 = self._window(v, ops, ops.per_el)
                own = o2 if o2 > own else own
        if depth and win - own > max(REFINE_ABS, own // REFINE_REL) and (Q > q_lo or o_hi > o_lo):
            # halve the side whose inputs spread more
            if (Q - q_lo) * (o_hi + Q) >= (o_hi - o_lo) * Q and Q > q_lo:
                m = (q_lo + Q) // 2
                halves = ((q_lo, m, o_lo, o_hi), (m + 1, Q, o_lo, o_hi))
            else:
                m = (o_lo + o_hi) // 2
                halves = ((q_lo, Q, o_lo, m), (q_lo, Q, m + 1, o_hi))
            best = None
            for a, b, c, d in halves:
                v = self._part(a, b, c, d, mode, inplace, depth - 1)  # above total - Hbase(o) of each call in it
                if v is None:
                    break
                best = v if best is None or v > best else best
            else:
                return best
        return hold + pinned + win - self._hbase(o_hi) + SLACK

    def _hbase(self, o: int) -> int:
        return int(o * self.rb)

    # -- the tables ---------------------------------------------------------------------------------
    @staticmethod
    def _end(lo: int, frac: int = CELL_FRACTION) -> int:
        """The last offset of the cell that starts at ``lo`` (cells end on 256-row steps; the same cells whatever
        was asked first)."""
        from ..kv.replay import STEP

        w = STEP * max(1, lo // (STEP * frac))
        return lo - 1 + w - (lo - 1) % STEP

    def _cells(self, tops: list[int], o_lo: int, o_hi: int, last: bool) -> list[int] | None:
        """The cell bounds of offsets ``o_lo .. o_hi`` per bucket of ``tops`` (``last``: the last token after a call of
        that many queries), or ``None`` where a structure changes inside."""
        vals = []
        prev = 0
        for Q in tops:
            v = self._cell(Q if self.exact_q else prev + 1, Q, o_lo, o_hi, last)
            if v is None:
                return None
            vals.append(v)
            prev = Q
        return vals

    def _row(self, o_lo: int, o_hi: int) -> tuple[list[int], list[int]] | None:
        """Per query bucket and for the last token, the cell bounds of offsets ``o_lo .. o_hi`` (``None``: a
        structure changes inside: the caller splits the range)."""
        vals = self._cells(self.tops, o_lo, o_hi, False)
        vl = None if vals is None else self._cells(self.ltops, o_lo, o_hi, True)
        return None if vl is None else (vals, vl)

    def _extend(self, o: int) -> None:
        """Rows until the offset ``o`` is covered."""
        if self.failed:
            raise _NoBound
        splits = 0
        while self.bounds[-1] <= o:
            lo = self.bounds[-1]
            hi = self._end(lo, self.frac)
            while True:
                row = self._row(lo, hi)
                if row is not None:
                    break
                if hi == lo or splits >= MAX_SPLITS:
                    self.failed = True
                    raise _NoBound
                splits += 1
                hi = (lo + hi) // 2
            vals, vl = row
            if self.cum:
                pv, pl = self.cum[-1], self.cuml[-1]
                vals = [max(a, b) for a, b in zip(vals, pv)]
                vl = [max(a, b) for a, b in zip(vl, pl)]
            for cum in (vals, vl):
                for i in range(1, len(cum)):
                    if cum[i - 1] > cum[i]:
                        cum[i] = cum[i - 1]
            self.cum.append(vals)
            self.cuml.append(vl)
            self.bounds.append(hi + 1)

    def _check_gen(self) -> None:
        if _TILED_VERSION[0] != self._gen:
            self._reset()

    def call_bound(self, q: int, o: int) -> int:
        """``B(q, o)``."""
        if self.bounds[-1] <= o:
            self._extend(o)
        j = bisect.bisect_right(self.bounds, o) - 1
        return self._hbase(o) + self.cum[j][bisect.bisect_left(self.tops, q)]

    def last_bound(self, o: int, prev: int | None = None) -> int:
        """``BL(o)`` after a call of at most ``prev`` queries (default: a chunk)."""
        if self.bounds[-1] <= o:
            self._extend(o)
        j = bisect.bisect_right(self.bounds, o) - 1
        return self._hbase(o) + self.cuml[j][bisect.bisect_left(self.ltops, prev or self.S)]

    def full_bound(self, o: int) -> int:
        """A full chunk's call at offset ``o``: ``B`` of the top bucket."""
        if self.bounds[-1] <= o:
            self._extend(o)
        j = bisect.bisect_right(self.bounds, o) - 1
        return self._hbase(o) + self.cum[j][-1]

    def upper(self, new: int, cached: int) -> int | None:
        """``U(new, cached)`` (module doc, ``request_upper``), or ``None`` where the profile has no bound
        (``_NoBound``)."""
        self._check_gen()
        return request_upper(self.S, new, cached, self.last_bound, self.full_bound, self.call_bound)

    def prepare(self, max_o: int | None = None) -> bool:
        """Every cell up to ``max_o`` (default: the model's context); False where there is no bound."""
        self._check_gen()
        o = max_o or self.max_o
        if not o:
            return not self.failed
        try:
            self._extend(o)
        except _NoBound:
            return False
        return True


def _in_place(st, e, inplace: frozenset):
    """A one-token update of ``st`` (the bounding grow layout) in place, where its group is in ``inplace``."""
    if e.kind in GROWING and ("grow",) in inplace:
        return replace(st, new_rows=st.old_rows, zero_rows=0, trim_rows=0)
    if e.kind == "sliding" and ("sliding", e.window) in inplace:
        return replace(st, new_rows=st.old_rows, zero_rows=0, trim_rows=0)
    if e.kind == "chunked" and ("chunked", e.chunk) in inplace:  # any call's (``_configs``)
        return replace(st, new_rows=st.old_rows, zero_rows=0, trim_rows=0)
    return st


def cuda_prefix_for(profile: Profile, backend: str, mlx_version: str | None, dtype: str | None, nax: bool,
                    chunk: int, kv_scale: float = 1.0) -> CudaPrefix | None:
    """The ``CudaPrefix`` of a backend whose executor commits graphs (CUDA), or ``None``: another backend, a profile
    whose peak ``prefill_peak`` reports unknown there, or chunked attention (no bound: the exact envelope)."""
    from .basis import MEASURED, basis_for, no_bound_reason
    from .ops.recurrent import unverified_peak

    kr = KernelRoutes.for_backend(backend, mlx_version)
    if kr.executor.graph_commit is None or unverified_peak(profile, kr):
        return None
    b = basis_for(profile, kr)
    if b.kind != MEASURED and no_bound_reason(profile, kr):
        return None
    try:
        return prefix_table(profile, kr, chunk, dtype, nax, kv_scale, b.worst_case)
    except UnsupportedError:
        return None


def prefix_table(profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None, nax: bool, kv_scale: float,
                 worst: str | None) -> "CudaPrefix | CudaCounts":
    """``U_cuda(n, c)`` after a prefix for this chunk size: ``CudaPrefix`` (query buckets), or where its buckets
    cannot hold (a recurrent layer: its items change structure with nearly every query count) ``CudaCounts`` (one
    table per query count a request makes). Raises ``UnsupportedError`` where neither applies (a recurrent model with
    a sliding window or chunked attention).

    Shared: the API (``Estimator``) and the oMLX facade (``MonotonePeak``) of one model each asked for the same table
    and built it twice (seconds each; session 11's note); tables are kept here by what they depend on (the profile's
    shape, the kernel table, chunk, dtype, NAX, KV width, worst case), ``KEEP_SHARED`` of them."""
    from .call import activation_dtype
    from .fast_cuda import _shape_key

    check_table_chunk(chunk)  # its cells span every query count up to the chunk (peak.request: past a cap, replays)
    dt = activation_dtype(profile, dtype)[0]  # ``None`` and the profile's own dtype build the same table
    key = (_shape_key(profile), routes.backend, id(routes.table), chunk, dt, nax, float(kv_scale), worst)
    hit = _SHARED.get(key)
    if hit is not None and hit[0] is routes.table:
        return hit[1]
    try:
        t = CudaPrefix(profile, routes, chunk, dtype, nax, kv_scale, worst)
    except UnsupportedError:
        t = CudaCounts(profile, routes, chunk, dtype, nax, kv_scale, worst)
    if len(_SHARED) >= KEEP_SHARED:
        del _SHARED[next(iter(_SHARED))]
    _SHARED[key] = (routes.table, t)
    return t


#: ``prefix_table``'s tables (oldest first out): a process serving a few models at a few chunk sizes keeps them all.
KEEP_SHARED = 32
_SHARED: dict = {}


class CudaCounts:
    """``U(n, c)`` (module doc) from tables of ONE query count each: a gated-DeltaNet's items change structure with
    nearly every query count (its recurrence's spans), so ``CudaPrefix``'s query buckets split at every count; a
    request after a prefix makes calls of three kinds only -- full chunks of ``S``, one shorter call of ``r``, the
    last token -- so it reads three tables: ``B_S`` (``exact_q``, ``q = S``), ``B_r`` (``q = r``) and ``BL`` (the last
    token, ``q = 0``), each built lazily by offset with the same cells, history (chunks of at most ``S``) and
    cumulative maxima over the offset as ``CudaPrefix``:

        U(n, c) = max( B_S(c + (k-1) S) if k,  B_r(c + k S) if r,  BL(c + n - 1) ),   n = k S + 1 + r

    Each term is above every such call at that offset or before it, after any history, and non-decreasing in the
    offset, so ``U`` is above the replay and non-decreasing in ``c`` (issue 14 item 4). NOT claimed: non-decreasing
    in ``n`` within a block (``B_r`` and ``B_{r+1}`` are different tables; ``CudaPrefix``'s buckets are cumulative over
    counts, these are not). The last token is one table whatever call preceded it: that holds without sliding
    windows (a rotating cache's rows after the call before it are the only state that depends on its size), which
    is why a profile with one is refused here. Cost (CPU, loaded box, qwen3.5-35b-a3b): a table per new ``r``, its
    cells to the request's offset: chunk 256 ~0.5-1 s to 1M, chunk 2048 ~2.5-5 s to 50k; ``KEEP`` tables kept."""

    KEEP = 16

    def __init__(self, profile: Profile, routes: KernelRoutes, chunk: int, dtype: str | None = None,
                 nax: bool = False, kv_scale: float = 1.0, worst: str | None = None):
        validate_profile(profile)
        kinds = {e.kind for lt in profile.layer_types.values() for e in lt.entries}
        if "chunked" in kinds or "sliding" in kinds:
            raise UnsupportedError(f"{'chunked attention' if 'chunked' in kinds else 'a sliding window'}: "
                                   "no per-count CUDA prefix bound")
        self.args = (profile, routes, chunk, dtype, nax, kv_scale, worst)
        self.S = chunk
        self.max_o = profile.max_context or None
        self._tables: dict[int, CudaPrefix] = {}

    def table(self, q: int) -> CudaPrefix:
        """The table of calls of exactly ``q`` queries (0: the last token's)."""
        t = self._tables.get(q)
        if t is None:
            if len(self._tables) >= self.KEEP:  # the shorter calls' first (the full chunk's and the last token's stay)
                for k in list(self._tables):
                    if k not in (0, self.S):
                        del self._tables[k]
                        break
            t = CudaPrefix(*self.args, exact_q=True, q=q, last=q == 0)
            # a call's table: no halving of a cell whose bound is far above its top call's own window
            # (``CudaPrefix._part``): it costs two more graph windows per cell (half the build); on qwen3.5-35b-a3b
            # it moved no bound at chunk 2048 (q 2048 and 951, offsets 1k-50k) and raised some by 0.7% (q 52 past
            # 83k). The last token's table (cheap: one-token calls) keeps it: without, +2-6% past 83k
            t.refine = REFINE if q == 0 else 0
            # and cells about offset / 4 wide, not / 8 (a third fewer cells past 2k, ~30% of a table's build):
            # qwen3.5-35b-a3b, 10,000 new tokens in chunks of 2048 after 20k / 100k cached, 1.0044 / 1.060 of the
            # exact replay (offset / 8: 1.0044 / 1.066; offset / 2: 1.084 at 100k)
            t.frac = 4 if q else CELL_FRACTION
            self._tables[q] = t
        t._check_gen()
        return t

    def upper(self, new: int, cached: int) -> int | None:
        """``U(new, cached)`` (``request_upper`` over the three tables), or ``None`` where a table has no bound
        (``_NoBound``). The last token's table is one whatever call preceded it (class doc)."""
        S = self.S
        return request_upper(S, new, cached, lambda o, p: self.table(0).last_bound(o),
                             lambda o: self.table(S).call_bound(S, o), lambda q, o: self.table(q).call_bound(q, o))

    def prepare(self, max_o: int | None = None) -> bool:
        """The full chunk's and the last token's cells up to ``max_o`` (default: the model's context); a shorter
        call's table is built when a request first needs it."""
        return self.table(0).prepare(max_o) and self.table(self.S).prepare(max_o)


def transient_bound(cp: CudaPrefix, n: int, cached: int) -> int | None:
    """One chunk's transient on CUDA, monotone in ``cached``: a bound of what a call of ``n`` queries at offset
    ``cached`` (after a prefix fed in chunks of at most ``cp.S >= n``), and the last token after it, allocate
    beyond the caches held before (``prefill_peak(...).peak_bytes`` of ``n + 1`` new tokens in chunks of ``n``),
    or ``None`` where ``cp`` has no bound. Why not the exact call: graph commits move with the offset, so the
    exact transient falls at some longer prefixes (the facade's ``estimate_chunk_transient_bytes`` answered it
    until session 11). The call's ``B(n, c)`` and the last token's ``BL(c + n)`` less ``Hbase(c)`` (the growing
    caches' rows at the offset, at most what the prefix holds): each a cumulative cell bound (non-decreasing in
    ``c``); the last token's ``Hbase(c + n) - Hbase(c)`` is charged as its largest, ``n`` rows and 2 bytes of
    rounding, so the answer does not wobble by a byte with ``c``."""
    cp._check_gen()
    if cp.exact_q and (n != cp.S or cp.q != cp.S or not cp.with_last) or n > cp.S:
        raise ValueError(f"a table of chunk {cp.S} (exact_q {cp.exact_q}) does not bound a call of {n} queries")
    try:
        last = cached + n
        if cp.bounds[-1] <= last:
            cp._extend(last)
        b = cp.bounds
        v = cp.cum[bisect.bisect_right(b, cached) - 1][bisect.bisect_left(cp.tops, n)]
        w = cp.cuml[bisect.bisect_right(b, last) - 1][bisect.bisect_left(cp.ltops, n)] + int(n * cp.rb) + 2
        return v if v > w else w
    except _NoBound:
        return None


class CudaTransient:
    """The facade's CUDA chunk transient (``estimate_chunk_transient_bytes``) for one ``peak.fast.FastPeak``: one
    ``CudaPrefix`` of exactly ``n`` queries per chunk size asked (``exact_q``: one bucket, so a gated-DeltaNet's
    query-count splits do not arise), its cells built to the largest offset asked. Tables kept: ``KEEP`` chunk
    sizes (an engine's throttle asks a few); the cost of a new one is the cells to its offset (tenths of a second
    for a dense model to 1M; a gated-DeltaNet at n = 4096: tens of seconds to 1M, its graph windows)."""

    KEEP = 32

    def __init__(self, fast):
        self.fast = fast
        self._tables: dict[int, CudaPrefix | bool] = {}

    def bound(self, n: int, cached: int) -> int | None:
        """``transient_bound`` of ``n`` queries after ``cached`` (a prefix fed in chunks of ``n``), or ``None``: no
        bound for this profile (another backend, chunked attention, an unknown peak, a structure that changes
        inside a cell too often)."""
        cp = self._tables.get(n)
        if cp is None:
            cp = self._tables[n] = self._table(n)
            if len(self._tables) > self.KEEP:
                del self._tables[next(iter(self._tables))]
        if cp is False:
            return None
        return transient_bound(cp, n, cached)

    def _table(self, n: int) -> CudaPrefix | bool:
        f = self.fast
        if f.routes.executor.graph_commit is None or f._unknown:
            return False
        try:  # f._worst: the FastPeak's own reading of the peak basis (None where measured)
            return CudaPrefix(f.profile, f.routes, n, f.dtype, f.nax, f.kv_scale, f._worst, exact_q=True)
        except UnsupportedError:
            return False
