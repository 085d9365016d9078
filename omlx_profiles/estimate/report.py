"""The estimate a user or an engine sees, as one JSON-able dict with stable keys.

Stable keys (documented in the README): ``model``, ``variant``, ``family``, ``tokens``, ``schedule``,
``chunk``, ``dtype``, ``kv_bits``, ``kv_group_size``, ``kv_bytes``, ``layers`` (one entry per layer:
``index``, ``kind``, ``bytes``, ``caches`` [{``kind``, ``rows``, ``bytes``, ``quantized``}]),
``resolution``.

The prefill-peak keys (issue 5): ``cached``, ``backend``, ``mlx_version``, ``peak_bytes`` (peak over what
was held before the prompt, weights excluded), ``held_before_bytes`` (the cached prefix's KV),
``weights_bytes`` (or null when unknown), ``total_bytes`` (weights + held before + peak, or null),
``breakdown`` (``Breakdown.as_dict()``: ``terms`` adding up to ``peak_bytes``, the peak call, the SDPA
routes, an explanation), ``budget_bytes``, ``reserve_bytes``, ``usable_bytes``, ``fits`` (bool, or null
without a budget or without weights), ``headroom_bytes``. When the peak cannot be modelled for this
profile, ``peak_bytes`` is null and ``peak_unknown`` says why (the KV keys stay exact).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedError
from ..kv.bytes import KVQuant, KVReport, kv_report
from ..registry.index import Resolution
from ..registry.profile import past_context  # noqa: F401  (one rule for every verdict; re-exported)

DEFAULT_BACKEND = "metal"  # what oMLX and mlx-lm servers run on; --backend changes it, the output names it


@dataclass(frozen=True)
class EstimateOptions:
    tokens: int
    schedule: str = "generate"
    chunk: int = 2048
    dtype: str | None = None
    quant: KVQuant | None = None
    cached: int = 0
    backend: str | None = None
    mlx_version: str | None = None
    budget: int | None = None
    reserve: int | None = None
    weights_bits: int | None = None
    weights: Any = None  # a weights.WeightsInfo already resolved by the caller
    nax: bool = False
    #: an ``Estimator`` of ``res.profile`` to ask (fit's, after its search): its per-profile tables (CUDA's graph
    #: bounds and envelope: seconds to build at long prompts) are reused instead of rebuilt for the breakdown
    estimator: Any = None


def kv_section(rep: KVReport) -> dict:
    return {
        "kv_bytes": rep.total,
        "layers": [
            {
                "index": l.index,
                "kind": l.kind,
                "bytes": l.nbytes,
                "caches": [{"kind": e.kind, "rows": e.rows, "bytes": e.nbytes, "quantized": e.quantized}
                           for e in l.entries],
            }
            for l in rep.layers
        ],
    }


def build_estimate(res: Resolution, opts: EstimateOptions) -> dict:
    p = res.profile
    rep = kv_report(p, opts.tokens, schedule=opts.schedule, chunk=opts.chunk, dtype=opts.dtype, quant=opts.quant)
    out = {
        "model": res.query,
        "variant": p.name,
        "family": p.family,
        "tokens": opts.tokens,
        "schedule": opts.schedule,
        "chunk": opts.chunk,
        "dtype": rep.dtype,
        "kv_bits": opts.quant.bits if opts.quant else None,
        "kv_group_size": opts.quant.group_size if opts.quant else None,
    }
    out.update(kv_section(rep))
    out.update(peak_section(res, opts))
    out["resolution"] = res.as_dict()
    return out


def peak_section(res: Resolution, opts: EstimateOptions) -> dict:
    """The prefill-peak keys: peak, weights, total, breakdown, and the verdict against a budget."""
    from .estimator import Estimator
    from ..peak.prefill import Request

    backend = opts.backend or DEFAULT_BACKEND
    out: dict[str, Any] = {"cached": opts.cached, "backend": backend, "mlx_version": opts.mlx_version}
    peak = held = None
    if opts.quant is not None:
        out["peak_unknown"] = "the prefill peak with kv_bits (quantized SDPA) is not modelled"
        out["breakdown"] = None
    else:
        try:
            est = opts.estimator if opts.estimator is not None else Estimator(res.profile)
            req = Request(opts.tokens, cached=opts.cached, chunk=opts.chunk, schedule=opts.schedule)
            if opts.estimator is not None:  # fit's: the search may have replayed this very request (memoized)
                bd = est._breakdown((req, backend, opts.mlx_version, opts.dtype, opts.nax))
            else:
                bd = est.prefill_peak(req, backend=backend, mlx_version=opts.mlx_version, dtype=opts.dtype,
                                      nax=opts.nax)
        except UnsupportedError as e:
            out["peak_unknown"] = str(e)
            out["breakdown"] = None
        else:
            peak, held = bd.peak_bytes, bd.held_before_bytes
            out["peak_basis"] = bd.peak_basis
            out["breakdown"] = bd.as_dict()
            out["mlx_version"] = opts.mlx_version or bd.mlx_version
    out["peak_bytes"] = peak
    out["held_before_bytes"] = held
    weights = _weights(res, opts)
    out["weights_bytes"] = weights
    total = None if (peak is None or weights is None) else weights + (held or 0) + peak
    out["total_bytes"] = total
    out["budget_bytes"] = opts.budget
    past = past_context(res.profile, opts.tokens)
    out["past_context"] = past
    if opts.budget is not None:
        from .budget import resolve_reserve

        reserve = resolve_reserve(opts.budget, opts.reserve)
        usable = max(0, opts.budget - reserve)
        out["reserve_bytes"] = reserve
        out["usable_bytes"] = usable
        out["fits"] = None if total is None else total <= usable
        out["headroom_bytes"] = None if total is None else usable - total
        if past:
            out["fits"] = False  # memory is not the only limit: mlx-lm would run it past what the model knows
    else:
        out["reserve_bytes"] = opts.reserve
        out["usable_bytes"] = None
        out["fits"] = None
        out["headroom_bytes"] = None
    return out


def _weights(res: Resolution, opts: EstimateOptions) -> int | None:
    """Weights bytes from the caller's ``WeightsInfo``, else ``omlx_profiles.estimate.weights``."""
    w = opts.weights
    if w is None:
        from .weights import estimate_weights

        try:
            w = estimate_weights(res, bits=opts.weights_bits)
        except Exception:  # weights are an optional term: an unreadable checkpoint leaves it unknown
            return None
    b = getattr(w, "bytes", None)
    return b if isinstance(b, int) and not isinstance(b, bool) else None
