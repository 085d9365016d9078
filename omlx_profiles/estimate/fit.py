"""The longest prompt that fits a budget (``fit``) and memory against context length (``chart``).

Why here and not in the CLI: both are arithmetic over the estimator, and an engine or a notebook asks
the same questions. Everything below takes plain values (``FitRequest``, bytes, a resolved
``WeightsInfo``), never an ``argparse.Namespace``; the commands turn their flags into these values first.

``fit``'s answer is ``Estimator.max_tokens`` (the inverse of the total ``estimate`` prints), rounded down
to the KV cache's 256-token allocation step and checked both ways: the total at ``max_tokens`` is within
the usable memory and the total one step further is not. Its breakdown is the same ``build_estimate``
that ``estimate --tokens max_tokens`` prints, so the two commands cannot disagree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..kv.replay import STEP
from ..units import format_bytes
from .estimator import Estimator
from .report import DEFAULT_BACKEND, EstimateOptions, build_estimate


@dataclass(frozen=True)
class FitRequest:
    """The request shape ``fit`` and ``chart`` share (``estimate`` has the same flags)."""

    chunk: int = 2048
    cached: int = 0
    backend: str | None = None  # None: DEFAULT_BACKEND (metal), and the output says which
    mlx_version: str | None = None
    weights_bits: int | None = None

    @property
    def backend_name(self) -> str:
        return self.backend or DEFAULT_BACKEND


@dataclass
class Series:
    """One model's curve for the chart: per context length, the three stacked parts (bytes)."""

    label: str
    tokens: list[int]
    weights: list[int]
    kv: list[int]
    transient: list[int]
    weights_label: str = ""
    max_tokens: int | None = None
    max_context: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def totals(self) -> list[int]:
        return [w + k + t for w, k, t in zip(self.weights, self.kv, self.transient)]


def estimate_at(res, tokens: int, req: FitRequest, weights, budget: int | None, reserve: int | None) -> dict:
    """``estimate --tokens N`` for this request, as its JSON dict (the one code path for all commands)."""
    opts = EstimateOptions(tokens=tokens, chunk=req.chunk, cached=req.cached, backend=req.backend_name,
                           mlx_version=req.mlx_version, budget=budget, reserve=reserve,
                           weights_bits=req.weights_bits, weights=weights)
    out = build_estimate(res, opts)
    out["weights"] = weights.as_dict()
    return out


