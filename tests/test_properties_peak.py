"""Properties of the public prefill-peak API over real registry profiles, every backend (issue 14, hypothesis).

For any request a caller can make - chunk 1 ... 4096, a cached prefix 0 ... 1M tokens, new tokens 1 ... 3000,
backend cpu / cuda / metal - the numbers the package returns are byte counts: never negative, every term
of a breakdown non-negative and summing to the peak; the peak grows with the prompt (more new tokens at
the same chunk and prefix never lower it); and the fast path (``FastPeak``, what engines call per request)
agrees with the exact replay: never below it. The oMLX facade (``compat/``) has its own properties
(the omlx helper's tests); this file covers ``prefill_peak`` / ``Estimator`` / ``FastPeak``.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from omlx_profiles.errors import UnsupportedError
from omlx_profiles.estimate.estimator import Estimator, fit_margin
from omlx_profiles.peak.fast import FastPeak
from omlx_profiles.peak.prefill import Request, prefill_peak
from omlx_profiles import load_registry

# one profile per op-model path: dense GQA, latent MLA + dense-first MoE, gated-DeltaNet hybrid MoE,
# sliding + sinks MoE, sandwich norms + sliding, expanded MLA, Mamba2 hybrid (unknown where unmeasured)
NAMES = ["llama-3.2-1b-instruct", "deepseek-v3", "qwen3.5-35b-a3b", "gpt-oss-20b", "gemma-3-4b-it", "deepseek-v2-lite",
         "nemotron-h-56b-base-8k"]
BACKENDS = ["cpu", "cuda", "metal"]
MAX_CALLS = 3000  # keep each replay under a second on the CI machine

_REG = None
_FAST: dict = {}


def profile(name):
    global _REG
    if _REG is None:
        _REG = load_registry([])
    return _REG.resolve(name).profile


def fast(name, backend):
    key = (name, backend)
    if key not in _FAST:
        _FAST[key] = FastPeak(profile(name), backend)
    return _FAST[key]


_EST: dict = {}


def estimator(name):
    if name not in _EST:
        _EST[name] = Estimator(profile(name))
    return _EST[name]


requests = st.tuples(st.sampled_from(NAMES), st.sampled_from(BACKENDS), st.integers(1, 3000),
                     st.integers(1, 4096), st.one_of(st.just(0), st.integers(0, 1_000_000)))
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _peak(name, backend, new, chunk, cached):
    try:
        return prefill_peak(profile(name), Request(cached + new, cached=cached, chunk=chunk), backend=backend)
    except UnsupportedError:
        return None  # reported unknown (with its reason): not a byte count


@SETTINGS
@given(requests)
def test_byte_counts_are_never_negative(req):
    name, backend, new, chunk, cached = req
    assume((cached + new) // chunk <= MAX_CALLS)
    bd = _peak(name, backend, new, chunk, cached)
    if bd is None:
        return
    assert bd.peak_bytes >= 0 and bd.resident_kv_bytes >= 0 and bd.held_before_bytes >= 0
    assert bd.kv_growth_bytes >= 0 and bd.transient_bytes >= 0
    assert all(v >= 0 for v in bd.terms.values()), bd.terms
    assert sum(bd.terms.values()) == bd.peak_bytes
    e = Estimator(profile(name))
    assert e.kv_bytes(cached + new) >= 0


@SETTINGS
@given(requests, st.integers(1, 3000))
def test_peak_grows_with_the_prompt(req, more):
    """True where the replay is: chunks and prefix in whole 256-token KV steps, at least two new tokens. Not
    true of mlx-lm in general, and the estimate follows mlx-lm: with a 256-token prefix and chunk 1, ONE new
    token is a single call that grows the KVCache by a step AND computes the logits (Llama-3.2-1B, cpu: 10.86
    MB), while TWO new tokens grow the cache in the first call (no logits) and compute the logits in the
    second, without growth (9.82 MB).

    Not on CUDA: there the live set follows MLX's graph commits, whose boundaries move with the length, so a
    longer prompt can peak a few KB lower (DeepSeek-V3, chunk 1280: 1,107 new tokens 5,442,604,660 B, 1,281
    new tokens 5,442,594,816 B). That is MLX's behaviour, which the replay follows; it is why the oMLX facade
    and ``Estimator.fits`` answer CUDA from the exact replay of the request, never from a shared bound."""
    name, backend, new, chunk, cached = req
    assume(backend != "cuda")
    chunk, cached, new = -(-chunk // 256) * 256, cached // 256 * 256, max(new, 2)
    assume((cached + new + more) // chunk <= MAX_CALLS)
    a = _peak(name, backend, new, chunk, cached)
    b = _peak(name, backend, new + more, chunk, cached)
    if a is None or b is None:
        assert a is None and b is None  # unknown for a model is unknown at every length
        return
    assert b.peak_bytes >= a.peak_bytes, (a.peak_bytes, b.peak_bytes)


@SETTINGS
@given(requests)
def test_fast_path_is_never_below_the_exact_path(req):
    name, backend, new, chunk, cached = req
    assume((cached + new) // chunk <= MAX_CALLS)
    exact = _peak(name, backend, new, chunk, cached)
    if exact is None:
        with pytest.raises(UnsupportedError):
            fast(name, backend).peak(new, chunk, cached)
        return
    f = fast(name, backend).peak(new, chunk, cached)
    assert f >= 0
    assert f >= exact.peak_bytes, (f, exact.peak_bytes)


@pytest.mark.parametrize("cached", [4975, 5295])
def test_fast_path_after_full_chunks_holds_the_sliding_rows_of_a_full_chunk(cached):
    """Found by the property above on CI: a sliding cache holds ``window - 1`` rows plus the previous call's, so
    the fast path's lines must be sampled after a full chunk; sampled after the history's shorter call they
    were 255 B (4,975 cached) to 645 KB (5,295 cached) below the exact replay (gemma-3-4b, metal, chunk 265)."""
    exact = _peak("gemma-3-4b-it", "metal", 531, 265, cached)
    assert fast("gemma-3-4b-it", "metal").peak(531, 265, cached) >= exact.peak_bytes


@SETTINGS
@given(st.sampled_from(NAMES), st.sampled_from(BACKENDS), st.integers(257, 3000), st.integers(1, 16).map(lambda k: 256 * k))
def test_fast_path_matches_exact_for_chunks_of_whole_steps(name, backend, new, chunk):
    """Where the fast path's lines are built for the chunk itself (multiples of 256), it is never below the
    exact replay and exceeds it by at most one chunk's KV growth and attention (the last call charged full)."""
    exact = _peak(name, backend, new, chunk, 0)
    if exact is None:
        return
    f = fast(name, backend).peak(new, chunk, 0)
    assert f >= exact.peak_bytes, (f, exact.peak_bytes)


