"""The estimator an engine calls per request: resident cache bytes, the prefill peak, fit, longest prompt.

It reads only a ``Profile`` (plain dataclasses) and the kernel tables (``profiles/kernels``): no mlx
import. ``kv_bytes`` is exact (byte-equal to the live mlx-lm caches); ``prefill_peak`` is the term-by-term
model of ``omlx_profiles.peak`` (checked against measured peaks: ``profiles/calibration``).
"""
from __future__ import annotations

from ..errors import InputError, OmlxProfilesError
from ..kv.bytes import KVQuant, KVReport, kv_report
from ..kv.replay import STEP  # mlx-lm KVCache allocation step: max_tokens searches on it first
from ..peak.prefill import Breakdown, Request, Verdict, prefill_peak
from ..peak.kernels import KernelRoutes
from ..registry.profile import Profile
from ..units import MAX_BYTES, format_bytes
from ..validation import check_count
from .budget import resolve_reserve


#: The CLI's backend too (``report.DEFAULT_BACKEND``): what oMLX and mlx-lm servers run on.
DEFAULT_BACKEND = "metal"
#: ``fits`` may decide from ``peak.fast.FastPeak``'s bound only while that bound is never below the exact
#: peak. It is not, on main as of this commit: devstral-small-2-24b at 9,999 tokens on metal (14.99 GB
#: against 15.29 GB exact), gemma-2-9b on CUDA; so the bound is off and ``fits`` answers from the exact
#: replay, memoized per request (microseconds for a length seen before). tests/test_fits_fast.py checks
#: the bound for every family and backend: turn this on when it passes with the flag on.
USE_FAST_BOUND = False
_MEMO = 4096  # exact breakdowns kept per Estimator (an engine's distinct prompt lengths)


