"""The monotone envelope of a request's total (``held before + prefill peak``): what the public API reports.

Why an envelope: the truth is not monotone. mlx-lm's ``KVCache`` grows in 256-row steps and copies its old
buffer when it does, so which call of a prompt copies the caches, and from how many rows, moves with the
cached prefix's alignment: a one-token follow-up after a prefix of 256 j tokens copies every full-attention
cache, after 256 j + 5 it does not; a 1,000-token prefix peaked ~1 MB above a 1,100-token one on MLX's CPU
backend (tests/test_properties_live.py). Along the prompt, the last token after a full chunk holds a chunk's
sliding rows where the last token after a shorter call holds fewer, so ``k S + 1`` new tokens can peak above
``k S + 2``. An engine asks "does this fit?" and "how long can the prompt be?": a longer prompt or prefix that
reports less memory makes both answers wrong. So the API reports, for a request of ``n`` new tokens in
chunks of ``S`` after ``c`` cached, a number ``E(n, c)`` that is

* never below the exact model of the request (so never below the truth where the model is not), and
* non-decreasing in ``n`` (fixed ``c``, ``S``) and in ``c`` (fixed ``n``, ``S``).

Construction (``V`` the exact total, ``U`` the fast path's upper bound after a prefix, ``tight_upper``)::

    P(n)    = {n, 1, 2} + {k S + 1, k S + 2, S, if k = (n - 1) // S >= 1}     (the dominating prompt lengths, <= n)
    E(n, 0) = max over m in P(n) of V(m, 0)
    E(n, c) = max(E(n, 0), V(n, c), max over m in P(n) of U(m, c))          (c > 0)

Why it is monotone (the argument the property tests check):

* In ``n``, one block ``k`` at a time. Within a block (``n = k S + 1 + r``, ``2 <= r < S``) a longer prompt
  has the same full-chunk calls, a shorter call of ``r + 1`` queries in place of ``r`` at the same offset, in
  the same layout (a RotatingKVCache concatenates every multi-token update; a KVCache grows when the rows
  pass its capacity, which more queries only bring earlier), and its last token one row later: every term of
  both grows (more queries: more rows, activations, scores; later: more held, longer keys), so ``V`` and ``U``
  (buckets cumulative in ``q``, ``Pieces`` cumulative in the offset) do not fall. What the layout changes is
  in ``P``: ``r = 0`` (``k S + 1``, the last token after a full chunk, which holds a chunk's sliding rows) and
  ``r = 1`` (``k S + 2``: a one-token shorter call updates its rotating caches in place, 2 ops where a
  longer one's concatenate takes 6, and the derived Metal bound's run-ahead window, a number of ops, then
  holds more of the call: gpt-oss-20b metal after 3584 cached, chunk 256, 2 new tokens 0.5 MB above 3;
  counting every rotating update in 2 ops in that window would make the bound itself monotone there, but it
  raised derived Metal peaks of sliding-window models by up to 24.5% at 131k tokens -- not done).
  Crossing into block ``k``: ``k S + 1`` dominates every length of the blocks before (its full chunk at
  offset ``(k - 1) S`` is at or past every earlier call's offset with at least its queries; its last token,
  after a full chunk, is past every earlier last token), and ``S`` the first block (prompts of at most a chunk:
  after a prefix a route of their own, ``FastPeak``'s ``prev_one`` bounds), with ``1`` and ``2`` in ``P``.
* In ``c``: ``U(m, c)`` is the maximum of per-call bounds each cumulative in the call's offset (``Pieces``
  are running maxima over the offset, every capacity phase a history can leave taken at its worst:
  ``peak.fast_lines``), and a longer prefix moves every call of the same prompt to a later offset; so
  ``U(m, c) >= U(m, c')`` for ``c' <= c``, hence ``>= V(m, c')``. ``E(n, 0)`` is in every ``E(n, c)``.
  (The whole-step copy that makes the truth fall off whole steps is in ``U`` at every offset: the envelope
  charges it wherever some shorter prefix pays it. It is also what oMLX's follow-ups pay at EVERY prefix: its
  paged prefix cache rebuilds a KVCache from blocks concatenated to exactly the cached rows, so the first call
  after a restore always grows the buffer and copies it -- omlx/cache/type_handlers.py,
  ``KVCacheHandler.concatenate_states`` / ``reconstruct_cache``.)

Calibration points (no prefix, a prompt of whole chunks plus the last token: ``n = k S + 1``) are their own
dominating point: ``E = V`` there, their est/measured unchanged.

A ``bound`` basis (unfused fp32 attention, no donation, the whole run-ahead window) has fast lines too since
session 10 (``peak.fast``): its ``U`` terms make it monotone as above (deepseek-v2-lite on CPU fell 5.4% with the
prefix before). Not a gated-DeltaNet on CPU (``FastPeak._shapeless``) nor chunked attention: exact only, like CUDA
below; after a prefix their ``U`` is ``peak.prefix_lines``' per-count lines.

CUDA (graph-commit boundaries move with the length, no line holds): without a prefix ``E(n, 0)`` is
``CudaEnvelope.fresh``: the maximum over ``P(n)`` raised to the block's cumulative bucket bounds of
``peak.fast_cuda`` (each above every call of its bucket wherever graphs start), monotone within a block by
construction. After a prefix ``E(n, c) = max(E(n, 0), U_cuda(n, c))``, ``U_cuda`` the bound of
``peak.fast_cuda_prefix.CudaPrefix`` (every call bounded by a grid of query-count x offset cells, cumulative in
both): non-decreasing in ``n`` and ``c`` by construction and above the replay (session 10). A gated-DeltaNet on CUDA
(its buckets split at nearly every query count) takes ``CudaCounts``' per-count tables as ``U_cuda`` (session 12):
non-decreasing in ``c`` by construction and above the replay, NOT within a block in ``n``; chunked attention has
``CudaPrefix`` cells since session 12 (and ``peak.prefix_lines`` on CPU / Metal). Where no fast bound exists (cells
that fail: ``MAX_SPLITS``) ``U`` is not available and ``E(n, c) = max(E(n, 0), max over P(n) of V(m, c))``: monotone in
``n`` across blocks as above, but NOT proven in ``c`` nor within a block (CUDA's commits): said so by the properties'
domains.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Callable

from ..errors import OmlxProfilesError
from . import prefix_lines
from .kernels import _TILED_VERSION
from .request import KEYED_AS_GIVEN, MAX_LINE_CHUNK, table_chunk

Total = Callable[[int, int], int]  # (new tokens, cached) -> held before + peak, for the chunk at hand
Upper = Callable[[int, int], "int | None"]


def dominating_lengths(new: int, chunk: int) -> tuple[int, ...]:
    """``P(n)``: the prompt lengths (new tokens) whose totals every shorter prompt's total is below (module
    doc): ``n`` itself; one and two tokens (a single call that grows and computes the logits; two one-token
    calls); and from the second block on, the block's first two lengths ``k S + 1`` (the last token after a full
    chunk) and ``k S + 2`` (a one-token shorter call: its rotating updates in place) and a chunk ``S``."""
    pts = {new} | {m for m in (1, 2) if m <= new}
    k = (new - 1) // chunk
    if k >= 1:
        pts.update(m for m in (k * chunk + 1, k * chunk + 2, chunk) if m <= new)
    return tuple(sorted(pts))


def envelope_total(new: int, chunk: int, cached: int, exact: Total, upper: Upper | None = None,
                   exact_here: int | None = None, fresh: Callable[[int], "int | None"] | None = None,
                   prefix_upper: Upper | None = None) -> int:
    """``E(new, cached)`` (module doc). ``exact(m, c)``: the exact total of ``m`` new tokens after ``c``
    cached (in chunks of ``chunk``); ``upper(m, c)``: the fast path's upper bound of the same, or ``None``
    where there is none; ``exact_here``: ``exact(new, cached)`` when the caller has it already; ``fresh(m)``:
    ``E(m, 0)`` where the caller has a monotone one of its own (CUDA: ``CudaFit.envelope``, the cumulative
    bucket bounds of a block), used instead of the maximum over ``P(new)`` (``None``: that maximum);
    ``prefix_upper(m, c)``: after a prefix, a bound above the exact total of every request of at most ``m`` new
    tokens after at most ``c`` cached, non-decreasing in both (CUDA: ``peak.fast_cuda_prefix.CudaPrefix.upper``);
    where it answers, ``E(new, cached) = max(E(new, 0), prefix_upper(new, cached))``, and this request is not
    replayed (its exact total is below that by construction; ``exact_here``, where given, stays in the maximum as a
    guard)."""
    pu = prefix_upper(new, cached) if cached and prefix_upper is not None else None
    if pu is not None:
        base = fresh(new) if fresh is not None else None
        if base is None:
            base = max(exact(m, 0) for m in dominating_lengths(new, chunk))
        v = base if base > pu else pu
        return v if exact_here is None or exact_here <= v else exact_here
    here = exact(new, cached) if exact_here is None else exact_here
    pts = dominating_lengths(new, chunk)
    base = fresh(new) if fresh is not None else None
    if base is not None:
        if not cached:
            return base if base > here else here
    else:
        base = max(exact(m, 0) if (m, cached) != (new, 0) else here for m in pts)
    if not cached:
        return base
    v = max(base, here)
    for m in pts:
        u = upper(m, cached) if upper is not None else None
        if u is None:
            u = exact(m, cached) if m != new else here
        if u > v:
            v = u
    return v


#: What a term of the envelope may raise that means "no such term here" (``reported_total(guard=True)``).
NO_TERM = (OmlxProfilesError, ArithmeticError)


def reported_total(new: int, chunk: int, cached: int, exact: Total, fast, *, lines: dict, qlines: dict,
                   cuda_fresh: Callable[[], "CudaEnvelope | None"], cuda_prefix: Callable[[], object],
                   exact_here: int | None = None, guard: bool = False) -> int:
    """``envelope_total`` with its terms picked from the fast models at hand: the one wiring shared by the API
    (``Estimator.prefill_peak``) and the oMLX facade (``MonotonePeak.peak``), which had the same block twice
    (a term added to one and not the other would make the two report different totals for one request).

    ``fast``: the profile's ``peak.fast.FastPeak`` for the backend, or ``None`` (none could be built, or the
    caller's fast bounds are off). ``U`` (``upper``): ``tight_upper`` where its lines hold (not ``exact_only``);
    after a prefix, for a model it answers exactly that ``peak.prefix_lines`` bounds (a gated-DeltaNet on CPU),
    the per-count lines; else none. Where the lines do not hold (CUDA's graph commits, or no ``FastPeak``):
    ``cuda_fresh()`` the ``CudaEnvelope`` whose ``fresh`` is ``E(m, 0)``, and after a prefix ``cuda_prefix()`` the
    table whose ``upper`` is ``U_cuda`` (``peak.fast_cuda_prefix``), each ``None`` where there is none. ``lines`` /
    ``qlines``: the caller's memos of ``tight_upper`` / ``prefix_lines.prefix_upper``. ``guard``: a term that raises
    ``NO_TERM`` is taken as absent (the API: the replay answers instead); without it the error propagates (the
    facade then reports the peak unknown)."""
    lines_hold = fast is not None and not fast.exact_only
    upper = fresh = prefix_upper = None
    if lines_hold:
        upper = lambda m, c: tight_upper(fast, m, chunk, c, lines)  # noqa: E731
    elif fast is not None and cached and prefix_lines.applies(fast):
        upper = lambda m, c: prefix_lines.prefix_upper(fast, m, chunk, c, qlines)  # noqa: E731
    if not lines_hold:
        env = cuda_fresh()
        fresh = env.fresh if env is not None else None
        cp = cuda_prefix() if cached else None
        prefix_upper = cp.upper if cp is not None else None
    if guard:
        upper, fresh, prefix_upper = _guarded(upper), _guarded(fresh), _guarded(prefix_upper)
    return envelope_total(new, chunk, cached, exact, upper, exact_here=exact_here, fresh=fresh,
                          prefix_upper=prefix_upper)


def _guarded(term):
    """``term`` answering ``None`` (no such term) where it raises ``NO_TERM``; ``None`` stays ``None``."""
    if term is None:
        return None

    def guarded(*args):
        try:
            return term(*args)
        except NO_TERM:
            return None
    return guarded


def tight_upper(fast, new: int, chunk: int, cached: int, memo: dict, need: int | None = None):
    """``U(new, cached)`` (``FastPeak.total_bound`` after a prefix) with the shorter call bounded at its own query
    count instead of its bucket's top: the bucket's lines charge ``r`` queries as up to 4x as many (199 as 256
    after a 32k prefix cost DeepSeek-V3 on metal 21% of its total), which the envelope would report. The call's
    lines at ``r`` (``CallModel.pieces`` over the same layouts as its bucket) are, like the bucket's, a running
    maximum over the offset and no lower for a larger ``r`` of the same bucket (same layouts and routes, every
    item's bytes growing with the query count); the lower buckets' cumulative lines stay in the maximum, so
    ``U`` stays non-decreasing in ``new`` and ``cached``. ``memo``: the lines per (chunk, layout, r), built once
    (tens of ms). ``None`` where there are no bounds."""
    gen = _TILED_VERSION  # module-level names: this runs up to six times per ``Estimator.fits`` call
    if fast.exact_only or cached <= 0 or chunk > MAX_LINE_CHUNK:  # past it no lines are built (peak.request)
        return None
    k, r = divmod(new - 1, chunk)
    fresh = 2 if (not k and r) else False
    c = fast._chunks.get((chunk, fresh))
    if c is None or gen[0] != fast._tiled_gen:
        c = fast._chunk(chunk, fresh)
    v = c.lasts[bisect_left(c.ltops, r or (chunk if k else 1))].at(cached + new - 1)  # the last token
    if k:
        f = c.full.at(cached + chunk * (k - 1))
        if f > v:
            v = f
    if r:
        off = cached + chunk * k
        i = bisect_left(c.tops, r)
        if c.tops[i] == r:
            f = c.calls[i].at(off)
        else:
            key = (chunk, fresh, r, gen[0])
            if need is not None and key not in memo:
                # the lines at r lie between the lower buckets' and the bucket top's: where ``need`` is not
                # between those, they decide without building r's own lines (tens of ms per new r)
                lo_u = c.calls[i - 1].at(off) if i else 0
                hi_u = c.calls[i].at(off)
                lo_u, hi_u = max(lo_u, v), max(hi_u, v)
                if hi_u <= need or lo_u > need:
                    return lo_u, hi_u
            f = prefix_lines.shorter_call_at(c, i, r, chunk, off, memo, key)
        if f > v:
            v = f
    return v


def envelope_bounds(new: int, chunk: int, cached: int, fast, need: int | None = None,
                    lines: dict | None = None) -> tuple[int | None, int] | None:
    """(lower or ``None``, upper) of ``envelope_total`` from ``FastPeak``'s bounds alone (``Estimator.fits``, in
    microseconds): every ``V`` in the envelope bounded by ``FastPeak``'s bounds (below: their lower bounds, the
    envelope is above each; above: their upper bounds), every ``U`` term computed as the envelope computes it
    (``tight_upper``, with ``lines`` its memo): where a ``U`` term is the envelope's largest, the two meet and the
    verdict needs no replay. After a prefix ``V(n, c)`` only bounds the envelope from below: ``U(n, c)``, one of
    its terms, is never below it. The prefix-free terms of ``P(n)`` other than ``n`` (1, 2, ``S``, ``k S + 1``,
    ``k S + 2``: a few values per chunk size) come from ``FastPeak.fixed_bounds`` (fully refined, memoized).
    ``need``: the bytes the budget leaves (``FastPeak.bounds`` refines only where it falls between its lines);
    with ``need``, as soon as a lower bound is above it the answer is ``(lo, lo)`` (the verdict is decided: that
    ``hi`` is not an upper bound). ``None`` where a bound is missing (the exact model answers)."""
    b = fast.bounds(new, chunk, cached, need)
    if b is None:
        return None
    lo, hi = b
    if cached:  # V(n, c) <= U(n, c) (``tight_upper``, a term below): only its lower bound can move the envelope
        hi = 0
    early = need is not None
    if early and lo is not None and lo > need:
        return lo, lo
    memo = {} if lines is None else lines
    for m in reversed(dominating_lengths(new, chunk)):  # n first: its terms are the largest, most often
        if cached:
            u = tight_upper(fast, m, chunk, cached, memo, need)
            if u is None:
                return None
            ul, uh = u if isinstance(u, tuple) else (u, u)  # (lower, upper) of U where need decides
            if uh > hi:
                hi = uh
            if lo is None or ul > lo:
                lo = ul
            if early and lo > need:
                return lo, lo
        if m != new:
            bm = fast.fixed_bounds(m, chunk, need)
        elif cached:
            bm = fast.bounds(m, chunk, 0, need)
        else:
            continue
        if bm is None:
            return None
        if bm[1] > hi:
            hi = bm[1]
        if bm[0] is not None and (lo is None or bm[0] > lo):
            lo = bm[0]
            if early and lo > need:
                return lo, lo
    return lo, hi


def cum_upper(fit, new: int) -> int | None:
    """``CU(new)``: the largest bucket bound (``peak.fast_cuda.CudaFit`` leaves) of the shorter calls and the
    last tokens of every prompt in ``new``'s block up to ``new`` (``k S + 2 .. new``); 0 at ``k S + 1``; ``None``
    where a bucket has no bound (a gated-DeltaNet's item structure changes with nearly every query count). A
    bucket's bound is above every call in it, so ``CU`` is above the replay of every such prompt and
    non-decreasing in ``new`` by construction. ``fit.cum_upper`` where the fit has it."""
    own = getattr(fit, "cum_upper", None)
    if own is not None:
        return own(new)
    k, r = divmod(new - 1, fit.c)
    if not r:
        return 0
    fit.bounds(new)  # builds the block's leaves (and the full calls before it)
    lv = fit._leaves[k]
    best = 0
    for leaves in lv[:3]:
        for start, up in zip(leaves.starts, leaves.ups):
            if start > r:
                break
            if up is None:
                return None
            if up > best:
                best = up
    return best


#: ``carry_cells``' tables (oldest first out), shared by every ``CudaEnvelope`` of one profile shape and chunk.
_CARRY: dict = {}
_CARRY_KEEP = 32


def carry_cells(profile, routes, chunk, dtype, nax, kv_scale, worst):
    """``CudaPrefix``'s cells for ``CudaEnvelope``'s carry, coarser than the tables after a prefix (cells about offset
    / 4 wide, no halving: ``CudaCounts``' call tables' settings): gpt-oss-20b chunk 2048, to 6k / 30k / 129k keys
    1.34 / 1.86 / 2.33 s of CPU against 2.81 / 4.33 / 6.06 s at the default cells, bounds +0.06% / -0.1% / +1.2%.
    Kept per profile shape, kernel table, chunk, dtype, NAX, KV width and worst case (the API and the facade share
    one); ``False`` where ``CudaPrefix`` does not apply (a recurrent layer's per-count tables, a failed cell)."""
    from .call import activation_dtype
    from .fast_cuda import _shape_key
    from .fast_cuda_prefix import CudaPrefix

    key = (_shape_key(profile), routes.backend, id(routes.table), chunk, activation_dtype(profile, dtype)[0], nax,
           float(kv_scale), worst)
    hit = _CARRY.get(key)
    if hit is not None and hit[0] is routes.table:
        t = hit[1]
        return t if t is False or not t.failed else False
    try:
        t = CudaPrefix(profile, routes, chunk, dtype, nax, kv_scale, worst)
        t.frac, t.refine = 4, 0
    except OmlxProfilesError:
        t = False
    if len(_CARRY) >= _CARRY_KEEP:
        del _CARRY[next(iter(_CARRY))]
    _CARRY[key] = (routes.table, t)
    return t


class CudaEnvelope:
    """``E(n, 0)`` on CUDA (``fresh``) from ``peak.fast_cuda.CudaFit``, for ``n = k S + 1 + r``:

        E(n, 0) = max( max over m in P(n) of V(m, 0),  min(CU(n), UF(n)),  UF(k S) )          (k >= 1; cells)
        E(n, 0) = max( max over m in P(n) of V(m, 0),  CU(n) )                                  (k = 0)

    Within block ``k`` the exact replay falls where MLX's graph commits move with the query count (qwen3.5-35b-a3b,
    chunk 52: 43 new tokens 1.305 GB, 52 new 1.293 GB); ``CU`` is the running maximum of the block's bucket
    bounds, each above every call in its bucket, so ``E`` is non-decreasing within a block by construction and
    never below the replay.

    Across blocks (session 13): each block's buckets are split and bounded on their own, so ``CU(j S)`` is not
    monotone in ``j`` and is up to 1.46x the replay (gpt-oss-20b chunk 2048, 32,768 new tokens: 13.85 GB against
    9.52); until session 13 only the previous block's ``CU(k S)`` was carried, and the report fell (1,024 -> 1,025
    new tokens at chunk 512; 32,768 -> 131,072 at chunk 2048: -7.6%). ``UF(m)`` (``full_upper``) is an upper bound
    of the replay of every prompt of at most ``m`` tokens, non-decreasing in ``m`` BY CONSTRUCTION: block 0's
    cumulative bucket bound (the fresh first call's shorter calls and last tokens), the full calls' running maximum
    (the fresh first one at offset 0 included) and ``peak.fast_cuda_prefix.CudaPrefix``'s cells of every later call
    (cumulative in the query count and the offset; the prompt's own chunks are a history they cover). Every report
    of a block ``j < k`` is at most ``UF(j S + S) <= UF(k S)`` (its ``CU`` term is taken at most at ``UF``, its
    ``P`` terms are replays below ``UF``; the one-token prompt ``V(1)`` is in every ``P(n)``), so ``UF(k S)``
    carries all of them. Cost: the cells to the prompt's length (``carry_cells``: coarser than the tables after a
    prefix), memoized per profile shape and chunk, and block 0's buckets once; later requests are bisections. Where there are no cells (a gated-DeltaNet: ``CudaCounts``' per-count tables; a cell
    that fails) the previous block's ``CU(k S)`` is carried as before: NOT monotone across blocks (qwen3.5-35b-a3b
    chunk 256: 512 -> 513 new tokens -3.9%; ``proven`` says which). Where a bucket has no bound (``CU`` None),
    ``E`` is the maximum over ``P(n)`` alone: monotone across blocks, not within one."""

    def __init__(self, fit):
        self.fit = fit
        self._cells = None  # peak.fast_cuda_prefix.CudaPrefix of this fit's profile and chunk, or False

    def cells(self):
        """``CudaPrefix``'s cells for this fit (shared with the requests after a prefix: ``prefix_table``), or
        ``None``: a profile they do not cover (a gated-DeltaNet's per-count tables, chunked attention...)."""
        c = self._cells
        if c is None:
            c = self._cells = carry_cells(*self.fit._args)
        return c or None

    def full_upper(self, new: int) -> int | None:
        """``UF(new)``: an upper bound of the exact replay of every prompt of at most ``new`` new tokens, without a
        prefix, non-decreasing in ``new`` by construction (class doc), or ``None`` where there are no cells."""
        from .fast_cuda_prefix import _NoBound

        cp = self.cells()
        if cp is None:
            return None
        fit = self.fit
        S = fit.c
        k, r = divmod(new - 1, S)
        v = cum_upper(fit, S)  # block 0: the fresh first call's buckets (its shorter calls and last tokens)
        if v is None:
            return None
        if not k:
            return v
        fit.bounds(new)
        f = fit._full_part(k, r) or 0  # every full call (the fresh first one at offset 0 included), exact
        if f > v:
            v = f
        try:
            u = cp.last_bound(new - 1, S)  # the last token, after a call of at most a chunk
            if k >= 2:  # the full calls at offsets S .. (k - 1) S
                u = max(u, cp.call_bound(S, (k - 1) * S))
            if r:  # the shorter call at k S
                u = max(u, cp.call_bound(r, k * S))
        except _NoBound:
            return None
        return u if u > v else v

    def bounded(self, new: int) -> bool:
        """Whether ``E(m, 0)`` comes from the bounds for every ``m <= new`` of ``new``'s block and the one before
        (then it is non-decreasing there, and with cells across every block before); False where a bucket has no
        bound."""
        k = (new - 1) // self.fit.c
        return cum_upper(self.fit, new) is not None and (k == 0 or cum_upper(self.fit, k * self.fit.c) is not None)

    def proven(self, new: int) -> bool:
        """Whether ``E(m, 0)`` is non-decreasing over every ``m <= new`` by construction: ``bounded`` and, past the
        first block, the cells' carry (``full_upper``)."""
        k = (new - 1) // self.fit.c
        return self.bounded(new) and (k == 0 or self.full_upper(k * self.fit.c) is not None)

    def fresh(self, new: int) -> int:
        """``E(new, 0)``. Where the bounds exist it needs no call of ``new`` itself: its replay is at most its full
        calls' part or ``CU(new)`` (its shorter call and its last token are in buckets ``CU`` covers), so
        ``Estimator.fits`` decides from table look-ups (``CudaFit``'s ``P(n)`` terms are exact once prepared)."""
        fit = self.fit
        k, r = divmod(new - 1, fit.c)
        fit.bounds(new)  # the full calls up to this block (and its buckets): tables, built once
        cu = cum_upper(fit, new)
        prev = cum_upper(fit, k * fit.c) if k and cu is not None else 0
        others = [m for m in dominating_lengths(new, fit.c) if m != new]
        if cu is None or prev is None:
            return max(fit.exact(m) for m in others + [new])
        if k:
            carry = self.full_upper(k * fit.c)
            if carry is not None:  # the cells: the carry is UF(k S), and CU is taken at most at UF (class doc)
                uf = self.full_upper(new)
                cu = cu if uf is None or cu <= uf else uf
                prev = carry
        v = max(cu, prev, fit._full_part(k, r) or 0, fit.exact(new) if not r else 0)
        for m in others:
            e = fit.exact(m)
            if e > v:
                v = e
        return v


def envelope_bounds_fresh(new: int, chunk: int, fit, env: "CudaEnvelope | None" = None) -> tuple[int, int | None]:
    """``envelope_bounds`` without a prefix from per-length bounds ``fit.bounds(m) -> (lower, upper or None)``
    (``peak.fast_cuda.CudaFit``): the request's own lower bound, the largest upper bound over ``P(n)``; with
    ``env`` (``CudaEnvelope``: what the API reports on CUDA), its ``E(n, 0)`` twice."""
    if env is not None:
        e = env.fresh(new)
        return e, e
    lo, hi = fit.bounds(new)
    for m in dominating_lengths(new, chunk):
        if m != new and hi is not None:
            h = fit.bounds(m)[1]
            hi = None if h is None else max(hi, h)
    return lo, hi


def envelope_exact_fresh(new: int, chunk: int, fit, env: "CudaEnvelope | None" = None) -> int:
    """``E(new, 0)`` from ``fit.exact(m)`` (the exact total of ``m`` new tokens without a prefix), or
    ``env.fresh(new)`` (``CudaEnvelope``)."""
    if env is not None:
        return env.fresh(new)
    return max(fit.exact(m) for m in dominating_lengths(new, chunk))


class MonotonePeak:
    """The oMLX facade's prefill peak (over the prefix) as the envelope of ``FastPeak``'s answers: ``V`` is
    ``FastPeak.peak`` + the prefix's cache (itself the fast path's bound, or the exact model where that is
    all there is), ``U`` ``tight_upper``. ``peak(n, S, c) = E(n, c) - prefix(c)``: never negative
    (``E(n, c) >= V(n, c) >= prefix(c)``), never below the exact model, and ``prefix(c) + peak`` non-decreasing
    in ``n`` and ``c``. Memoized per request (the facade's hot path: a dict look-up)."""

    def __init__(self, fast):
        self.fast = fast
        self._memo: dict[tuple[int, int, int], int] = {}
        self._lines: dict = {}  # tight_upper's shorter-call lines
        self._qlines: dict = {}  # peak.prefix_lines' per-count lines (a model FastPeak answers exactly)
        self._gen = _TILED_VERSION[0]
        self._cuda: dict = {}  # chunk -> CudaEnvelope (CUDA), or False
        self._cuda_prefix: dict = {}  # chunk -> peak.fast_cuda_prefix.CudaPrefix (CUDA), or False

    def _table(self, memo: dict, keep: int, chunk: int, build):
        """``build(profile, routes, chunk, dtype, nax, kv_scale, worst)`` at the facade's KV width, memoized per chunk
        size (``keep`` of them), or ``None``: another backend than CUDA, a peak reported unknown, or no table
        (``OmlxProfilesError``). The one shape of ``_cuda_fit`` and ``_prefix_fit``."""
        t = memo.get(chunk)
        if t is None:
            t = False
            f = self.fast
            if f.routes.executor.graph_commit is not None and not f._unknown:
                from .basis import basis_for

                b = basis_for(f.profile, f.routes)
                try:
                    t = build(f.profile, f.routes, chunk, f.dtype, f.nax, f.kv_scale, b.worst_case)
                except OmlxProfilesError:
                    t = False
            if len(memo) >= keep:
                memo.clear()
            memo[chunk] = t
        return t or None

    def _cuda_fit(self, chunk: int):
        """``E(m, 0)`` on CUDA for this chunk size (``CudaEnvelope`` of ``peak.fast_cuda.CudaFit``), or ``None``."""
        return self._table(self._cuda, 64, chunk, _cuda_envelope)

    def _prefix_fit(self, chunk: int):
        """``U_cuda`` after a prefix for this chunk size (``peak.fast_cuda_prefix.prefix_table``: ``CudaPrefix``, or
        a gated-DeltaNet's per-count tables ``CudaCounts``), or ``None``."""
        return self._table(self._cuda_prefix, 16, chunk, _prefix_table)

    def peak(self, new: int, chunk: int, cached: int = 0) -> int:
        key = (new, chunk, cached)
        v = self._memo.get(key)
        if v is not None and _TILED_VERSION[0] == self._gen:
            return v
        if _TILED_VERSION[0] != self._gen:  # a tiled kernel was (un)registered: FastPeak recomputes too
            self._memo.clear()
            self._gen = _TILED_VERSION[0]
        if new <= 0:
            return 0
        f = self.fast
        if chunk > KEYED_AS_GIVEN:  # a chunk past the prompt: the tables of a smaller one, same calls (peak.request)
            chunk = table_chunk(chunk, new + cached, f.routes.executor)
        prefix = f._prefix(cached, chunk) if cached else 0

        def exact(m: int, c: int) -> int:
            return f.peak(m, chunk, c) + (f._prefix(c, chunk) if c else 0)

        v = reported_total(new, chunk, cached, exact, f, lines=self._lines, qlines=self._qlines,
                           cuda_fresh=lambda: self._cuda_fit(chunk),
                           cuda_prefix=lambda: self._prefix_fit(chunk)) - prefix
        if v < 0:
            v = 0
        if len(self._memo) >= 1 << 16:
            self._memo.clear()
        self._memo[key] = v
        return v


def _cuda_envelope(*args) -> CudaEnvelope:
    from .fast_cuda import CudaFit  # imported when a CUDA table is first built

    return CudaEnvelope(CudaFit(*args))


def _prefix_table(*args):
    from .fast_cuda_prefix import prefix_table

    return prefix_table(*args)