def search_limit(max_context: int | None, chunk: int) -> int:
    """How far ``fit`` searches (fit and the sharded fit alike): past the model's context, since memory is
    the question there (``memory_max_tokens``), up to 4 x max_context or 2^22, but never past the token
    limit (``units.MAX_TOKENS``: 4 x a 2^30 context was refused as "unsupported") and, with a small chunk,
    only as far as the command's replay work allows (~32 probes), never below max_context."""
    from ..kv.work import COMMAND_CALLS
    from ..units import MAX_TOKENS

    ctx = max_context or 0
    return min(MAX_TOKENS, max(ctx, min(max(4 * ctx, 1 << 22), chunk * (COMMAND_CALLS // 32))))


def longest(est: Estimator, budget: int, weights_bytes: int, reserve: int, req: FitRequest,
            limit: int | None = None) -> int:
    """``Estimator.max_tokens`` rounded down to the KV cache's 256-token allocation step (0: nothing fits).

    Rounding down keeps the answer inside the budget (the total only grows with the prompt) and quotes
    it the way contexts are quoted; the step above it does not fit, which ``compute_fit`` checks.
    """
    kw = dict(weights_bytes=weights_bytes, reserve=reserve, cached=req.cached, chunk=req.chunk,
              backend=req.backend_name, mlx_version=req.mlx_version)
    if limit is None:
        limit = est.profile.max_context or 2**22
    mt = est.max_tokens(budget, limit=limit, **kw)
    if mt >= STEP:
        mt = mt // STEP * STEP
    return mt if mt > req.cached else 0


def cached_within_context(res, cached: int) -> None:
    """A fit question whose cached prefix already fills the model's context has no answer: every prompt
    after it is past ``max_context`` (it was answered "does not fit at any context", a memory verdict)."""
    max_ctx = res.profile.max_context
    if max_ctx and cached >= max_ctx:
        raise InputError(f"--cached {cached:,} is at or past the model's context of {max_ctx:,} (max_context): "
                         "no prompt can follow that prefix")


def compute_fit(res, req: FitRequest, budget: int, weights, reserve: int) -> dict:
    """The ``fit --json`` dict: the longest prompt within ``budget - reserve``, the estimate there and the
    total one step further. ``weights``: a resolved ``WeightsInfo`` (its bytes must be known)."""
    max_ctx = res.profile.max_context
    cached_within_context(res, req.cached)
    base = {
        "model": res.query, "variant": res.profile.name, "family": res.profile.family,
        "budget_bytes": budget, "reserve_bytes": reserve, "usable_bytes": budget - reserve,
        "chunk": req.chunk, "cached": req.cached, "backend": req.backend_name, "mlx_version": req.mlx_version,
        "step": STEP, "max_context": max_ctx,
        "weights": weights.as_dict(), "weights_bytes": weights.bytes,
    }
    if weights.bytes is None:
        raise InputError(f"weights of {res.query!r} are unknown ({weights.reason}); fit needs them: "
                         "pass --weights SIZE if you know it")
    est = Estimator(res.profile)
    # search past max_context (memory is the question here), then say which limit binds
    mt = longest(est, budget, weights.bytes, reserve, req, limit=search_limit(max_ctx, req.chunk))
    if not mt:
        at0 = estimate_at(res, req.cached + 1, req, weights, budget, reserve)
        return {**base, "max_tokens": None, "limited_by": "memory", "at_max": at0, "next": None,
                "reason": f"even a {req.cached + 1}-token prompt needs {format_bytes(at0.get('total_bytes'))} "
                          f"(weights {format_bytes(weights.bytes)}) > {format_bytes(budget - reserve)} usable"}
    memory_mt = mt
    if max_ctx and mt > max_ctx:  # the headline never passes the model's context; memory's answer is kept
        mt = max_ctx
    at = estimate_at(res, mt, req, weights, budget, reserve)
    nxt = estimate_at(res, mt + STEP, req, weights, budget, reserve)
    return {**base, "max_tokens": mt, "memory_max_tokens": memory_mt,
            "limited_by": "max_context" if (max_ctx and memory_mt >= max_ctx) else "memory",
            "at_max": at,
            "next": {"tokens": mt + STEP, "total_bytes": nxt.get("total_bytes"), "fits": nxt.get("fits")},
            "reason": None}


POINT_LAYERS = 160 * 40  # chart points x layers per model (the default 160 points up to 40 layers)
#: wall seconds the points of one chart may take (all its models or ranks together), past the first MIN_POINTS:
#: a point's cost is not the same everywhere (a CUDA replay walks its graphs, MLA expands its heads), so
#: the 160 points of deepseek-v2-lite on cuda took 8.8 s of CPU where qwen3-8b on cpu took 2 s
CHART_SECONDS = 2.0
MIN_POINTS = 24


def coarse_to_fine(xs: list[int]) -> list[int]:
    """``xs`` (sorted) reordered so that any prefix covers the whole axis: both ends, then every
    2^k-th point for shrinking k. A chart cut short by ``CHART_SECONDS`` is coarser, never shorter."""
    n = len(xs)
    order, seen = [], set()
    stride = 1
    while stride * 2 < n:
        stride *= 2
    for i in (0, n - 1):
        if i not in seen:
            seen.add(i)
            order.append(i)
    while stride >= 1:
        for i in range(0, n, stride):
            if i not in seen:
                seen.add(i)
                order.append(i)
        stride //= 2
    return [xs[i] for i in order]


def sample_points(xs: list[int], value, seconds: float = CHART_SECONDS, minimum: int = MIN_POINTS) -> list:
    """``[(x, value(x)), ...]`` sorted by x, for the points of ``xs`` that ``seconds`` of wall time allow
    (taken coarse to fine, at least ``minimum`` of them, both ends always)."""
    import time

    t0 = time.perf_counter()
    got = {}
    for k, x in enumerate(coarse_to_fine(xs)):
        if k >= minimum and time.perf_counter() - t0 > seconds:
            break
        got[x] = value(x)
    return sorted(got.items())



def basis_notes(breakdowns) -> list[str]:
    """What a chart's points rest on (``peak/basis.py``), for its printed lines: one note per kind of basis met
    (measured, measured with the band unknown, derived, bound), with its reason and how many points have it.
    The chart printed none: its curve's basis was visible only through ``estimate`` at each length."""
    groups: dict[tuple[str, bool], list] = {}
    for b in breakdowns:
        groups.setdefault((b.peak_basis, bool((b.basis or {}).get("band"))), []).append(b)
    out = []
    for (kind, band), bs in groups.items():
        # the first point's line: with the band unknown it names that point's regime (the others' differ in length)
        line = next((x for x in bs[0].explanation if x.startswith("peak basis:")), f"peak basis: {kind}")
        share = "" if len(groups) == 1 else f" at {len(bs)} of {sum(map(len, groups.values()))} points"
        out.append(f"prefill {line}{share}")
    return out


def series_for(res, weights, req: FitRequest, *, points: int, max_tokens: int, budget: int | None,
               reserve: int | None, seconds: float = CHART_SECONDS) -> Series:
    """The chart's curve for one model: weights / KV at the peak / transient at evenly spaced lengths.

    ``total = weights + held before + peak``; the KV band is the cache at the peak call (prefix + the
    breakdown's ``kv_resident`` and ``kv_growth``), the transient band the rest of the peak.
    """
    from ..peak.prefill import Request

    if weights.bytes is None:
        raise InputError(f"weights of {res.query!r} are unknown ({weights.reason}); the chart needs them: "
                         "pass --weights SIZE if you know it")
    est = Estimator(res.profile)
    # each point replays the prompt over every layer: the point count shrinks with depth so that a chart
    # costs about the same for a 256-layer model as for a 36-layer one (160 points), never below 24
    n = min(points, max(24, POINT_LAYERS // max(1, len(res.profile.layer_names))))
    top = max_tokens
    lo = req.cached + 1
    xs = sorted({max(lo, (top * i // n) // STEP * STEP) for i in range(1, n + 1)} | {lo, top})
    ws, kv, tr = [], [], []
    peaks = sample_points(xs, lambda t: est.prefill_peak(Request(t, cached=req.cached, chunk=req.chunk),
                                                         backend=req.backend_name, mlx_version=req.mlx_version),
                          seconds)
    xs = [t for t, _ in peaks]
    for _, b in peaks:
        k = b.held_before_bytes + b.terms.get("kv_resident", 0) + b.terms.get("kv_growth", 0)
        ws.append(weights.bytes)
        kv.append(k)
        tr.append(b.held_before_bytes + b.peak_bytes - k)
    mt = None
    if budget is not None:
        mt = longest(est, budget, weights.bytes, reserve, req, limit=max(top, res.profile.max_context or 0))
    label = f"weights {format_bytes(weights.bytes)} ({weights.label}"
    label += f", {weights.bits}-bit)" if weights.bits and weights.bits < 16 else ")"
    return Series(res.query, xs, ws, kv, tr, label, mt, res.profile.max_context,
                  notes=basis_notes(b for _, b in peaks))


__all__ = ["FitRequest", "Series", "basis_notes", "compute_fit", "estimate_at", "longest", "sample_points",
           "search_limit", "series_for"]
