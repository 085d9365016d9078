"""Precomputed prefill-peak coefficients: the per-call answer in a few integer operations.

``prefill_peak`` replays every call and slides the executor window over hundreds of items: milliseconds.
An engine that checks every request (oMLX's admission guard) needs microseconds, so for one profile,
backend and chunk size this module precomputes the peak of a *full chunk* as a function of the keys it
attends to, ``kL``: every term is linear in ``kL`` once the sliding windows are full (score matrices,
causal masks, the old KV buffer copied by a growing cache, the cache held before the call), and the
window maximum is the upper envelope of one line per window position. The envelope has a handful of
lines; a call evaluates them.

The fast answer charges the request's last call as a full chunk at the largest ``kL`` (``tokens - 1``),
so it is never below ``prefill_peak`` and exceeds it by at most one chunk's growth; below the point where
the lines hold (short prompts, sliding windows still filling), it calls ``prefill_peak`` (memoized).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..dtypes import DTYPE_BYTES
from ..kv.bytes import kv_report
from ..kv.replay import STEP
from ..registry.profile import Profile
from . import executor
from .ops.recurrent import state_snapshot_bytes
from .prefill import Request, _call_peak, _pinned, prefill_peak
from .replay import EntryState
from .kernels import _TILED_VERSION, KernelRoutes, tiled_state



@dataclass(frozen=True)
class Lines:
    """peak over held-before for a full chunk attending to kL keys = max_i(a_i + b_i * kL), kL >= kl_min."""

    kl_min: int
    lines: tuple[tuple[int, int], ...]  # (a * den, b): value = ceil((a * den + b * kL) / den)
    den: int


class FastPeak:
    """Per-profile, per-backend, per-chunk coefficients (``Lines``) plus a memo for short prompts."""

    def __init__(self, profile: Profile, backend: str, mlx_version: str | None = None, dtype: str | None = None,
                 nax: bool = False):
        self.profile = profile
        self.backend = backend
        self.mlx_version = mlx_version
        self.dtype = dtype or profile.dtype
        self.nax = nax
        self.routes = KernelRoutes.for_backend(backend, mlx_version)
        self._tiled_gen = tiled_state()[0]
        self._lines: dict[int, Lines] = {}
        self._exact = lru_cache(maxsize=4096)(self._exact_uncached)
        self._prefix = lru_cache(maxsize=1024)(self._prefix_uncached)
        from .basis import MEASURED, basis_for

        kind = basis_for(profile, self.routes).kind
        self._worst = None if kind == MEASURED else kind

    # -- public -------------------------------------------------------------------------------------
    def peak(self, new_tokens: int, chunk: int, cached: int = 0) -> int:
        """Prefill peak over what was held before the prompt (bytes), as ``prefill_peak`` but fast."""
        if new_tokens <= 0:
            return 0
        if _TILED_VERSION[0] != self._tiled_gen:  # a tiled kernel was (un)registered: recompute
            self._lines.clear()
            self._exact.cache_clear()
            self._tiled_gen = tiled_state()[0]
        if self.routes.executor.graph_commit is not None or self._worst == "bound":
            # CUDA: the live set follows graph-commit boundaries, which move with kL, so the per-position
            # lines do not hold; nor do they describe a ``bound`` basis's worst-case items (peak/basis.py):
            # answer exactly, memoized per 256 tokens (rounded up: the safe side). A ``derived`` basis on
            # Metal is the op model over a longer window: its positions are lines too (``_sums``).
            up = -(-new_tokens // STEP) * STEP
            return self._exact(up, chunk, cached)
        L = self._lines.get(chunk)
        if L is None:
            L = self._lines[chunk] = self._build(chunk)
        kl = cached + new_tokens - 1
        if new_tokens - 1 < chunk or kl < L.kl_min:
            return self._exact(new_tokens, chunk, cached)
        best = max(a + b * kl for a, b in L.lines)
        return -(-best // L.den) - (self._prefix(cached, chunk) if cached else 0)

    # -- internals ----------------------------------------------------------------------------------
    def _exact_uncached(self, new_tokens: int, chunk: int, cached: int) -> int:
        req = Request(cached + new_tokens, cached=cached, chunk=chunk)
        return prefill_peak(self.profile, req, routes=self.routes, dtype=self.dtype, nax=self.nax).peak_bytes

    def _prefix_uncached(self, cached: int, chunk: int) -> int:
        return kv_report(self.profile, cached, chunk=chunk, dtype=self.dtype).total if cached else 0

    def _build(self, chunk: int) -> Lines:
        p = self.profile
        S = -(-chunk // STEP) * STEP if chunk % STEP else chunk
        wins = [e.window for lt in p.layer_types.values() for e in lt.entries if e.kind == "sliding"]
        chunks = [e.chunk for lt in p.layer_types.values() for e in lt.entries if e.kind == "chunked"]
        sat = max(wins + chunks + [0]) + 2 * S + 2 * STEP
        k1 = -(-max(sat, 4 * S) // STEP) * STEP
        k2 = k1 + 16 * STEP
        den = k2 - k1
        lines = []
        # one set of window positions per window the call slid (the op model's; with a derived basis also
        # the whole run-ahead window's, whose larger value is the answer)
        for s1, s2 in zip(self._sums(chunk, k1), self._sums(chunk, k2)):
            for pos in s1:
                v1, v2 = s1[pos], s2.get(pos, s1[pos])
                b = v2 - v1  # per (k2 - k1) keys
                a = v1 - b * k1 / den
                lines.append((a, b))
        # exact integers, rounded up so the lines never fall below the sampled points
        ilines = {(int(-(-a // 1)) + 1, int(-(-b // 1))) for a, b in lines}
        env = _envelope(sorted(ilines), k1, den)
        return Lines(k1, tuple((a * den, b) for a, b in env), den)

    def _sums(self, chunk: int, kl: int) -> list[dict[float, int]]:
        """Every window position's total (held + growth + pinned + window) for a full chunk ending at kl, per
        window slid (one; two with a ``derived`` basis)."""
        p = self.profile
        act = DTYPE_BYTES[self.dtype]
        S = chunk
        off = kl - S
        # replay a generate-style history up to ``off`` so held/old rows are exact for this offset
        states = {name: [EntryState(e) for e in lt.entries] for name, lt in p.layer_types.items()}
        counts: dict[str, int] = {}
        for n in p.layer_names:
            counts[n] = counts.get(n, 0) + 1
        done = 0
        while done < off:
            s = min(S, off - done)
            for sts in states.values():
                for st in sts:
                    st.step(s)
            done += s
        held = 0
        for name, sts in states.items():
            for st in sts:
                e = st.e
                if e.kind == "state":
                    held += counts[name] * e.state_bytes(act)
                    held += counts[name] * state_snapshot_bytes(p, p.layer_types[name], e, S, act)
                elif e.kind != "none":
                    held += counts[name] * st.rows() * e.row_elements * act
        steps = {name: tuple(st.step(S) for st in sts) for name, sts in states.items()}
        growth = 0
        for name, sts in states.items():
            for st, stp in zip(sts, steps[name]):
                if st.e.kind not in ("state", "none"):
                    growth += counts[name] * max(0, stp.new_rows - stp.old_rows) * st.e.row_elements * act
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
        return [{pos: int(-(-v // 1)) + base for pos, v in sums.items()} for sums in all_sums]


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
