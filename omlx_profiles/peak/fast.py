"""Precomputed prefill-peak bounds: the per-request answer in a few float operations, for every prompt length.

``prefill_peak`` replays every call and slides the executor window over hundreds of items: milliseconds.
An engine that checks every request (oMLX's admission guard, ``Estimator.fits``) needs microseconds, so
for one profile, backend and chunk size this module precomputes, once, a bound of each kind of call a
request makes, as a piecewise-linear function of the call's offset (``peak.fast_lines``):

* the chunk-size calls (the last of them is the highest: every term grows with the offset);
* the shorter call before the last token, ``r = (new - 1) % chunk`` queries, charged as the smallest
  bucket ``Q >= r`` (buckets break at every query-length threshold of the kernel table);
* the last token (it computes the logits);
* the first call of a prompt without a cached prefix (fresh caches, a route of its own): the exact model of
  a fresh call of the bucket's size, taken once per bucket.

A request's answer is the maximum of the calls it makes (minus the prefix's cache it held before): never
below ``prefill_peak`` (every history's worst is in the bound), never negative, and non-decreasing in
the prompt length.

``total_lower`` bounds the same total from below (``Estimator.fits`` decides from both and replays only
between them): the last full chunk call in the layout it is known to take (every such call grows the
caches: the copy of at least the offset's rows; without a prefix the rotating caches' rows are the
history's own), the fresh first call (exact), and, without a prefix, a shorter call in the chunk's last
256-row step (``peak.fast_top``: chords and tangents over points 32 queries apart, where it is often the
prompt's highest). Where one call is the highest in both bounds they are a few KB apart (the lines'
rounding slack). CUDA (graph-commit boundaries move with the offset), chunked attention (rows cycle) and a call
whose item structure changes with nearly every query count (a gated-DeltaNet on CPU: ``FastPeak._shapeless``)
answer the exact model (memoized). A ``bound`` basis (CPU) has lines of its worst-case items.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import lru_cache

from ..errors import UnsupportedError
from ..kv.bytes import kv_report
from ..kv.replay import STEP
from ..registry.profile import Profile
from .fast_lines import CallModel, Pieces
from .fast_short import ShortCalls
from .fast_top import TopStep
from .kernels import _TILED_VERSION, KernelRoutes, tiled_state
from .prefill import Request, prefill_peak
from .replay import scaled_total
from .request import MAX_LINE_CHUNK

_EXACT = object()  # marks a chunk size answered by the exact path (CUDA, chunked attention)
_MEMO = 1 << 16  # requests remembered by peak()


class _Chunk:
    """The bounds of one chunk size: per query bucket, the cumulative bound of a call of at most that many
    queries (``calls``, over the offset; ``full``: the chunk's own), the last token's, the fresh first call's
    grid (built on the first request without a prefix); ``lower``: a lower bound of a full chunk call;
    ``first``: the fresh first call's exact total (or ``None``); ``top``: the shorter call in the chunk's last
    step, without a prefix (``peak.fast_top``)."""

    __slots__ = ("tops", "calls", "beyond", "last", "last_beyond", "lower", "full", "add_full", "model", "grid",
                 "grid_v", "one", "slack", "ltops", "lasts", "first", "top", "short", "mid", "own", "lgrow", "lfit",
                 "row", "own_k", "phases", "pshort", "pidx")

    def __init__(self, model, tops, calls, beyond, last, last_beyond, lower, add_full):
        self.model = model
        self.tops = tops
        self.calls = calls
        self.beyond = beyond
        self.last = last
        self.last_beyond = last_beyond
        self.lower = lower
        self.full = calls[-1]
        self.add_full = add_full
        self.grid = self.grid_v = self.first = None
        self.top = self.short = self.mid = self.lgrow = self.lfit = self.own_k = self.phases = None
        self.pshort: dict = {}
        self.pidx: dict = {}
        self.one = self.row = 0
        self.slack = model.slack


class FastPeak:
    """Per-profile, per-backend bounds, built once per chunk size (``_Chunk``).

    ``kv_scale``: bytes of the full-attention caches (full, latent, indexer) per activation-width byte --
    below 1 for a fractional KV width (oMLX's TurboQuant), above 1 for caches stored wider than the
    activations. Sliding and state caches stay at the activation width (TurboQuant passes them through)."""

    def __init__(self, profile: Profile, backend: str, mlx_version: str | None = None, dtype: str | None = None,
                 nax: bool = False, kv_scale: float = 1.0):
        self.profile = profile
        self.backend = backend
        self.mlx_version = mlx_version
        self.dtype = dtype or profile.dtype
        self.nax = nax
        self.kv_scale = float(kv_scale)
        self.routes = KernelRoutes.for_backend(backend, mlx_version)
        self._tiled_gen = tiled_state()[0]
        self._chunks: dict[tuple[int, bool], _Chunk | object] = {}
        self._memo: dict[tuple[int, int, int], int] = {}  # peak() per request
        self._exact = lru_cache(maxsize=4096)(self._exact_uncached)
        self._prefix = lru_cache(maxsize=1024)(self._prefix_uncached)
        self._short: dict[int, int] = {}  # T(q): the exact total of a (q + 1)-token prompt (``fast_short``)
        self._fixed: dict[tuple[int, int], tuple[int | None, int] | None] = {}  # ``fixed_bounds``
        from .basis import basis_for

        # the worst case prefill_peak takes (``b.worst``: a ``bound`` measured over the band keeps its backend's rule)
        self._worst = basis_for(profile, self.routes).worst_case
        # a peak the estimator reports as unknown here (prefill_peak raises for every request): so does this
        from .basis import no_bound_reason
        from .ops.recurrent import unverified_peak

        self._unknown = unverified_peak(profile, self.routes) or (no_bound_reason(profile, self.routes)
                                                                  if self._worst else None)
        # no line holds for: CUDA (graph-commit boundaries move with kL), chunked attention (rows cycle with
        # kL), a call whose item structure changes with nearly every query count (``_shapeless``). A ``derived``
        # basis on Metal is the op model over a longer window, a ``bound`` basis (CPU) the op model's worst-case
        # items (peak/basis.py): their positions are lines too.
        self._always_exact = (self.routes.executor.graph_commit is not None or any(
            e.kind == "chunked" for lt in profile.layer_types.values() for e in lt.entries))
        if not self._always_exact and not self._unknown:
            self._always_exact = self._shapeless()

    @property
    def exact_only(self) -> bool:
        """True where every answer is the exact model (no bound holds: CUDA, chunked attention, a call whose item
        structure changes with nearly every query count)."""
        return self._always_exact

    def _shapeless(self) -> bool:
        """Whether a call's item structure differs at four consecutive query counts (257-260): a bucket of query
        counts is bounded by its top only where its calls share one structure (``CallModel._split_layouts``), so
        such a model would need a bucket, a set of lines and an exact fresh-grid point per query count: a
        gated-DeltaNet's loop on CPU (its steps split into 32 spans whose sizes move with every count;
        qwen3.5-35b-a3b took 16 s for its first request at chunk 700 and 45 s more to prepare). Those models
        answer the exact model (memoized), as CUDA's ``peak.fast_cuda`` does for the same loop ("shapeless")."""
        try:
            m = CallModel(self.profile, self.routes, tiled_state()[1], self.dtype, self.nax, self._worst,
                          self.kv_scale)
            return len({m._layout(q, 4 * STEP) for q in range(STEP + 1, STEP + 5)}) == 4
        except (ValueError, UnsupportedError):
            return False  # a layer kind with no line (its error comes with the first request)

    # -- public -------------------------------------------------------------------------------------
    def peak(self, new_tokens: int, chunk: int, cached: int = 0) -> int:
        """Prefill peak over what was held before the prompt (bytes): never below ``prefill_peak`` of the
        same request, never negative, non-decreasing in ``new_tokens``. The hot path (oMLX's admission
        guard calls it per request): a dict look-up and a few float operations once the chunk size's bounds
        exist. Arguments are counts (``new_tokens >= 0``, ``chunk >= 1``, ``cached >= 0``); callers
        validate them."""
        key = (new_tokens, chunk, cached)
        v = self._memo.get(key)
        if v is not None and _TILED_VERSION[0] == self._tiled_gen:
            return v  # an engine sees the same lengths again: a dict look-up
        if new_tokens <= 0:
            return 0
        if cached and new_tokens <= chunk:
            # a prompt shorter than a chunk after a prefix (a follow-up turn): one call and the last token,
            # replayed exactly (memoized). Its bound (``total_bound``) charges every layer's cache copy in the
            # one-token calls, up to 10x the exact peak for a few tokens: too coarse to report as the number
            v = self._exact(new_tokens, chunk, cached)
            self._memo[key] = v
            return v
        c = self._chunks.get((chunk, not cached))
        if c is None or c is _EXACT or _TILED_VERSION[0] != self._tiled_gen:
            c = self._chunk(chunk, not cached)
            if c is _EXACT:
                return self._exact(new_tokens, chunk, cached)
        v = self._total(c, new_tokens, chunk, cached)
        if cached:
            v -= self._prefix(cached, chunk)
        if v < 0:
            v = 0
        if len(self._memo) >= _MEMO:
            self._memo.clear()
        self._memo[key] = v
        return v

    def prepare(self, chunk: int) -> None:
        """Build every bound of ``chunk`` now -- with and without a prefix, upper and lower, the fresh first
        call's grid, the shorter call's points in the chunk's last step -- that the first requests would
        build otherwise (seconds once; an engine's start-up). Nothing where the answers are exact (CUDA)."""
        for fresh in (True, False, 2):
            c = self._chunk(chunk, fresh)
            if c is _EXACT:
                return
            if fresh != 2 and c.lower is None and chunk > 1:
                c.lower = c.model.pieces(chunk, chunk, "lower", both=False)[0]
        c = self._chunks[(chunk, True)]
        if c.grid is None:
            self._fresh_grid(c, chunk)
        for t in (c.top, c.mid, c.short):
            if t:
                t.prepare()
        if c.row is None:
            self._known(c, chunk)
        if chunk % STEP and chunk > STEP and c.phases is None:
            self._phases(c, chunk)
        if c.phases:  # the shorter call in each phase's two layouts, at all its points (``_short_phase``)
            for ph in set(c.phases[0][1:]):
                for r in {2, ph[0] + 1}:
                    if 2 <= r < chunk:
                        self._short_phase(c, chunk, ph, r).prepare()

    def fixed_bounds(self, new_tokens: int, chunk: int, need: int | None = None) -> tuple[int | None, int] | None:
        """``bounds(new_tokens, chunk)`` without a prefix, fully refined (``need`` None), memoized: the envelope's
        prefix-free terms other than the request's own (1, 2, a chunk, ``k S + 1``, ``k S + 2``: a few per chunk
        size, asked again by every request of the same block: microseconds from the prepared lines). Where
        ``need`` falls between bounds wider than ``Estimator.fits``'s margin (64 KiB or 1/65,536 of the upper;
        chunks that are not whole 256-row steps, where the last token's lines charge the worst layout, or of fewer
        than 256 rows), the exact total instead, kept: one replay per such length, once (not by ``prepare``: a
        chunk of 64 has 2,048 blocks in 131k tokens)."""
        key = (new_tokens, chunk)
        if _TILED_VERSION[0] != self._tiled_gen:
            self._chunk(chunk, True)  # clears every table built under the old kernels
        v = self._fixed.get(key, _EXACT)
        if v is _EXACT:
            v = self.bounds(new_tokens, chunk, 0)
            if len(self._fixed) >= _MEMO:
                self._fixed.clear()
            self._fixed[key] = v
        if v is not None and need is not None and (v[0] is None or v[0] <= need) and need < v[1] and \
                (v[0] is None or v[1] - v[0] > max(1 << 16, v[1] >> 16)):
            e = self._exact(new_tokens, chunk, 0)  # no prefix: held before is 0, the total is the peak
            v = self._fixed[key] = (e, e)
        return v

    def total_bound(self, new_tokens: int, chunk: int, cached: int = 0) -> int | None:
        """An upper bound of ``held before + peak`` (the prefix's cache included), or ``None`` where the
        answer is the exact model (``exact_only``)."""
        c = self._chunks.get((chunk, not cached))
        if c is None or c is _EXACT or _TILED_VERSION[0] != self._tiled_gen:
            c = self._chunk(chunk, not cached)
            if c is _EXACT:
                return None
            if c.lower is None and chunk > 1:  # the estimator's warm-up builds its lower bound too
                c.lower = c.model.pieces(chunk, chunk, "lower", both=False)[0]
        return self._total(c, new_tokens, chunk, cached)

    def bounds(self, new_tokens: int, chunk: int, cached: int = 0,
               need: int | None = None) -> tuple[int | None, int] | None:
        """(lower or ``None``, upper) of ``held before + peak`` (what ``Estimator.fits`` decides from), or
        ``None`` where the answer is the exact model (``exact_only``). First the lines (``total_bound``,
        ``total_lower``); where ``need`` (the bytes the budget leaves) falls between them -- or ``need`` is
        ``None`` -- as tight as the precomputed points allow:

        * a prompt of at most a chunk and a token without a prefix: ``peak.fast_short`` (exact totals at
          points of its one call's size, chords and tangents between them; any chunk size);
        * chunks of whole 256-row steps: the shorter call at points of its size (``peak.fast_top``, every
          size, not only the chunk's last step); after a prefix, the calls past the first full chunk from
          the prefix-free bounds at their offsets (``_refined``)."""
        hi = self.total_bound(new_tokens, chunk, cached)
        if hi is None:
            return None
        lo = self.total_lower(new_tokens, chunk, cached)
        if need is not None and (hi <= need or (lo is not None and lo > need)):
            return lo, hi
        if not cached and new_tokens <= chunk + 1:
            c = self._chunks[(chunk, True)]
            if new_tokens == 1:
                return c.one, c.one
            sl, su = c.short.bounds(new_tokens - 1)
            if su < hi:
                hi = su
            if sl is not None and (lo is None or sl > lo):
                lo = sl
        elif chunk % STEP == 0 and new_tokens > chunk + 1:
            lo, hi = self._refined(new_tokens, chunk, cached, lo, hi)
        elif not cached and new_tokens >= 2 * chunk + 1 and chunk > STEP:
            lo, hi = self._refined_odd(new_tokens, chunk, lo, hi)
        return lo, hi

    def _refined_odd(self, new: int, S: int, lo: int | None, hi: int) -> tuple[int | None, int]:
        """A prompt without a prefix in chunks that are not whole 256-row steps: the full calls' capacity
        phase cycles (``_phases``), so the last full call is bounded in its own phase (both sides) and the
        earlier ones by every phase's upper bound one chunk before; the first call is the exact (S + 1)-token
        total's; the shorter call in its phase's layout at points of its size (``_short_phase``), the last token
        in the layout the shorter call leaves (grown by a step, or in place over known free rows)."""
        c = self._chunks.get((S, True)) or self._chunk(S, True)
        if c.phases is None:
            self._phases(c, S)
        if not c.phases:
            return lo, hi
        table, start, period, lines = c.phases
        k, r = divmod(new - 1, S)
        j = k - 1  # the last full call's index (>= 1)
        cls = table[j] if j < len(table) else table[start + (j - start) % period]
        up, low = lines[cls]
        off = S * j
        u = up.at(off)
        f = low.at(off)
        if lo is None or f > lo:
            lo = f
        if j > 1:  # the earlier full calls: each phase's upper line at its last call before j (lines grow with
            for ph, (pre, res) in c.pidx.items():  # the offset; ``_phases``)
                i = _last_before(j, start, period, pre, res)
                if i:
                    f = lines[ph][0].at(S * i)
                    if f > u:
                        u = f
        f = self._short_total(S)  # the first call
        if f > u:
            u = f
        f = c.lasts[bisect_left(c.ltops, r or S)].at(new - 1)  # the last token
        if f > u:  # its KVCache rows known from call k's phase and the shorter call's size (``kv_call``)
            free, trimmed = table[k] if k < len(table) else table[start + (k - start) % period]
            if r > free:  # the shorter call grew the caches (from the offset when trimmed)
                free = (0 if trimmed else free) + -(-r // STEP) * STEP - r
            elif r:
                free -= r
            g = c.lgrow.at(new - 1) if free == 0 else c.lfit.at(new - 1) + int(free * c.row) + 1
            if g < f:
                f = g
            if f > u:
                u = f
        if r:
            f = c.calls[_bucket(c.tops, r)].at(S * k)  # the shorter call
            if f > u:
                ph = table[k] if k < len(table) else table[start + (k - start) % period]
                if r == 1 and ph[0]:  # one query in place at its phase's free rows (the in-place last-token lines:
                    g = c.lfit.at(S * k) + int(ph[0] * c.row) + 1  # the logits are more)
                elif r == 1:  # no free row (an in-place full call filled the capacity): it grows by a step
                    g = c.lgrow.at(S * k)
                else:  # in its phase's layout, at points of its own size (``_short_phase``)
                    gl, g = self._short_phase(c, S, ph, r).bounds(r, S * k)
                    if gl is not None and (lo is None or gl > lo):
                        lo = gl
                if g < f:
                    f = g
            if f > u:
                u = f
        return lo, (u if u < hi else hi)

    @staticmethod
    def _short_phase(c: _Chunk, S: int, ph: tuple[int, bool], r: int) -> TopStep:
        """Both bounds of the shorter call (``2 <= r < S`` queries) of a prompt without a prefix in chunks that are
        not whole 256-row steps, after a full chunk: its ``KVCache`` phase ``ph`` = (free rows, trimmed) is known
        (``_phases``), so is its layout -- in place where ``r <= free``, else grown by ``256 * ceil(r / 256)`` from
        the free rows (trimmed first or not) -- and its rotating rows. Within one of those two layouts the call is
        bounded at points of its own size (``peak.fast_top``: every 32 queries, both sides of each 256-row step and
        query-count threshold, chords above and tangents below, halved where still wide): a few KB apart where
        the call is the prompt's highest. The bucket's line charges the worst layout of any history and up to 255
        queries more (hundreds of MB over the full calls at long prompts); session 8's next-32-query count, tens of
        MB (2 / 50 Metal and 10 / 50 CPU requests at their own total replayed)."""
        free, trimmed = ph
        fits = r <= free
        key = (free, trimmed, fits)
        t = c.pshort.get(key)
        if t is None:
            m = c.model
            known = ("phasefit", free) if fits else ("phase", free, trimmed)
            lo, hi = (2, min(free, S - 1)) if fits else (max(2, free + 1), S - 1)

            def lines(q: int, known=known) -> tuple[Pieces, Pieces]:
                return m._pieces(q, S, "upper", known, both=False)[0], m._pieces(q, S, "lower", known, both=False)[0]

            t = c.pshort[key] = TopStep(m, S, c.calls[-1], lo=lo, hi=hi, known=known, lines=lines)
        return t

    @staticmethod
    def _phases(c: _Chunk, S: int) -> None:
        """The full calls' ``KVCache`` phase (free rows past the offset, trimmed or not) per call index from
        empty caches: ``(table, start, period, {phase: (upper, lower)})``, the table repeating from ``start``
        with ``period``. A phase with at least ``S`` free rows is a full call in place (chunks of 257-511 rows
        grow by 512 and fit every other call: their lines are the in-place layout's)."""
        from ..kv.replay import kv_call

        cap, off = kv_call(0, 0, S)[:2]
        seen: dict[tuple[int, int], int] = {}
        table = [None]
        while True:
            state = (cap - off, off % STEP)
            if state in seen:
                start = seen[state]
                break
            seen[state] = len(table)
            table.append((cap - off, off % STEP != 0))
            cap, off = kv_call(cap, off, S)[:2]
        m = c.model

        def known(ph: tuple[int, bool]) -> tuple:
            return ("phasefit", ph[0]) if ph[0] >= S else ("phase",) + ph

        lines = {ph: (m.pieces(S, S, "upper", q_min=S, known=known(ph), both=False)[0],
                      m.pieces(S, S, "lower", known=known(ph), both=False)[0]) for ph in set(table[1:])}
        # where each phase occurs: its call indices before the cycle, and its positions in the cycle (``_last_before``)
        c.pidx = {ph: ([i for i in range(1, start) if table[i] == ph],
                       [t for t in range(len(table) - start) if table[start + t] == ph]) for ph in lines}
        c.phases = (table, start, len(table) - start, lines)
        c.lfit = m.pieces(S, S, "last", known="fit", both=False)[0]
        c.lgrow = m.pieces(S, S, "last", known="grow", both=False)[0]
        c.row = _growing_row_bytes(m)

    def _refined(self, new: int, S: int, cached: int, lo: int | None, hi: int) -> tuple[int | None, int]:
        """Tighter bounds of a prompt of more than a chunk and a token, chunks of whole 256-row steps: the
        shorter call from ``peak.fast_top``'s points instead of its bucket. After a prefix, past the first
        full chunk call the caches are in the state they would be in without one at the same offset: every
        ``KVCache`` grew to exactly its offset (the chunk's own capacity phase: ``cycle_reach``), a rotating
        cache holds ``min(offset, window - 1 + S)`` rows in temporal order; so the shorter call, the last
        token and the full calls after the first are bounded by the prefix-free bounds at their offsets; the
        first full call, whose state is the prefix's, keeps its own bound."""
        k, r = divmod(new - 1, S)
        cf = self._chunks.get((S, True)) or self._chunk(S, True)
        if cf.row is None:  # the known-layout lines: built on the first refinement (or by prepare)
            self._known(cf, S)
        off = cached + S * k
        if cached:
            u = self._chunks[(S, False)].own.at(cached)  # the first full call, after the prefix
        else:
            # the first call, on fresh caches: the exact total of a (S + 1)-token prompt is the larger of that
            # same call and a last token (the grid's value at S is a running maximum over shorter calls)
            u = self._short_total(S)
        if k > 1:
            f = cf.own_k.at(off - S)  # the last full call (full calls only: the chunk's own bucket)
            if f > u:
                u = f
            if cached:
                if cf.lower is None:
                    cf.lower = cf.model.pieces(S, S, "lower", both=False)[0]
                f = cf.lower.at(off - S)
                if lo is None or f > lo:
                    lo = f
        f = cf.lasts[bisect_left(cf.ltops, r or S)].at(cached + new - 1)  # the last token
        if f > u:  # every KVCache grows by a step iff the shorter call filled its last one
            g = cf.lgrow.at(cached + new - 1) if r % STEP == 0 else \
                cf.lfit.at(cached + new - 1) + int(-r % STEP * cf.row) + 1
            u = f if f < g else g if g > u else u
        if r:
            f = cf.calls[_bucket(cf.tops, r)].at(off)
            t = cf.top if cf.top and r >= cf.top.lo else cf.mid if cf.mid and cf.mid.lo <= r <= cf.mid.hi else None
            if r == 1 and f > u:  # one query after a full chunk: it grows every KVCache by a step, as a last
                g = cf.lgrow.at(off)  # token would (whose logits only add items): the known-layout lines
                if g < f:
                    f = g
            if t is not None and f > u:  # the shorter call may be the highest: at points of its own size
                g, h = t.bounds(r, off)
                if h < f:
                    f = h
                if g is not None and (lo is None or g > lo):
                    lo = g
            if f > u:
                u = f
        return lo, (u if u < hi else hi)

    @staticmethod
    def _known(c: _Chunk, S: int) -> None:
        """The lines of calls whose layout a prompt of whole-step chunks fixes (``CallModel._steps``'s
        ``known``): the last token, its KVCache grown by a step or updated in place (the shorter call's size
        says which); a full call after a full chunk, its rotating caches' rows known."""
        m = c.model
        c.lgrow = m.pieces(S, S, "last", known="grow", both=False)[0]
        c.lfit = m.pieces(S, S, "last", known="fit", both=False)[0]
        c.own_k = m.pieces(S, S, "upper", q_min=S, known="slide", both=False)[0] if m.windows() else c.own
        c.row = _growing_row_bytes(m)

    def total_lower(self, new_tokens: int, chunk: int, cached: int = 0) -> int | None:
        """A lower bound of ``held before + peak``, or ``None`` (no full chunk call after the first)."""
        c = self._chunks.get((chunk, not cached))
        if c is None or c is _EXACT or _TILED_VERSION[0] != self._tiled_gen:
            c = self._chunk(chunk, not cached)
            if c is _EXACT:
                return None
        k = (new_tokens - 1) // chunk
        if k < 1 or chunk < 2:
            return None
        v = None
        if not cached:  # the first call (fresh caches, a full chunk) is one of the request's calls
            if c.grid is None:
                self._fresh_grid(c, chunk)
            v = c.first
            r = (new_tokens - 1) % chunk
            if c.top and r >= c.top.lo:  # the shorter call, nearly a chunk: the prompt's highest, often
                f = c.top.bounds(r, chunk * k)[0]
                if f is not None and (v is None or f > v):
                    v = f
            if k < 2:
                return v
        if c.lower is None:  # built on the first use (the oMLX facade never asks)
            c.lower = c.model.pieces(chunk, chunk, "lower", both=False)[0]
        f = c.lower.at(cached + chunk * (k - 1))
        return f if cached or v is None or f > v else v

    def _total(self, c: _Chunk, new: int, S: int, cached: int) -> int:
        k, r = divmod(new - 1, S)
        if not cached:
            if c.grid is None:
                self._fresh_grid(c, S)
            if new == 1:
                return c.one
            v = c.lasts[bisect_left(c.ltops, r or S)].at(new - 1)  # the last token: its own call
            f = _chord(c.grid, c.grid_v, S if k else r, c.slack)  # the first call, on fresh caches
            if f > v:
                v = f
            if k > 1 or (k and r):
                f = c.full.at(S * (k - 1)) if k > 1 else 0
                if f > v:
                    v = f
            if r and k:
                f = c.calls[_bucket(c.tops, r)].at(S * k)
                if c.top and r >= c.top.lo:
                    g = c.top.bounds(r, S * k)[1]
                    if g < f:
                        f = g
                if f > v:
                    v = f
            return v
        if not k and r:  # a prompt shorter than a chunk after a prefix: its call follows one token
            c = self._chunks.get((S, 2)) or self._chunk(S, 2)
        v = c.lasts[bisect_left(c.ltops, r or (S if k else 1))].at(cached + new - 1)  # the last token
        if k:
            f = c.full.at(cached + S * (k - 1))
            if f > v:
                v = f
        if r:
            f = c.calls[_bucket(c.tops, r)].at(cached + S * k)
            if f > v:
                v = f
        return v

    def _fresh_grid(self, c: _Chunk, S: int) -> None:
        """The first call of a prompt without a prefix (fresh caches: routes and masks of their own), from the
        exact model at grid query counts: every 256-row step's first and last count, and both sides of every
        threshold (kernel table, sliding windows, item-structure changes). Between two grid points each
        window position's bytes are a convex function of the count (activations linear, scores and masks
        quadratic), so the window maximum is too and the chord is above it."""
        m = c.model
        pts = {1, S}
        j = STEP
        while j < S:  # a step's last count and the next one's first (the growth steps up between them)
            pts.update((j, j + 1))
            j += STEP
        for t in m.kv_thresholds():  # a route from kv >= t: q = t - 1 and t sit on both sides
            pts.update((t - 1, t))
        for t in m.windows() | m.changes:  # a mask past the window; the last count of a route or item layout
            pts.update((t, t + 1))
        grid = sorted(x for x in pts if 1 <= x <= S)
        vals = []
        for q in grid:
            v = self._short_total(q)  # a fresh call of q queries, then the last token
            vals.append(v if not vals or v > vals[-1] else vals[-1])
        c.one = self._exact(1, S, 0)  # a one-token prompt: one fresh call, the last
        # the first call of every longer prompt: exact(S + 1) is the larger of it and the last token after it,
        # so it is the first call's own total wherever the last token's bound stays below it (else unknown)
        e = self._exact(S + 1, S, 0)
        c.first = e if S > 1 and e > c.lasts[bisect_left(c.ltops, S)].at(S) else None
        c.grid_v = vals
        c.grid = grid
        c.short = ShortCalls(grid, self._short_total, c.slack)

    def _short_total(self, q: int) -> int:
        """T(q) of ``peak.fast_short``: one fresh call of ``q`` queries, then the last token (any chunk >= q)."""
        v = self._short.get(q)
        if v is None:
            v = self._short[q] = self._exact(q + 1, q, 0)
        return v

    def _chunk(self, chunk: int, fresh: bool):
        if self._unknown:
            raise UnsupportedError(self._unknown)
        if _TILED_VERSION[0] != self._tiled_gen:  # a tiled kernel was (un)registered: recompute
            self._chunks.clear()
            self._memo.clear()
            self._fixed.clear()
            self._exact.cache_clear()
            self._tiled_gen = tiled_state()[0]
        # fresh: without a prefix the capacity phases are the chunk's own (``cycle_reach``); 2: after a prefix,
        # a prompt shorter than a chunk (its calls follow the prefix's last token)
        key = (chunk, fresh)
        c = self._chunks.get(key)
        if c is None:
            # past MAX_LINE_CHUNK no line is built (peak.request: they cost ~2 lines per 256 query counts)
            c = self._chunks[key] = _EXACT if self._always_exact or chunk > MAX_LINE_CHUNK else self._build(chunk, fresh)
        return c

    def chunk_transient(self, n: int, kv_len: int) -> int:
        """What ONE call of ``n`` queries over ``kv_len`` keys allocates beyond the caches it held before
        (bytes; never negative, never below the exact model of that call -- and of the last token after
        it -- after a prefix fed in chunks of ``n``): the rows it adds, the old buffers a growing cache
        copies, the activations in flight. The call is taken in the worst capacity phase and never below a
        fresh cache's first call, which also makes the answer grow with ``kv_len`` (CPU / Metal; CUDA
        answers the exact model of that history, which does not always grow with ``kv_len``)."""
        if n <= 0:
            return 0
        if self._unknown:
            raise UnsupportedError(self._unknown)
        kv = kv_len if kv_len > n else n
        cached = kv - n
        c = self._chunk(n, False)
        first = self._exact(n + 1, n, 0)  # a fresh cache's first call: its first blocks (every cache kind)
        if c is _EXACT:
            e = self._exact(n + 1, n, cached)
            return e if e > first else first
        if not cached:
            return first
        v = c.beyond[-1].at(cached)
        w = c.add_full + c.last_beyond.at(cached + n)  # the last token after it, over the same prefix
        if w > v:
            v = w
        return v if v > first else first

    # -- internals ----------------------------------------------------------------------------------
    def _exact_uncached(self, new_tokens: int, chunk: int, cached: int) -> int:
        req = Request(cached + new_tokens, cached=cached, chunk=chunk)
        return prefill_peak(self.profile, req, routes=self.routes, dtype=self.dtype, nax=self.nax,
                            kv_scale=self.kv_scale).peak_bytes

    def _prefix_uncached(self, cached: int, chunk: int) -> int:
        if not cached:
            return 0
        rep = kv_report(self.profile, cached, chunk=chunk, dtype=self.dtype)
        if self.kv_scale == 1.0:
            return rep.total
        # the same rounding as prefill_peak's (the prefix is subtracted: rounded the same way, never more)
        return scaled_total(self.profile, rep, self.kv_scale)

    def _build(self, S: int, fresh) -> _Chunk:
        """Every bound of chunk size ``S`` (``fresh`` True: for prompts without a cached prefix, whose capacity
        phases are known; 2: for prompts shorter than a chunk after a prefix)."""
        m = CallModel(self.profile, self.routes, tiled_state()[1], self.dtype, self.nax, self._worst, self.kv_scale,
                      fresh_history=fresh is True, prev_one=fresh == 2)
        tops = m.q_tops(S)
        calls, beyond = [], []
        cum = cumb = None
        prev = 0
        for Q in tops:
            t, b = m.pieces(Q, S, "one" if Q == 1 else "upper", q_min=prev + 1)
            prev = Q
            cum = t if cum is None else cum.merged(t)
            cumb = b if cumb is None else cumb.merged(b)
            calls.append(cum)
            beyond.append(cumb)
        own = t  # the chunk's own bucket (full calls only), without the smaller buckets' (a one-token call's
        # copy is charged in the in-place op count: GBs above a full call at long offsets, chunk 256)
        # the last token, per bucket of the call before it (a sliding cache holds window - 1 rows plus that
        # call's): one token (a prompt of one new token after a prefix), the shorter call, or a chunk
        lasts, last_b = [], []
        cum = cumb = None
        ltops = sorted({1, S} | {4 ** j for j in range(1, 8) if 4 ** j < S})
        for P in ltops:
            t, b = m.pieces(P, S, "last")
            cum = t if cum is None else cum.merged(t)
            cumb = b if cumb is None else cumb.merged(b)
            lasts.append(cum)
            last_b.append(cumb)
        c = _Chunk(m, tops, calls, beyond, lasts[-1], last_b[-1], None, m.add_bytes(S))
        c.own = own
        c.ltops, c.lasts = ltops, lasts
        if fresh is True and TopStep.applies(m, S):
            c.top = TopStep(m, S, calls[-1])
        if fresh is True and S % STEP == 0 and m.grows(2, S):  # the shorter calls below the last step
            hi = c.top.lo - 1 if c.top else S - 1
            if hi > 2:
                c.mid = TopStep(m, S, calls[-1], lo=2, hi=hi, known="slide")
            c.row = None  # ``_known`` builds the known-layout lines (``_refined``)
        return c


def _growing_row_bytes(m: CallModel) -> float:
    """Bytes one more row of every ``KVCache`` holds (all layers; the full-attention caches at ``kv_scale``)."""
    from .replay import KV_SCALED_KINDS

    kv = other = 0
    for name, lt in m.p.layer_types.items():
        for e in lt.entries:
            if e.kind in ("full", "latent", "indexer"):
                b = e.row_elements * m.act * m.counts[name]
                if e.kind in KV_SCALED_KINDS:
                    kv += b
                else:
                    other += b
    return other + kv * m.kv_scale


def _last_before(j: int, start: int, period: int, pre: list[int], res: list[int]) -> int:
    """The largest call index ``i < j`` whose phase is the one with indices ``pre`` before the cycle (which starts
    at ``start``) and positions ``res`` in it (``FastPeak._phases``), or 0 (none)."""
    x = j - 1 - start
    if x >= 0 and res:
        q, t = divmod(x, period)
        k = bisect_right(res, t)
        if k:
            return start + q * period + res[k - 1]
        if q:
            return start + (q - 1) * period + res[-1]
    k = bisect_left(pre, min(j, start))
    return pre[k - 1] if k else 0


def _chord(grid: list[int], vals: list[int], q: int, slack: int) -> int:
    """The grid's value at ``q``, or the chord between the grid points around it (plus the rounding slack)."""
    i = bisect_left(grid, q)
    if grid[i] == q:
        return vals[i]
    a, b = grid[i - 1], grid[i]
    va, vb = vals[i - 1], vals[i]
    return va + -(-(vb - va) * (q - a) // (b - a)) + slack


def _bucket(tops: list[int], r: int) -> int:
    """Index of the smallest bucket top >= r."""
    return bisect_left(tops, r)