# chunk sizes whose bounds are built once for the whole run: whole 256-row steps, below a step, odd sizes past
# one (capacity phases of their own), and 1
CHUNKS = st.sampled_from([1, 2, 7, 99, 234, 256, 265, 512, 700, 2048])
fit_requests = st.tuples(st.sampled_from(NAMES), st.sampled_from(["cpu", "metal"]), st.integers(1, 6000), CHUNKS,
                         st.one_of(st.just(0), st.integers(0, 1_000_000)))


@SETTINGS
@given(fit_requests, st.floats(0.5, 1.5))
def test_fits_agrees_with_the_exact_replay(req, scale):
    """``Estimator.fits`` decides from per-profile bounds without replaying (issue 18): its verdict must be the
    reported total's (the exact replay's monotone envelope, never below it) for any budget -- never "fits" where the exact total does not, nor the reverse -- and the
    bounds it decides from must hold (upper >= exact total >= lower), whatever the request."""
    name, backend, new, chunk, cached = req
    assume((cached + new) // chunk <= MAX_CALLS)
    exact = _peak(name, backend, new, chunk, cached)
    if exact is None:
        return
    e = estimator(name)
    request = Request(cached + new, cached=cached, chunk=chunk)
    # the total the API reports: the exact replay raised to its monotone envelope (peak/envelope.py)
    reported = e.prefill_peak(request, backend)
    total = reported.held_before_bytes + reported.peak_bytes
    assert total >= exact.held_before_bytes + exact.peak_bytes
    bounds = e._bounds(request, backend, None, None, False)  # None: a profile answered exactly (a bound basis)
    lo, hi = bounds if bounds is not None else (None, total)
    assert hi >= total, (hi, total)
    assert lo is None or lo <= total, (lo, total)
    margin = fit_margin(hi)
    for budget in (int(total * scale), total, total - 1, total + 1, total + margin - 1, total + margin, hi,
                   (lo or 1) - 1):
        if budget < 0:
            continue
        v = e.fits(request, budget, weights_bytes=0, reserve=0, backend=backend)
        if v.fits != (total <= budget):
            # the one documented difference: "does not fit" where the bounds are within fit_margin (64 KiB, or
            # 1/65,536 of the total) of each other and the exact total is less than that under the budget; never
            # "fits" wrongly
            assert not v.fits and v.margin and 0 <= budget - total < margin, (budget, total, lo, hi)
            assert lo is not None and hi - lo <= margin, (budget, total, lo, hi)
