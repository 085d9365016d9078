"""Precomputed prefill-peak coefficients: the per-call answer in a few integer operations.

``prefill_peak`` replays every call and slides the executor window over hundreds of items: milliseconds.
An engine that checks every request (oMLX's admission guard) needs microseconds, so for one profile,
backend and chunk size this module precomputes the peak of a *full chunk* as a function of the keys it
attends to, ``kL``: every term is linear in ``kL`` once the sliding windows are full (score matrices,
causal masks, the old KV buffer copied by a growing cache, the cache held before the call), and the
window maximum is the upper envelope of one line per window position. The envelope has a handful of
lines; a call evaluates them.

The fast answer charges the request's last call as a full chunk at the largest ``kL`` (``tokens - 1``),
so it is never below ``prefill_peak`` and exceeds it by at most one chunk's growth plus one 256-row step of
the growing caches; below the point where the lines hold (short prompts, sliding windows still filling), it
calls ``prefill_peak`` (memoized).

Why the lines are sampled where they are: a ``KVCache`` grows in 256-row steps, so what a call holds and
copies depends on where the history left the capacity (``cap - offset``: 0 .. 255 rows), not on ``kL``
alone. A line through two points of one history can pass *below* another history's call: a chunk smaller
than 256 that does not grow the cache at the sampled points but does at the request's, by the old buffer
the growth copies (the whole cache) -- the fast answer minus the prefix then went negative (issue 14). So
every unbounded cache is sampled in its worst phase: the call grows, from a capacity as far past the
offset as a growing call allows (``min(chunk, 256) - 1`` rows), at an offset where no trim happens; what
that still leaves out (the last, shorter call's and the final one-token call's step rounding) is one
256-row step of those caches, added to every line. Chunked-attention caches (Llama 4) hold rows that
cycle with ``kL``; no line bounds them, so those profiles answer exactly (memoized).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..dtypes import DTYPE_BYTES
from ..errors import UnsupportedError
from ..kv.bytes import kv_report
from ..kv.replay import STEP
from ..registry.profile import Profile
from . import executor
from .kernels import _TILED_VERSION, KernelRoutes, tiled_state
from .ops.recurrent import state_snapshot_bytes
from .prefill import Request, _call_peak, _pinned, prefill_peak
from .replay import KV_SCALED_KINDS, EntryState, scale_up

_GROWING = ("full", "latent", "indexer")  # KVCache: capacity in 256-row steps
_EXACT = object()  # marks a chunk size answered by the exact path (CUDA, chunked attention)


@dataclass(frozen=True)
class Lines:
    """peak over held-before for a full chunk attending to kL keys = max_i(a_i + b_i * kL), kL >= kl_min."""

    kl_min: int
    lines: tuple[tuple[int, int], ...]  # (a * den, b): value = ceil((a * den + b * kL) / den)
    den: int
    beyond: tuple[tuple[int, int], ...] = ()  # the same call over what it held before (no request margin)


class FastPeak:
    """Per-profile, per-backend, per-chunk coefficients (``Lines``) plus a memo for short prompts.

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
        self._lines: dict[int, Lines | object] = {}
        self._exact = lru_cache(maxsize=4096)(self._exact_uncached)
        self._prefix = lru_cache(maxsize=1024)(self._prefix_uncached)
        from .basis import MEASURED, basis_for

        kind = basis_for(profile, self.routes).kind
        self._worst = None if kind == MEASURED else kind
        # a peak the estimator reports as unknown here (prefill_peak raises for every request): so does this
        from .basis import no_bound_reason
        from .ops.recurrent import unverified_peak

        self._unknown = unverified_peak(profile, self.routes) or (no_bound_reason(profile, self.routes)
                                                                  if self._worst else None)
        # no line holds for: CUDA (graph-commit boundaries move with kL), chunked attention (rows cycle with
        # kL), a ``bound`` basis's worst-case items (peak/basis.py). A ``derived`` basis on Metal is the op
        # model over a longer window: its positions are lines too (``_sums``).
        self._always_exact = (self.routes.executor.graph_commit is not None or self._worst == "bound" or any(
            e.kind == "chunked" for lt in profile.layer_types.values() for e in lt.entries))

    # -- public -------------------------------------------------------------------------------------
    def peak(self, new_tokens: int, chunk: int, cached: int = 0) -> int:
        """Prefill peak over what was held before the prompt (bytes): never below ``prefill_peak`` of the
        same request, never negative. The hot path (oMLX's admission guard calls it per request): a dict
        look-up and a few integer operations once the chunk size's lines exist; everything else goes
        through ``_peak``. Arguments are counts (``new_tokens >= 0``, ``chunk >= 1``, ``cached >= 0``);
        callers validate them."""
        L = self._lines.get(chunk)
        if L is None or L is _EXACT or new_tokens <= chunk or _TILED_VERSION[0] != self._tiled_gen:
            return self._peak(new_tokens, chunk, cached)
        kl = cached + new_tokens - 1
        if kl < L.kl_min:
            return self._peak(new_tokens, chunk, cached)
        lines = L.lines
        best = lines[0][0] + lines[0][1] * kl
        for a, b in lines[1:]:
            v = a + b * kl
            if v > best:
                best = v
        return -(-best // L.den) - self._prefix(cached, chunk) if cached else -(-best // L.den)

    def _peak(self, new_tokens: int, chunk: int, cached: int) -> int:
        if new_tokens <= 0:
            return 0
        if self._unknown:
            raise UnsupportedError(self._unknown)
        if _TILED_VERSION[0] != self._tiled_gen:  # a tiled kernel was (un)registered: recompute
            self._lines.clear()
            self._exact.cache_clear()
            self._tiled_gen = tiled_state()[0]
        L = self._lines.get(chunk)
        if L is None:
            L = self._lines[chunk] = _EXACT if self._always_exact else self._build(chunk)
        if L is _EXACT:
            # CUDA: the live set follows graph-commit boundaries, which move with kL; chunked attention:
            # rows cycle with kL. No line holds: answer exactly (memoized). Not rounded to a coarser
            # prompt length: the exact CUDA peak is not monotone in it (a shorter prompt's last calls can
            # peak higher: the first block a one-token call allocates, the graph-commit alignment)
            return self._exact(new_tokens, chunk, cached)
        if new_tokens <= chunk:  # one call (and the last token): exact, memoized
            return self._exact(new_tokens, chunk, cached)
        kl = cached + new_tokens - 1
        lines = L.lines
        best = max(a + b * kl for a, b in lines)
        v = -(-best // L.den) - self._prefix(cached, chunk) if cached else -(-best // L.den)
        if kl < L.kl_min:
            # below the sampled range (sliding windows still filling): the lines still bound the call from
            # above (every term they extrapolate only grows with kL), and the exact model of this very
            # request is taken too, so the answer is never below it; taking the lines keeps it monotone
            e = self._exact(new_tokens, chunk, cached)
            return e if e > v else v
        return v

    def chunk_transient(self, n: int, kv_len: int) -> int:
        """What ONE call of ``n`` queries over ``kv_len`` keys allocates beyond the caches it held before
        (bytes; never negative, never below the exact model of that call after a prefix fed in chunks of
        ``n``): the rows it adds, the old buffers a growing cache copies, the activations in flight. The
        caches' history is unknown to the caller (oMLX's throttle picks chunk sizes as it goes), so the
        call is taken in the worst capacity phase -- it grows the cache -- and never below a fresh
        cache's first call, which also makes the answer grow with ``kv_len`` (CPU / Metal; CUDA answers
        the exact model of that history, which does not always grow with ``kv_len``)."""
        if n <= 0:
            return 0
        if self._unknown:
            raise UnsupportedError(self._unknown)
        kv = kv_len if kv_len > n else n
        cached = kv - n
        if _TILED_VERSION[0] != self._tiled_gen:
            self._lines.clear()
            self._exact.cache_clear()
            self._tiled_gen = tiled_state()[0]
        L = self._lines.get(n)
        if L is None:
            L = self._lines[n] = _EXACT if self._always_exact else self._build(n)
        first = self._exact(n + 1, n, 0)  # a fresh cache's first call: its first blocks (every cache kind)
        if L is _EXACT:
            e = self._exact(n + 1, n, cached)
            return e if e > first else first
        lines = L.beyond
        best = lines[0][0] + lines[0][1] * kv
        for a, b in lines[1:]:
            v = a + b * kv
            if v > best:
                best = v
        v = -(-best // L.den)
        if kv < L.kl_min:
            # below the sampled range the lines are extrapolated: also take the exact model of this call,
            # so the answer is never below it
            e = self._exact(n + 1, n, cached)
            if e > v:
                v = e
        # never below a fresh cache's first call either (it allocates the first block of every cache,
        # sliding ones too, which a later call in the worst phase may not): the answer grows with kv_len
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
        return _scaled_total(self.profile, rep, self.kv_scale)

    def _step_row_bytes(self) -> int:
        """Bytes of one row of every growing cache (all layers): what one 256-row step is made of."""
        p = self.profile
        act = DTYPE_BYTES[self.dtype]
        per = sum(e.row_elements for n in p.layer_names for e in p.layer_types[n].entries if e.kind in _GROWING)
        return scale_up(per * act, self.kv_scale)

    def _build(self, chunk: int) -> Lines:
        p = self.profile
        S = -(-chunk // STEP) * STEP if chunk % STEP else chunk
        wins = [e.window for lt in p.layer_types.values() for e in lt.entries if e.kind == "sliding"]
        chunks = [e.chunk for lt in p.layer_types.values() for e in lt.entries if e.kind == "chunked"]
        sat = max(wins + chunks + [0]) + 2 * S + 2 * STEP
        # sample where the call's offset (kL - chunk) is a multiple of 256: a growing call there does not
        # trim, so the capacity it starts from can sit the furthest past the offset (the worst phase)
        k1 = -(-max(sat, 4 * S) // STEP) * STEP + chunk
        k2 = k1 + 16 * STEP
        w1, h1 = self._sums(chunk, k1)
        w2, h2 = self._sums(chunk, k2)
        den = k2 - k1
        margin = STEP * self._step_row_bytes()  # the shorter last call's / final token's step rounding

        def fit(shift1: int, shift2: int) -> tuple[tuple[int, int], ...]:
            lines = []
            # one set of window positions per window the call slid (the op model's; with a derived basis
            # also the whole run-ahead window's, whose larger value is the answer)
            for s1, s2 in zip(w1, w2):
                for pos in s1:
                    v1, v2 = s1[pos] + shift1, s2.get(pos, s1[pos]) + shift2
                    b = v2 - v1  # per (k2 - k1) keys
                    a = v1 - b * k1 / den
                    lines.append((a, b))
            # exact integers, rounded up so the lines never fall below the sampled points
            ilines = {(int(-(-a // 1)) + 1, int(-(-b // 1))) for a, b in lines}
            return tuple((a * den, b) for a, b in _envelope(sorted(ilines), k1, den))

        return Lines(k1, fit(margin, margin), den, beyond=fit(-h1, -h2))

    def _sums(self, chunk: int, kl: int) -> tuple[list[dict[float, int]], int]:
        """Every window position's total (held + growth + pinned + window) for a full chunk ending at kl, per
        window slid (one; two with a ``derived`` basis), and the held part of it (what the caches held
        before the call, in the worst phase)."""
        p = self.profile
        act = DTYPE_BYTES[self.dtype]
        S = chunk
        off = kl - S
        # replay a generate-style history up to ``off`` so held/old rows are exact for this offset
        states = {name: [EntryState(e) for e in lt.entries] for name, lt in p.layer_types.items()}
        counts: dict[str, int] = {}
        for n in p.layer_names:
            counts[n] = counts.get(n, 0) + 1
        # the shorter call first, then whole chunks: the call sampled follows a full chunk, as every full
        # chunk of a request after its first does. A sliding cache holds ``window - 1`` rows plus the
        # PREVIOUS call's rows, so a history that ended on the shorter call sampled fewer sliding rows than a
        # request holds and the line passed below it (gemma-3-4b, metal, chunk 265 after 4,975 cached: 255 B
        # under at 531 new tokens, 645 KB under at 5,295 cached)
        calls = ([off % S] if off % S else []) + [S] * (off // S)
        for s in calls:
            for sts in states.values():
                for st in sts:
                    st.step(s)
        # the worst phase of every growing cache: the call grows (offset + S > capacity) from a capacity
        # min(S, 256) - 1 rows past the offset (the most a growing call can start from), no trim (the offset
        # is a multiple of 256): it then holds, adds and copies the most it can at this kL
        # (a chunk that is a multiple of 256 leaves no such phase once the prompt's first call has run: every
        # later call starts from capacity == offset, which the replay above already reproduces)
        if S % STEP:
            for sts in states.values():
                for st in sts:
                    if st.e.kind in _GROWING and st.cap:
                        st.cap = st.off + min(S, STEP) - 1
        held = 0
        held_kv = 0
        for name, sts in states.items():
            for st in sts:
                e = st.e
                if e.kind == "state":
                    held += counts[name] * e.state_bytes(act)
                    held += counts[name] * state_snapshot_bytes(p, p.layer_types[name], e, S, act)
                elif e.kind in KV_SCALED_KINDS:
                    held_kv += counts[name] * st.rows() * e.row_elements * act
                elif e.kind != "none":
                    held += counts[name] * st.rows() * e.row_elements * act
        steps = {name: tuple(st.step(S) for st in sts) for name, sts in states.items()}
        growth = 0
        growth_kv = 0
        for name, sts in states.items():
            for st, stp in zip(sts, steps[name]):
                if st.e.kind not in ("state", "none"):
                    add = counts[name] * max(0, stp.new_rows - stp.old_rows) * st.e.row_elements * act
                    if st.e.kind in KV_SCALED_KINDS:
                        growth_kv += add
                    else:
                        growth += add
        held += scale_up(held_kv, self.kv_scale)
        growth += scale_up(growth_kv, self.kv_scale)
        executor._ALL_SUMS = []
        try:
            _, tiled = tiled_state()
            _call_peak(p, 1, S, off, steps, self.routes, tiled, self.dtype, act, self.nax,
                       self.routes.executor.window_for(S), last=False, kv_before=held, snap_before=0,
                       growth=growth, direct=False, worst=self._worst)
            all_sums = list(executor._ALL_SUMS)
        finally:
            executor._ALL_SUMS = None
        pinned = sum(_pinned(p, steps, S, act).values())
        base = held + growth + pinned
        return [{pos: int(-(-v // 1)) + base for pos, v in sums.items()} for sums in all_sums], held


def _scaled_total(profile: Profile, rep, kv_scale: float) -> int:
    """A ``kv_report`` total with the full-attention caches at ``kv_scale`` of their width (rounded up
    once, as ``prefill_peak`` rounds its held bytes)."""
    other = kv = 0
    for lb in rep.layers:
        for e, x in zip(profile.layer_types[lb.kind].entries, lb.entries):
            if e.kind in KV_SCALED_KINDS:
                kv += x.nbytes
            else:
                other += x.nbytes
    return other + scale_up(kv, kv_scale)


def _envelope(lines: list[tuple[int, int]], x0: int, den: int, x1: int = 1 << 24) -> list[tuple[int, int]]:
    """The lines (a, b) [value a + b*x/den] that are the maximum somewhere on [x0, x1] (upper envelope)."""
    lines = sorted(set(lines), key=lambda ab: (ab[1], ab[0]))
    # one line per slope: the highest
    by_slope: dict[int, int] = {}
    for a, b in lines:
        by_slope[b] = max(a, by_slope.get(b, a))
    cand = sorted((a, b) for b, a in by_slope.items())
    xs = {x0, x1}
    for i in range(len(cand)):
        for j in range(i + 1, len(cand)):
            (a1, b1), (a2, b2) = cand[i], cand[j]
            if b1 != b2:
                x = (a2 - a1) * den / (b1 - b2)
                if x0 < x < x1:
                    xs.add(int(x))
                    xs.add(int(x) + 1)
    keep = set()
    for x in xs:
        keep.add(max(cand, key=lambda ab: ab[0] * den + ab[1] * x))
    return sorted(keep, key=lambda ab: -(ab[0] * den + ab[1] * x0))
