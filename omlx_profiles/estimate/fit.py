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


def estimate_at(res, tokens: int, req: FitRequest, weights, budget: int | None, reserve: int | None,
                est: Estimator | None = None) -> dict:
    """``estimate --tokens N`` for this request, as its JSON dict (the one code path for all commands).
    ``est``: the Estimator that searched (its tables are reused: rebuilding them doubled a CUDA fit)."""
    opts = EstimateOptions(tokens=tokens, chunk=req.chunk, cached=req.cached, backend=req.backend_name,
                           mlx_version=req.mlx_version, budget=budget, reserve=reserve,
                           weights_bits=req.weights_bits, weights=weights, estimator=est)
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
    if limit is None:
        limit = est.profile.max_context or 2**22
    return _rounded(_search(est, budget, weights_bytes, reserve, req, limit), req.cached)


def _search(est: Estimator, budget: int, weights_bytes: int, reserve: int, req: FitRequest, limit: int) -> int:
    return est.max_tokens(budget, limit=limit, weights_bytes=weights_bytes, reserve=reserve, cached=req.cached,
                          chunk=req.chunk, backend=req.backend_name, mlx_version=req.mlx_version)


def _fits_at(est: Estimator, budget: int, weights_bytes: int, reserve: int, req: FitRequest, tokens: int) -> bool:
    """Whether a prompt of ``tokens`` fits, decided as ``Estimator.max_tokens``' probes are (the same memoized
    breakdown, so the search and the breakdown at the answer reuse it)."""
    from ..peak.prefill import Request
    from .budget import resolve_reserve

    r = Request(tokens, cached=req.cached, chunk=req.chunk)
    bd = est._breakdown((r, req.backend_name, req.mlx_version, None, False))
    return weights_bytes + bd.held_before_bytes + bd.peak_bytes <= max(0, budget - resolve_reserve(budget, reserve))


def _rounded(mt: int, cached: int) -> int:
    if mt >= STEP:
        mt = mt // STEP * STEP
    return mt if mt > cached else 0


#: Replay work (``kv/work`` calls, a CUDA call priced at ``GRAPH_CALL_COST``) ``fit`` spends searching past the
#: model's context for "memory alone would allow N" (the headline never passes the context: this is
#: information, not the answer). Past it the answer is "at least" the longest length shown to fit. Work, not
#: time, so the answer is the same on every machine: 50,000 calls are ~0.4 s on the CPU / Metal model and 500
#: CUDA calls (~2-3 s with the envelope: a 512k-token probe of a 128k-context model at chunk 2048, not a 2M one).
#: gemma-3-27b's CUDA fit searched to 1,242,880 tokens for 54 s of CPU.
PAST_CONTEXT_CALLS = 50_000


def memory_beyond(est: Estimator, budget: int, weights_bytes: int, reserve: int, req: FitRequest, start: int,
                  limit: int, calls: int | None = None) -> tuple[int, bool]:
    """How far memory alone goes past ``start`` (a length known to fit), searched in windows growing x4 up to
    ``limit`` within ``calls`` of replay work (``PAST_CONTEXT_CALLS``): ``(tokens, exact)``; not exact,
    ``tokens`` is the longest length shown to fit when the work ran out (refused before it is done: nothing
    is left half built)."""
    from ..kv.work import WorkExceeded, work_limit

    known = top = start
    try:
        with work_limit(PAST_CONTEXT_CALLS if calls is None else calls) as box:
            while top < limit:
                top = min(limit, top * 4)
                m = _search(est, budget, weights_bytes, reserve, req, top)  # the earlier probes are memoized
                if m < top:
                    return max(known, _rounded(m, req.cached)), True
                known = top
            return _rounded(known, req.cached), True
    except WorkExceeded as e:
        if e.box is not box:
            raise  # the command's own budget: not ours to absorb
    return known, False


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
    # the headline: the longest prompt within the model's context (the whole search without one); then, only if
    # the whole context fits, how far memory alone would go, within a CPU bound (memory_beyond)
    full = search_limit(max_ctx, req.chunk)
    from ..kv.work import COMMAND_CALLS

    # the common answer with a large budget, in one probe (the search's first two were waste), where one probe
    # of the whole context is a small share of the command's replay budget (a 2^30 context is not)
    if (max_ctx and -(-max_ctx // req.chunk) <= COMMAND_CALLS // 32
            and _fits_at(est, budget, weights.bytes, reserve, req, req.cached + 1)  # else nothing fits: no probe
            and _fits_at(est, budget, weights.bytes, reserve, req, max_ctx)):
        raw = max_ctx
    else:
        raw = _search(est, budget, weights.bytes, reserve, req, min(full, max_ctx) if max_ctx else full)
    mt = max_ctx if (max_ctx and raw >= max_ctx) else _rounded(raw, req.cached)
    if not mt:
        at0 = estimate_at(res, req.cached + 1, req, weights, budget, reserve, est)
        return {**base, "max_tokens": None, "limited_by": "memory", "at_max": at0, "next": None,
                "reason": f"even a {req.cached + 1}-token prompt needs {format_bytes(at0.get('total_bytes'))} "
                          f"(weights {format_bytes(weights.bytes)}) > {format_bytes(budget - reserve)} usable"}
    at = estimate_at(res, mt, req, weights, budget, reserve, est)
    nxt = estimate_at(res, mt + STEP, req, weights, budget, reserve, est)
    memory_mt, exact = mt, True
    if max_ctx and mt >= max_ctx and full > max_ctx:  # after the breakdowns: a cut search may leave est half built
        memory_mt, exact = memory_beyond(est, budget, weights.bytes, reserve, req, max_ctx, full)
    return {**base, "max_tokens": mt, "memory_max_tokens": memory_mt, "memory_max_tokens_exact": exact,
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


def _point(x: int, req: FitRequest) -> int:
    """A chart point at or below ``x``: a multiple of the cache's 256-row step; on a backend that commits graphs
    (CUDA) without a prefix, one token past a whole number of chunks instead (``k S + 1``): the reported total
    there needs the bucket bounds of one offset (``peak.envelope.CudaEnvelope``: ``CU(k S)``), where a point
    inside a block needs two (its own and the one before), at ~1 s each for a gated-DeltaNet's (the qwen3.5 chart
    on CUDA: 46 offsets built for 24 points)."""
    if req.cached == 0 and x > req.chunk:
        from ..peak.kernels import KernelRoutes

        if KernelRoutes.for_backend(req.backend_name, req.mlx_version).executor.graph_commit is not None:
            return (x - 1) // req.chunk * req.chunk + 1
    return x // STEP * STEP


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
    xs = sorted({max(lo, _point(top * i // n, req)) for i in range(1, n + 1)} | {lo, top})
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


__all__ = ["PAST_CONTEXT_CALLS", "FitRequest", "Series", "basis_notes", "compute_fit", "estimate_at", "longest",
           "memory_beyond", "sample_points",
           "search_limit", "series_for"]
