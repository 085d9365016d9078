"""The estimator an engine calls per request: resident cache bytes, the prefill peak, fit, longest prompt.

It reads only a ``Profile`` (plain dataclasses) and the kernel tables (``profiles/kernels``): no mlx
import. ``kv_bytes`` is exact (byte-equal to the live mlx-lm caches); ``prefill_peak`` is the term-by-term
model of ``omlx_profiles.peak`` (checked against measured peaks: ``profiles/calibration``).
"""
from __future__ import annotations

from ..errors import InputError
from ..kv.bytes import KVQuant, KVReport, kv_report
from ..kv.replay import STEP  # mlx-lm KVCache allocation step: max_tokens searches on it first
from ..peak.prefill import Breakdown, Request, Verdict, prefill_peak
from ..peak.kernels import KernelRoutes
from ..registry.profile import Profile
from ..units import format_bytes
from ..validation import check_count
from .budget import resolve_reserve


class Estimator:
    def __init__(self, profile: Profile):
        self.profile = profile

    # -- resident KV (exact) -----------------------------------------------------------------------
    def kv_report(self, tokens: int, *, schedule: str = "generate", chunk: int = 2048,
                  dtype: str | None = None, quant: KVQuant | None = None) -> KVReport:
        """Per-layer resident cache bytes, equal to ``sum(c.nbytes for c in cache)`` of the live model."""
        return kv_report(self.profile, tokens, schedule=schedule, chunk=chunk, dtype=dtype, quant=quant)

    def kv_bytes(self, tokens: int, **kw) -> int:
        return self.kv_report(tokens, **kw).total

    # -- prefill peak ------------------------------------------------------------------------------
    def prefill_peak(self, request: Request, backend: str = "cpu", mlx_version: str | None = None, *,
                     dtype: str | None = None, nax: bool = False) -> Breakdown:
        """Peak bytes over what was held before the prompt (weights excluded), term by term.

        ``backend``: ``metal`` | ``cuda`` | ``cpu``; ``mlx_version``: picks the kernel table (``None``: the
        newest); ``nax``: Metal on M5-generation GPUs (neural accelerators change the D=256 routes)."""
        return prefill_peak(self.profile, request, backend=backend, mlx_version=mlx_version, dtype=dtype, nax=nax)

    def total_bytes(self, request: Request, weights_bytes: int, backend: str = "cpu",
                    mlx_version: str | None = None, *, dtype: str | None = None, nax: bool = False) -> int:
        """Weights + what the prefix held before the prompt + the prompt's prefill peak."""
        check_count("weights_bytes", weights_bytes, minimum=0)
        bd = self.prefill_peak(request, backend, mlx_version, dtype=dtype, nax=nax)
        return weights_bytes + bd.held_before_bytes + bd.peak_bytes

    def fits(self, request: Request, budget: int, *, weights_bytes: int = 0, reserve: int | None = None,
             backend: str = "cpu", mlx_version: str | None = None, dtype: str | None = None,
             nax: bool = False) -> Verdict:
        """Does ``weights + held before + peak`` stay within ``budget - reserve``?

        ``reserve`` ``None``: the default of ``omlx_profiles.estimate.budget`` (512 MiB + 5% of the budget).
        ``weights_bytes`` 0 (the default) checks the prefill alone against the budget."""
        check_count("budget", budget, minimum=0)
        check_count("weights_bytes", weights_bytes, minimum=0)
        res = resolve_reserve(budget, reserve)
        bd = self.prefill_peak(request, backend, mlx_version, dtype=dtype, nax=nax)
        total = weights_bytes + bd.held_before_bytes + bd.peak_bytes
        usable = max(0, budget - res)
        ok = total <= usable
        head = usable - total
        if ok:
            msg = (f"fits: {format_bytes(total)} of {format_bytes(usable)} usable "
                   f"({format_bytes(budget)} budget - {format_bytes(res)} reserve), {format_bytes(head)} to spare")
        else:
            msg = (f"does not fit: needs {format_bytes(total)} (weights {format_bytes(weights_bytes)} + prefill peak "
                   f"{format_bytes(bd.peak_bytes + bd.held_before_bytes)}) but {format_bytes(usable)} is usable "
                   f"({format_bytes(budget)} budget - {format_bytes(res)} reserve); over by {format_bytes(-head)}. "
                   f"Shorten the prompt, use a smaller prefill chunk (now {request.chunk}), or raise the budget")
        return Verdict(ok, total, budget, res, usable, head, weights_bytes, bd, msg)

    def max_tokens(self, budget: int, *, weights_bytes: int = 0, reserve: int | None = None, cached: int = 0,
                   chunk: int = 2048, backend: str = "cpu", mlx_version: str | None = None,
                   schedule: str = "generate", dtype: str | None = None, nax: bool = False,
                   limit: int | None = None) -> int:
        """Largest prompt length N (cached prefix included) whose total stays within ``budget - reserve``.

        0 when not even ``cached + 1`` tokens fit. Monotone search: first over the cache allocation step
        (256 tokens: where KV capacity jumps), then within the last step. ``limit`` (default: the
        profile's max_context, else 2**22) caps the search.
        """
        check_count("budget", budget, minimum=0)
        check_count("weights_bytes", weights_bytes, minimum=0)
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


__all__ = ["Estimator", "Request", "Breakdown", "Verdict", "InputError"]
