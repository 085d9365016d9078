"""The estimator an engine calls per request: resident cache bytes, the prefill peak, fit, longest prompt.

It reads only a ``Profile`` (plain dataclasses) and the kernel tables (``profiles/kernels``): no mlx
import. ``kv_bytes`` is exact (byte-equal to the live mlx-lm caches); ``prefill_peak`` is the term-by-term
model of ``omlx_profiles.peak`` (checked against measured peaks: ``profiles/calibration``).
"""
from __future__ import annotations

from dataclasses import replace

from ..units import DTYPE_BYTES, check_dtype
from ..errors import InputError, OmlxProfilesError
from ..kv.bytes import KVQuant, KVReport, kv_report
from ..kv.replay import STEP  # mlx-lm KVCache allocation step: max_tokens searches on it first
from ..peak.envelope import (CudaEnvelope, envelope_bounds, envelope_bounds_fresh, envelope_exact_fresh,
                             reported_total, tight_upper)
from ..peak.prefill import Breakdown, Request, Verdict, prefill_peak
from ..peak.request import KEYED_AS_GIVEN, MAX_LINE_CHUNK, table_chunk
from ..peak.kernels import KernelRoutes
from ..registry.profile import Profile, past_context, require_profile
from ..units import MAX_BYTES, MAX_TOKENS, format_bytes
from ..units import check_count, check_flag
from .budget import resolve_reserve


#: The CLI's backend too (``report.DEFAULT_BACKEND``): what oMLX and mlx-lm servers run on.
DEFAULT_BACKEND = "metal"
#: ``fits`` decides from ``peak.fast.FastPeak``'s bounds (an upper bound never below the exact total, a lower
#: bound never above it) and replays the request only when the budget falls between the two. Off: every
#: verdict from the exact replay (memoized per request).
USE_FAST_BOUND = True
#: Where the two bounds are at most ``fit_margin(upper)`` apart and the budget falls between them, ``fits``
#: answers "does not fit" without replaying: the only verdict it may get wrong is a request whose exact total
#: is less than that below the usable budget (refused, never the reverse). The margin is 64 KiB, or 1/65,536 of
#: the upper bound (0.0015 %: 458 KiB at 30 GB) where that is more. Both bounds are lines sampled from the exact
#: model, each within 64 B + 64 B per layer of it (item rounding), so where one call is the request's highest
#: in both the band is a few KB; a shorter call near a chunk is bounded by chords over its query count, whose
#: band grows with the attention's width (a few hundred KB for DeepSeek-V3's 128 heads at long prompts).
FIT_MARGIN = 64 << 10


def fit_margin(upper: int) -> int:
    """The band (bytes) within which ``Estimator.fits`` refuses without replaying (``FIT_MARGIN``)."""
    return max(FIT_MARGIN, upper >> 16)
_MEMO = 4096  # exact breakdowns kept per Estimator (an engine's distinct prompt lengths)


def _table_request(request: Request, backend: str, mlx_version: str | None) -> Request:
    """``request`` with the chunk its per-chunk tables are keyed by (``peak.request.table_chunk``: a chunk past the
    prompt makes the same calls as a smaller one; keyed as given, 2^20 bisected a million query counts on CUDA)."""
    if request.chunk <= KEYED_AS_GIVEN:  # the hot path: no table look-up
        return request
    c = table_chunk(request.chunk, request.tokens, KernelRoutes.for_backend(backend, mlx_version).executor)
    return request if c == request.chunk else replace(request, chunk=c)


def _check_request(request: object) -> None:
    """An engine that passes a token count where a ``Request`` belongs gets an ``InputError`` naming the
    argument, not an ``AttributeError`` from deep inside (an ``isinstance``: tens of nanoseconds)."""
    if not isinstance(request, Request):
        raise InputError(f"request must be a Request (e.g. Request(tokens, cached=0, chunk=2048) from "
                         f"omlx_profiles.peak.prefill), got {type(request).__name__} {request!r:.40}")