class Estimator:
    def __init__(self, profile: Profile):
        self.profile = profile
        self._memo: dict = {}
        self._fast: dict = {}
        self._held_memo: dict = {}

    # -- resident KV (exact) -----------------------------------------------------------------------
    def kv_report(self, tokens: int, *, schedule: str = "generate", chunk: int = 2048,
                  dtype: str | None = None, quant: KVQuant | None = None) -> KVReport:
        """Per-layer resident cache bytes, equal to ``sum(c.nbytes for c in cache)`` of the live model."""
        return kv_report(self.profile, tokens, schedule=schedule, chunk=chunk, dtype=dtype, quant=quant)

    def kv_bytes(self, tokens: int, **kw) -> int:
        return self.kv_report(tokens, **kw).total

    # -- prefill peak ------------------------------------------------------------------------------
    def prefill_peak(self, request: Request, backend: str = DEFAULT_BACKEND, mlx_version: str | None = None, *,
                     dtype: str | None = None, nax: bool = False) -> Breakdown:
        """Peak bytes over what was held before the prompt (weights excluded), term by term.

        ``backend``: ``metal`` | ``cuda`` | ``cpu``; ``mlx_version``: picks the kernel table (``None``: the
        newest); ``nax``: Metal on M5-generation GPUs (neural accelerators change the D=256 routes)."""
        return prefill_peak(self.profile, request, backend=backend, mlx_version=mlx_version, dtype=dtype, nax=nax)

    def total_bytes(self, request: Request, weights_bytes: int, backend: str = DEFAULT_BACKEND,
                    mlx_version: str | None = None, *, dtype: str | None = None, nax: bool = False) -> int:
        """Weights + what the prefix held before the prompt + the prompt's prefill peak."""
        check_count("weights_bytes", weights_bytes, minimum=0, maximum=MAX_BYTES)
        bd = self.prefill_peak(request, backend, mlx_version, dtype=dtype, nax=nax)
        return weights_bytes + bd.held_before_bytes + bd.peak_bytes

    def fits(self, request: Request, budget: int, *, weights_bytes: int | None = None, reserve: int | None = None,
             backend: str = DEFAULT_BACKEND, mlx_version: str | None = None, dtype: str | None = None,
             nax: bool = False) -> Verdict:
        """Does ``weights + held before + peak`` stay within ``budget - reserve``?

        ``reserve`` ``None``: the default of ``omlx_profiles.estimate.budget`` (512 MiB + 5% of the budget).
        ``weights_bytes`` ``None`` (the default) checks the prefill alone, and the verdict's message says
        the weights were not counted; ``backend`` defaults to ``metal``, as the CLI (``Breakdown.backend``
        names it).

        An engine calls this per request, so the common case costs microseconds: a per-profile bound
        (``peak.fast.FastPeak``: a few lines per chunk size, never below the exact peak) decides every
        request that fits with room to spare; only a request near or over the limit replays the prompt
        (milliseconds, memoized per request). The verdict is always the exact one: its totals and
        breakdown are computed when first read."""
        check_count("budget", budget, minimum=0, maximum=MAX_BYTES)
        given = weights_bytes is not None
        w = check_count("weights_bytes", weights_bytes, minimum=0, maximum=MAX_BYTES) if given else 0
        res = resolve_reserve(budget, reserve)
        usable = max(0, budget - res)
        key = (request, backend, mlx_version, dtype, nax)
        bound = self._bound(request, backend, mlx_version, dtype, nax)
        if bound is not None and w + bound <= usable:
            return _LazyVerdict(self, key, budget, res, usable, w, given)
        bd = self._breakdown(key)
        return _LazyVerdict(self, key, budget, res, usable, w, given,
                            fits=w + bd.held_before_bytes + bd.peak_bytes <= usable)

    # -- the per-request fast path -----------------------------------------------------------------
    def _breakdown(self, key) -> Breakdown:
        """The exact ``prefill_peak`` of a request, memoized (an engine sees the same lengths again)."""
        bd = self._memo.get(key)
        if bd is None:
            request, backend, mlx_version, dtype, nax = key
            bd = self.prefill_peak(request, backend, mlx_version, dtype=dtype, nax=nax)
            if len(self._memo) >= _MEMO:
                self._memo.clear()
            self._memo[key] = bd
        return bd

    def _bound(self, request: Request, backend: str, mlx_version, dtype, nax) -> int | None:
        """An upper bound of ``held before + peak`` from the per-profile lines, or ``None`` (no bound for
        this request: another schedule, or a profile the fast model does not cover)."""
        if not USE_FAST_BOUND or request.schedule != "generate":
            return None
        fkey = (backend, mlx_version, dtype, nax)
        fp = self._fast.get(fkey)
        if fp is None:
            try:
                from ..peak.fast import FastPeak

                fp = FastPeak(self.profile, backend, mlx_version, dtype, nax)
                # CUDA's live set follows graph-commit boundaries that move with the length: the peak
                # is not monotone there (gemma-2-9b: 20,000 tokens above 20,224), so no shared bound
                if fp.routes.executor.graph_commit is not None:
                    fp = False
            except OmlxProfilesError:
                fp = False
            self._fast[fkey] = fp
        if fp is False:
            return None
        chunk, cached = request.chunk, request.cached
        try:
            # FastPeak's own answer (never below the exact peak): its lines for long prompts, its memoized
            # exact replay for short ones. A shared bound for all short prompts (charging them as one longer
            # prompt) was tried and is unsound: gpt-oss-20b at 2,049 tokens peaks above 13,440 (sinks)
            peak = fp.peak(request.new_tokens, chunk, cached)
            held = self._held(cached, chunk, dtype) if cached else 0
        except (OmlxProfilesError, ArithmeticError):
            return None
        return held + peak

    def _held(self, cached: int, chunk: int, dtype: str | None) -> int:
        """The prefix's cache, as ``FastPeak`` subtracts it (so held + fast peak is the absolute bound)."""
        v = self._held_memo.get((cached, chunk, dtype))
        if v is None:
            if len(self._held_memo) >= _MEMO:
                self._held_memo.clear()
            v = self._held_memo[(cached, chunk, dtype)] = kv_report(
                self.profile, cached, chunk=chunk, dtype=dtype or self.profile.dtype).total
        return v

    def max_tokens(self, budget: int, *, weights_bytes: int = 0, reserve: int | None = None, cached: int = 0,
                   chunk: int = 2048, backend: str = DEFAULT_BACKEND, mlx_version: str | None = None,
                   schedule: str = "generate", dtype: str | None = None, nax: bool = False,
                   limit: int | None = None) -> int:
        """Largest prompt length N (cached prefix included) whose total stays within ``budget - reserve``.

        0 when not even ``cached + 1`` tokens fit. Monotone search: first over the cache allocation step
        (256 tokens: where KV capacity jumps), then within the last step. ``limit`` (default: the
        profile's max_context, else 2**22) caps the search.
        """
        check_count("budget", budget, minimum=0, maximum=MAX_BYTES)
        check_count("weights_bytes", weights_bytes, minimum=0, maximum=MAX_BYTES)
        check_count("cached", cached, minimum=0)
        check_count("chunk", chunk, minimum=1)
        usable = max(0, budget - resolve_reserve(budget, reserve))
        kr = KernelRoutes.for_backend(backend, mlx_version)
        hi_cap = limit or self.profile.max_context or 2**22

        def ok(n: int) -> bool:
            req = Request(n, cached=cached, chunk=chunk, schedule=schedule)
            bd = prefill_peak(self.profile, req, backend=backend, routes=kr, dtype=dtype, nax=nax)
            return weights_bytes + bd.held_before_bytes + bd.peak_bytes <= usable

        lo = cached + 1
        if lo > hi_cap or not ok(lo):
            return 0
        # largest multiple of STEP (plus one: generate_step's last token) that fits
        lo_k, hi_k = 0, hi_cap // STEP
        if ok(hi_cap):
            return hi_cap
        while lo_k < hi_k:
            mid = (lo_k + hi_k + 1) // 2
            if mid * STEP < lo or ok(mid * STEP):
                lo_k = mid
            else:
                hi_k = mid - 1
        a = max(lo, lo_k * STEP)
        b = min(hi_cap, (lo_k + 1) * STEP)
        while a < b:  # within the step
            mid = (a + b + 1) // 2
            if ok(mid):
                a = mid
            else:
                b = mid - 1
        return a