def _check_names(backend: object, mlx_version: object, dtype: object, nax: object = False) -> None:
    """``backend``, ``mlx_version`` and ``dtype`` are names (``str``) or ``None``, ``dtype`` one the estimator
    knows, ``nax`` a bool: a list reached the memo key and raised ``TypeError: unhashable type`` (hostile
    pass 5), an unknown dtype a ``KeyError`` from the fast path, ``nax="no"`` was taken as true (pass 6).
    The common case is a few type checks."""
    if (type(backend) is str and (mlx_version is None or type(mlx_version) is str)
            and (dtype is None or (type(dtype) is str and dtype in DTYPE_BYTES)) and (nax is False or nax is True)):
        return
    for name, v in (("backend", backend), ("mlx_version", mlx_version)):
        if not isinstance(v, str) and (v is not None or name == "backend"):
            raise InputError(f"{name} must be a str{'' if name == 'backend' else ' or None'}, "
                             f"got {type(v).__name__} {v!r:.40}")
    if dtype is not None:
        check_dtype(dtype, "")
    check_flag("nax", nax)


class Estimator:
    def __init__(self, profile: Profile):
        self.profile = require_profile(profile)
        self._memo: dict = {}
        self._fast: dict = {}
        self._lines: dict = {}  # the envelope's shorter-call lines (peak.envelope.tight_upper)
        self._qlines: dict = {}  # per-count lines after a prefix (peak.prefix_lines)

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
        newest); ``nax``: Metal on M5-generation GPUs (neural accelerators change the D=256 routes).

        The reported total (``held_before_bytes + peak_bytes``) is the monotone envelope of the exact model
        (``peak.envelope``): never below the replay of this request, and never below that of a request with
        fewer new tokens or a shorter cached prefix (same chunk), so a longer prompt or prefix never reports
        less. Where that raises the number, the term ``envelope`` says by how much (calibration points,
        whole chunks without a prefix, are their own envelope)."""
        _check_request(request)
        _check_names(backend, mlx_version, dtype, nax)
        bd = prefill_peak(self.profile, request, backend=backend, mlx_version=mlx_version, dtype=dtype, nax=nax)
        return self._enveloped(_table_request(request, backend, mlx_version), bd, backend, mlx_version, dtype, nax)

    def _enveloped(self, request: Request, bd: Breakdown, backend: str, mlx_version, dtype, nax) -> Breakdown:
        """``bd`` raised to the envelope the API reports (``peak.envelope.reported_total``, the facade's wiring too): a
        term ``envelope`` and a line saying why."""
        if request.schedule != "generate":  # one call of the whole prompt: no chunk or prefix alignment
            return bd
        new, chunk, cached = request.new_tokens, request.chunk, request.cached
        here = bd.held_before_bytes + bd.peak_bytes

        def exact(m: int, c: int) -> int:
            if (m, c) == (new, cached):
                return here
            key = ("total", m, chunk, c, backend, mlx_version, dtype, nax)
            v = self._memo.get(key)
            if v is None:
                b = prefill_peak(self.profile, Request(c + m, cached=c, chunk=chunk), backend=backend,
                                 mlx_version=mlx_version, dtype=dtype, nax=nax)
                v = b.held_before_bytes + b.peak_bytes
                if len(self._memo) >= _MEMO:
                    self._memo.clear()
                self._memo[key] = v
            return v

        fast = self._fast_model(backend, mlx_version, dtype, nax) if USE_FAST_BOUND else None
        extra = reported_total(new, chunk, cached, exact, fast, lines=self._lines, qlines=self._qlines,
                               cuda_fresh=lambda: self._cuda_envelope(request, backend, mlx_version, dtype, nax),
                               cuda_prefix=lambda: self._cuda_prefix(request, backend, mlx_version, dtype, nax),
                               exact_here=here, guard=True) - here
        if extra <= 0:
            return bd
        terms = dict(bd.terms)
        terms["envelope"] = extra
        line = (f"monotone envelope: +{format_bytes(extra)} over this request's own replay, so that no request "
                f"with fewer new tokens or a shorter cached prefix (chunk {chunk}) reports more: which call "
                "copies a growing cache moves with the alignment (peak/envelope.py)")
        return replace(bd, peak_bytes=bd.peak_bytes + extra, terms=terms, explanation=bd.explanation + (line,))

    def total_bytes(self, request: Request, weights_bytes: int, backend: str = DEFAULT_BACKEND,
                    mlx_version: str | None = None, *, dtype: str | None = None, nax: bool = False) -> int:
        """Weights + what the prefix held before the prompt + the prompt's prefill peak."""
        weights_bytes = check_count("weights_bytes", weights_bytes, minimum=0, maximum=MAX_BYTES)
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

        An engine calls this per request, so it costs microseconds for any prompt length: per-profile
        bounds (``peak.fast.FastPeak``: piecewise lines per chunk size, built once; the upper never below
        the exact total, the lower never above it) decide every request whose budget is not between the
        two; only such a request replays the prompt (milliseconds, memoized per request). On CUDA (no
        line holds: graph commits move with the length) a prompt without a prefix is decided from
        ``peak.fast_cuda.CudaFit`` (the full chunk calls exact, the shorter call and the last token bounded per
        bucket; between the bounds only those two calls are replayed); after a prefix from the cells of
        ``peak.fast_cuda_prefix`` (the reported total ``max(E(n, 0), U_cuda(n, c))``: look-ups). The verdict is the exact one, but for one documented margin: where the budget
        falls between bounds at most ``fit_margin`` apart (64 KiB, or 1/65,536 of the total where more), the
        answer is "does not fit" (``margin`` True) without a replay, so a request whose exact total is within
        that margin under the usable budget may be refused; "fits" is never said of a request the exact replay refuses. Its totals and breakdown are
        ``prefill_peak``'s (the exact replay raised to its monotone envelope, ``peak.envelope``), computed when first
        read; the bounds decided from are the envelope's (``envelope_upper``)."""
        _check_request(request)
        _check_names(backend, mlx_version, dtype, nax)
        budget = check_count("budget", budget, minimum=0, maximum=MAX_BYTES)
        given = weights_bytes is not None
        w = check_count("weights_bytes", weights_bytes, minimum=0, maximum=MAX_BYTES) if given else 0
        res = resolve_reserve(budget, reserve)
        usable = max(0, budget - res)
        key = (request, backend, mlx_version, dtype, nax)
        beyond = past_context(self.profile, request.tokens)  # the cached prefix is part of it
        if beyond is not None:  # as the CLI: a length the model was not trained for is not admitted
            return _LazyVerdict(self, key, budget, res, usable, w, given, fits=False, past_context=beyond)
        request = _table_request(request, backend, mlx_version)  # the tables' key; ``key`` keeps the request asked
        fp = self._fast_peak(request, backend, mlx_version, dtype, nax)
        if fp is not None:
            new, chunk, cached = request.new_tokens, request.chunk, request.cached
            try:
                b = envelope_bounds(new, chunk, cached, fp, usable - w, self._lines)
                if b is not None:
                    lo, hi = b
                    if w + hi <= usable:
                        return _LazyVerdict(self, key, budget, res, usable, w, given)
                    if lo is not None and w + lo > usable:
                        return _LazyVerdict(self, key, budget, res, usable, w, given, fits=False)
                    if lo is not None and hi - lo <= fit_margin(hi):  # the exact total is that close to usable
                        return _LazyVerdict(self, key, budget, res, usable, w, given, fits=False, margin=True)
            except (OmlxProfilesError, ArithmeticError):
                pass
        elif request.cached:
            e = self._cuda_prefix_total(request, backend, mlx_version, dtype, nax)
            if e is not None:  # CUDA after a prefix: the reported total from tables (peak.fast_cuda_prefix)
                return _LazyVerdict(self, key, budget, res, usable, w, given, fits=w + e <= usable)
        else:
            cf = self._cuda_fit(request, backend, mlx_version, dtype, nax)
            if cf is not None:  # CUDA without a prefix (peak.fast_cuda): the same decision, else 2 calls replayed
                try:
                    env = self._cuda_envelope(request, backend, mlx_version, dtype, nax)
                    lo, hi = envelope_bounds_fresh(request.new_tokens, request.chunk, cf, env)
                    if hi is not None and w + hi <= usable:
                        return _LazyVerdict(self, key, budget, res, usable, w, given)
                    if w + lo > usable:
                        return _LazyVerdict(self, key, budget, res, usable, w, given, fits=False)
                    if hi is not None and hi - lo <= fit_margin(hi):
                        return _LazyVerdict(self, key, budget, res, usable, w, given, fits=False, margin=True)
                    return _LazyVerdict(self, key, budget, res, usable, w, given,
                                        fits=w + envelope_exact_fresh(request.new_tokens, request.chunk, cf, env) <= usable)
                except (OmlxProfilesError, ArithmeticError):
                    pass
        bd = self._breakdown(key)
        return _LazyVerdict(self, key, budget, res, usable, w, given,
                            fits=w + bd.held_before_bytes + bd.peak_bytes <= usable)

    def prepare(self, chunk: int = 2048, *, backend: str = DEFAULT_BACKEND, mlx_version: str | None = None,
                dtype: str | None = None, nax: bool = False, follow_ups: bool = False) -> bool:
        """Build every per-profile bound ``fits`` decides from for this chunk size and backend now (seconds,
        once), so that no request pays for it (an engine's start-up); otherwise they are built by the first
        requests that need them. On CUDA (``peak.fast_cuda``): every full chunk call up to the model's context
        and the bucket bounds at each offset (about 1-2 s per 16 offsets for an 8B model; a profile without
        ``max_context`` builds on demand). False where ``fits`` replays every request (a profile the bounds do
        not cover).

        ``follow_ups``: on CUDA, also the cells of every offset up to the model's context that requests after a
        prefix read (``peak.fast_cuda_prefix``: a few seconds for an 8B model at chunk 2048). On CPU / Metal: also the lines of the shorter call after a cached prefix at every size
        ``r`` < ``chunk`` (what the reported total after a prefix charges, ``peak.envelope.tight_upper``). Without
        them a request after a prefix whose budget falls between its call's bucket bounds (a budget within a
        few hundred MB of its total) builds its ``r``'s lines first (1-50 ms, once per ``r``); with them every
        such request is microseconds. Costs ``2 x chunk`` line builds: about 1 ms each on CPU, 10-50 ms on
        Metal (llama-3.1-8b chunk 2048 on Metal: tens of seconds)."""
        chunk = check_count("chunk", chunk, minimum=1, maximum=MAX_TOKENS)
        _check_names(backend, mlx_version, dtype, nax)
        if chunk > MAX_LINE_CHUNK:  # no table of that chunk is built (peak.request; follow_ups looped over 2^30 sizes)
            return False
        fp = self._fast_peak(Request(2, chunk=chunk), backend, mlx_version, dtype, nax)
        if fp is None:
            cf = self._cuda_fit(Request(2, chunk=chunk), backend, mlx_version, dtype, nax)
            if cf is None:
                return False
            try:
                cf.prepare()
                if follow_ups:  # CUDA: the cells of every offset after a prefix (peak.fast_cuda_prefix)
                    cp = self._cuda_prefix(Request(2, chunk=chunk), backend, mlx_version, dtype, nax)
                    if cp is None or not cp.prepare():
                        return False
            except (OmlxProfilesError, ArithmeticError):
                return False
            return True
        try:
            fp.prepare(chunk)
            if follow_ups:
                for r in range(1, chunk):  # a follow-up of r + 1 tokens, and one of a chunk and r + 1
                    for m in (r + 1, chunk + r + 1):
                        tight_upper(fp, m, chunk, 1, self._lines)
        except (OmlxProfilesError, ArithmeticError):
            return False
        return True

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

    def _fast_model(self, backend: str, mlx_version, dtype, nax):
        """The profile's ``peak.fast.FastPeak`` for this backend, built once, or ``None`` where it cannot be built
        (its callers decide whether its lines apply)."""
        fkey = (backend, mlx_version, dtype, nax)
        fp = self._fast.get(fkey)
        if fp is None:
            try:
                from ..peak.fast import FastPeak

                fp = FastPeak(self.profile, backend, mlx_version, dtype, nax)
            except OmlxProfilesError:
                fp = False
            self._fast[fkey] = fp
        return fp or None

    def _fast_peak(self, request: Request, backend: str, mlx_version, dtype, nax):
        """The per-profile bounds (``peak.fast.FastPeak``) for this backend, or ``None`` (another schedule,
        CUDA, or a profile the fast model does not cover): then ``fits`` replays the request."""
        if not USE_FAST_BOUND or request.schedule != "generate":
            return None
        fp = self._fast_model(backend, mlx_version, dtype, nax)
        # CUDA's live set follows graph-commit boundaries that move with the length: no line holds there,
        # FastPeak would replay too (memoized per request here instead)
        return None if fp is None or fp.exact_only else fp

    def _cuda_fit(self, request: Request, backend: str, mlx_version, dtype, nax):
        """The CUDA bounds of prompts without a prefix (``peak.fast_cuda.CudaFit``) per chunk size, or ``None``
        (another backend or schedule, a cached prefix, a peak reported unknown: ``fits`` replays)."""
        if not USE_FAST_BOUND or request.schedule != "generate" or request.cached:
            return None
        ckey = ("cuda-fit", backend, mlx_version, dtype, nax, request.chunk)
        cf = self._fast.get(ckey)
        if cf is None:
            try:
                from ..peak.fast_cuda import cuda_fit_for

                cf = cuda_fit_for(self.profile, backend, mlx_version, dtype, nax, request.chunk) or False
            except OmlxProfilesError:
                cf = False
            self._fast[ckey] = cf
        return cf or None

    def _cuda_envelope(self, request: Request, backend: str, mlx_version, dtype, nax):
        """``peak.envelope.CudaEnvelope`` (``E(m, 0)`` on CUDA, monotone in ``m``) for this chunk size, or ``None``
        (another backend or schedule, a peak reported unknown)."""
        cf = self._cuda_fit(Request(request.new_tokens, chunk=request.chunk), backend, mlx_version, dtype, nax)
        if cf is None:
            return None
        key = ("cuda-env", id(cf))
        env = self._fast.get(key)
        if env is None or env.fit is not cf:
            env = self._fast[key] = CudaEnvelope(cf)
        return env

    def _cuda_prefix(self, request: Request, backend: str, mlx_version, dtype, nax):
        """``peak.fast_cuda_prefix.CudaPrefix`` (``U_cuda(n, c)`` after a prefix, monotone in both) for this chunk
        size, or ``None`` (another backend or schedule, a peak reported unknown, no bound: chunked attention)."""
        if not USE_FAST_BOUND or request.schedule != "generate":
            return None
        key = ("cuda-prefix", backend, mlx_version, dtype, nax, request.chunk)
        cp = self._fast.get(key)
        if cp is None:
            try:
                from ..peak.fast_cuda_prefix import cuda_prefix_for

                cp = cuda_prefix_for(self.profile, backend, mlx_version, dtype, nax, request.chunk) or False
            except OmlxProfilesError:
                cp = False
            self._fast[key] = cp
        return cp or None

    def _cuda_prefix_total(self, request: Request, backend: str, mlx_version, dtype, nax) -> int | None:
        """The reported total of a CUDA request after a prefix, ``max(E(n, 0), U_cuda(n, c))`` (``peak.envelope``),
        from the tables alone, or ``None`` (no bound: the replay answers)."""
        cp = self._cuda_prefix(request, backend, mlx_version, dtype, nax)
        if cp is None:
            return None
        env = self._cuda_envelope(request, backend, mlx_version, dtype, nax)
        if env is None:
            return None
        try:
            u = cp.upper(request.new_tokens, request.cached)
            if u is None:
                return None
            e = env.fresh(request.new_tokens)
        except (OmlxProfilesError, ArithmeticError):
            return None
        return e if e > u else u

    def _bounds(self, request: Request, backend: str, mlx_version, dtype, nax) -> tuple[int | None, int] | None:
        """(lower or ``None``, upper) bounds of the reported ``held before + peak`` (the exact replay's monotone
        envelope, ``peak.envelope``) that ``fits`` decides from, or ``None``."""
        request = _table_request(request, backend, mlx_version)
        fp = self._fast_peak(request, backend, mlx_version, dtype, nax)
        if fp is None and request.cached:
            e = self._cuda_prefix_total(request, backend, mlx_version, dtype, nax)
            return None if e is None else (e, e)
        if fp is None:
            cf = self._cuda_fit(request, backend, mlx_version, dtype, nax)
            if cf is None:
                return None
            try:
                env = self._cuda_envelope(request, backend, mlx_version, dtype, nax)
                lo, hi = envelope_bounds_fresh(request.new_tokens, request.chunk, cf, env)
            except (OmlxProfilesError, ArithmeticError):
                return None
            return None if hi is None else (lo, hi)
        new, chunk, cached = request.new_tokens, request.chunk, request.cached
        try:
            return envelope_bounds(new, chunk, cached, fp, lines=self._lines)
        except (OmlxProfilesError, ArithmeticError):
            return None

    def max_tokens(self, budget: int, *, weights_bytes: int = 0, reserve: int | None = None, cached: int = 0,
                   chunk: int = 2048, backend: str = DEFAULT_BACKEND, mlx_version: str | None = None,
                   schedule: str = "generate", dtype: str | None = None, nax: bool = False,
                   limit: int | None = None) -> int:
        """Largest prompt length N (cached prefix included) whose total stays within ``budget - reserve``.

        0 when not even ``cached + 1`` tokens fit. Monotone search: first over the cache allocation step
        (256 tokens: where KV capacity jumps), then within the last step. ``limit`` (default: the
        profile's max_context, else 2**22) caps the search.
        """
        budget = check_count("budget", budget, minimum=0, maximum=MAX_BYTES)
        weights_bytes = check_count("weights_bytes", weights_bytes, minimum=0, maximum=MAX_BYTES)
        cached = check_count("cached", cached, minimum=0)
        chunk = check_count("chunk", chunk, minimum=1)
        if limit is not None:
            limit = check_count("limit", limit, minimum=1, maximum=MAX_TOKENS)
        _check_names(backend, mlx_version, dtype, nax)
        usable = max(0, budget - resolve_reserve(budget, reserve))
        KernelRoutes.for_backend(backend, mlx_version)  # a bad backend or version: an error before the search
        hi_cap = limit or self.profile.max_context or 2**22

        def excess(n: int) -> int:
            """The total at ``n`` less the usable bytes (<= 0: fits). The reported (enveloped) total is
            monotone in the prompt, so every shorter length fits too."""
            req = Request(n, cached=cached, chunk=chunk, schedule=schedule)
            # memoized: fit searches again past the model's context, and the breakdown at the answer is a probe
            bd = self._breakdown((req, backend, mlx_version, dtype, nax))
            return weights_bytes + bd.held_before_bytes + bd.peak_bytes - usable

        lo = cached + 1
        if lo > hi_cap:
            return 0
        g_prev = excess(lo)
        if g_prev > 0:
            return 0
        # growing windows (x4 from 64k tokens): a probe replays its whole length, so probing the limit first
        # made the search cost what the limit does, not the answer (a 2^30 limit: 524,288 calls at chunk
        # 2048 even when the budget held 100k tokens). ``prev`` fits, ``top`` does not.
        prev, top = lo, min(hi_cap, max(1 << 16, 2 * lo))
        while True:
            g_top = excess(top)
            if g_top > 0:
                break
            if top >= hi_cap:
                return hi_cap
            prev, g_prev, top = top, g_top, min(hi_cap, 4 * top)
        # the largest multiple of STEP that fits (where KV capacity jumps), then the largest length within
        # its step (plus one: generate_step's last token); both searched by _bracket
        k, g_k, k_hi, g_hi = _bracket(lambda i: excess(max(lo, i * STEP)), prev // STEP, g_prev,
                                      (top - 1) // STEP + 1, g_top)
        end = min(top, k_hi * STEP)  # does not fit: top, or a multiple of STEP found not to
        a, _, _, _ = _bracket(excess, max(lo, k * STEP), g_k, end, g_top if end == top else g_hi)
        return a


def _bracket(f, ia: int, ga: float, ib: int, gb: float | None) -> tuple[int, float, int, float]:
    """The largest ``i`` in ``[ia, ib)`` with ``f(i) <= 0``, for ``f`` monotone with ``f(ia) <= 0 < f(ib)``
    (``ga`` / ``gb`` their values, or estimates: they only place the probes). Regula falsi with the
    Illinois rule, a bisection after two probes that did not halve the bracket: the total is nearly
    linear in the prompt, so 3-6 probes where a bisection took ~20 (each probe replays the prompt)."""
    side = stall = 0
    while ib - ia > 1:
        width = ib - ia
        if gb is None or stall >= 2 or gb <= ga:
            m, stall = (ia + ib) // 2, 0
        else:
            m = min(max(ia + int(-ga * width / (gb - ga)), ia + 1), ib - 1)
        gm = f(m)
        if gm <= 0:
            ia, ga = m, gm
            if side < 0 and gb is not None:
                gb = gb / 2
            side = -1
        else:
            ib, gb = m, gm
            if side > 0:
                ga = ga / 2
            side = 1
        stall = stall + 1 if 2 * (ib - ia) > width else 0
    return ia, ga, ib, gb


class _LazyVerdict(Verdict):
    """A ``Verdict`` whose ``fits`` is known at once and whose totals, breakdown and message are the exact
    ``prefill_peak`` numbers, computed (and memoized) when first read: the fast path answers the question
    an engine asks per request without replaying the prompt. ``margin``: refused because the bounds put the
    exact total within ``fit_margin`` of the usable budget (its headroom may then be 0 up to that margin)."""

    def __init__(self, est: "Estimator", key, budget: int, reserve: int, usable: int, weights: int, given: bool,
                 fits: bool = True, margin: bool = False, past_context: str | None = None):
        self.__dict__.update(fits=fits, budget_bytes=budget, reserve_bytes=reserve, usable_bytes=usable,
                             weights_bytes=weights, _est=est, _key=key, _given=given, margin=margin,
                             past_context=past_context)

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
        if self.past_context is not None:
            return (f"does not fit: past the model's context - {self.past_context} (needs {format_bytes(total)} of "
                    f"{format_bytes(usable)} usable){wnote}")
        if self.fits:
            return (f"fits: {format_bytes(total)} of {format_bytes(usable)} usable ({format_bytes(budget)} budget - "
                    f"{format_bytes(res)} reserve), {format_bytes(usable - total)} to spare{wnote}")
        bd = self.breakdown
        if self.margin and total <= usable:
            return (f"does not fit within the fast check's margin: needs {format_bytes(total)} of "
                    f"{format_bytes(usable)} usable ({format_bytes(budget)} budget - {format_bytes(res)} reserve), "
                    f"{format_bytes(usable - total)} to spare, under the margin the per-request check keeps "
                    f"(Estimator.fits refuses within {format_bytes(fit_margin(total))} of the budget){wnote}")
        return (f"does not fit: needs {format_bytes(total)} (weights {format_bytes(self.weights_bytes)} + prefill peak "
                f"{format_bytes(bd.peak_bytes + bd.held_before_bytes)}) but {format_bytes(usable)} is usable "
                f"({format_bytes(budget)} budget - {format_bytes(res)} reserve); over by {format_bytes(total - usable)}. "
                f"Shorten the prompt, use a smaller prefill chunk (now {request.chunk}), or raise the budget{wnote}")


__all__ = ["Estimator", "Request", "Breakdown", "Verdict", "InputError"]