class _LazyVerdict(Verdict):
    """A ``Verdict`` whose ``fits`` is known at once and whose totals, breakdown and message are the exact
    ``prefill_peak`` numbers, computed (and memoized) when first read: the fast path answers the question
    an engine asks per request without replaying the prompt."""

    def __init__(self, est: "Estimator", key, budget: int, reserve: int, usable: int, weights: int, given: bool,
                 fits: bool = True):
        self.__dict__.update(fits=fits, budget_bytes=budget, reserve_bytes=reserve, usable_bytes=usable,
                             weights_bytes=weights, _est=est, _key=key, _given=given)

    @property
    def breakdown(self) -> Breakdown:  # type: ignore[override]
        return self._est._breakdown(self._key)

    @property
    def total_bytes(self) -> int:  # type: ignore[override]
        bd = self.breakdown
        return self.weights_bytes + bd.held_before_bytes + bd.peak_bytes

    @property
    def headroom_bytes(self) -> int:  # type: ignore[override]
        return self.usable_bytes - self.total_bytes

    @property
    def message(self) -> str:  # type: ignore[override]
        total, usable, budget, res = self.total_bytes, self.usable_bytes, self.budget_bytes, self.reserve_bytes
        request = self._key[0]
        wnote = "" if self._given else " (prefill only: weights_bytes not given, the weights are not counted)"
        if self.fits:
            return (f"fits: {format_bytes(total)} of {format_bytes(usable)} usable ({format_bytes(budget)} budget - "
                    f"{format_bytes(res)} reserve), {format_bytes(usable - total)} to spare{wnote}")
        bd = self.breakdown
        return (f"does not fit: needs {format_bytes(total)} (weights {format_bytes(self.weights_bytes)} + prefill peak "
                f"{format_bytes(bd.peak_bytes + bd.held_before_bytes)}) but {format_bytes(usable)} is usable "
                f"({format_bytes(budget)} budget - {format_bytes(res)} reserve); over by {format_bytes(total - usable)}. "
                f"Shorten the prompt, use a smaller prefill chunk (now {request.chunk}), or raise the budget{wnote}")


__all__ = ["Estimator", "Request", "Breakdown", "Verdict", "InputError"]
