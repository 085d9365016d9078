"""Issue 14 item 4: byte counts over the WHOLE public API are never negative and monotone where the mechanism is.

What the other property files cover: ``test_properties.py`` (resident KV of generated profiles),
``test_properties_peak.py`` (the peak's terms, its fast path vs the exact replay, ``fits`` on cpu / metal),
``test_compat_properties.py`` (the facade's prefill peak and chunk transient). Here, the rest of what a caller
reaches:

* ``omlx_profiles.Estimator``: ``total_bytes`` / ``prefill_peak`` on every backend (cuda included) for chunk
  1..4096 and a cached prefix 0..1M; the total monotone in the cached prefix and in the prompt where the
  prefix and chunks are whole 256-token KV steps; ``fits`` monotone in the budget and equal to the exact
  replay's verdict on cuda too; ``max_tokens`` monotone in the budget;
* the oMLX facade (``omlx_profiles.compat``): ``estimate_prompt_kv_bytes``, ``estimate_resident_kv_bytes``,
  ``estimate_block_memory``, ``estimate_blocks_to_free``, ``estimate_unfused_sdpa_call_bytes``,
  ``make_prefill_memory_profile``'s object (its answers are the monitor's: the same fast path), and the
  memory a request holds at its peak (the prefix's resident KV + ``estimate_prefill_peak_bytes``) monotone in
  the cached prefix;
* ``estimate_weights``: never negative, monotone in bits and in the number of groups, for every registry variant.

Where it is NOT monotone, and why: off whole KV steps a longer cached prefix can peak lower IN THE TRUTH -- the
cache's 256-row capacity and the chunk alignment decide which call grows the cache (and copies it), as mlx-lm's
KVCache does (measured on a real mlx-lm model: test_properties_live.py; the prompt length: test_properties_peak's
test_peak_grows_with_the_prompt). The Metal bound's fixed op window: test_a_two_token_prompt_can_peak_above_three.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from omlx_profiles import Estimator, load_registry
from omlx_profiles.compat import MemoryMonitor, estimate_unfused_sdpa_call_bytes
from omlx_profiles.compat.monitor import ProfilePrefillMemory
from omlx_profiles.errors import UnsupportedError
from omlx_profiles.estimate.weights import estimate_weights
from omlx_profiles.peak.prefill import Request

REG = load_registry([])
# dense GQA, sliding + global (sandwich norms), sliding + sinks MoE, gated-DeltaNet hybrid MoE, expanded MLA
NAMES = ("llama-3.2-1b-instruct", "gemma-3-4b-it", "gpt-oss-20b", "qwen3.5-35b-a3b", "deepseek-v2-lite")
BACKENDS = ("cpu", "metal", "cuda")
MAX_CALLS = 3000  # replays of at most this many chunks: under a second each on the CI machine
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(SETTINGS, max_examples=10)
_EST: dict = {}
_MON: dict = {}

names, backends = st.sampled_from(NAMES), st.sampled_from(BACKENDS)
chunks = st.one_of(st.integers(1, 4096), st.sampled_from([1, 2, 64, 255, 256, 2048, 4096]))
cached_counts = st.one_of(st.just(0), st.integers(0, 1_000_000), st.integers(0, 20_000))
steps = st.integers(1, 16).map(lambda k: 256 * k)


def est(name) -> Estimator:
    if name not in _EST:
        _EST[name] = Estimator(REG.resolve(name).profile)
    return _EST[name]


def monitor(name, backend, eviction=False) -> MemoryMonitor:
    if (name, backend, eviction) not in _MON:
        m = MemoryMonitor(2**34 if eviction else None, eviction_enabled=eviction, backend=backend,
                          mlx_version="0.32.4", max_memory=2**36)
        m.set_profile(REG.resolve(name).profile)
        _MON[name, backend, eviction] = m
    return _MON[name, backend, eviction]


def total(name, backend, new, chunk, cached, weights=0):
    try:
        return est(name).total_bytes(Request(cached + new, cached=cached, chunk=chunk), weights, backend)
    except UnsupportedError:
        return None


# -- Estimator ------------------------------------------------------------------------------------------
@SETTINGS
@given(names, backends, st.integers(1, 5000), chunks, cached_counts, st.integers(0, 1 << 40))
def test_estimator_counts_are_never_negative(name, backend, new, chunk, cached, weights):
    assume((cached + new) // chunk <= MAX_CALLS)
    e = est(name)
    bd = e.prefill_peak(Request(cached + new, cached=cached, chunk=chunk), backend)
    assert min(bd.peak_bytes, bd.held_before_bytes, bd.resident_kv_bytes, bd.transient_bytes, bd.kv_growth_bytes) >= 0
    assert e.total_bytes(Request(cached + new, cached=cached, chunk=chunk), weights, backend) >= weights
    assert e.kv_bytes(cached + new) >= 0 and e.kv_bytes(cached + new, schedule="direct") >= 0


@SETTINGS
@given(names, backends, st.integers(2, 5000), steps, st.integers(0, 1200), st.integers(1, 1200))
def test_estimator_total_grows_with_the_cached_prefix(name, backend, new, chunk, k, more):
    """Whole 256-token steps of prefix, chunks of whole steps: a longer prefix never needs less memory."""
    a, b = 256 * k, 256 * (k + more)
    assume((b + new) // chunk <= MAX_CALLS)
    ta, tb = total(name, backend, new, chunk, a), total(name, backend, new, chunk, b)
    assert tb >= ta, (ta, tb)


@SETTINGS
@given(names, st.sampled_from(("cpu", "metal")), st.integers(257, 5000), steps, st.integers(0, 400),
       st.integers(1, 3000))
def test_estimator_total_grows_with_the_prompt(name, backend, new, chunk, k, more):
    """Not on cuda: the exact CUDA model follows MLX's graph commits and is not monotone in the prompt
    (test_compat_properties.py::test_the_exact_cuda_model_is_not_monotone_in_the_prompt). Not for prompts of a
    few tokens either: test_a_two_token_prompt_can_peak_above_three."""
    cached = 256 * k
    assume((cached + new + more) // chunk <= MAX_CALLS)
    assert total(name, backend, new + more, chunk, cached) >= total(name, backend, new, chunk, cached)


@FEW
@given(names, backends, st.integers(1, 4000), st.sampled_from([1, 7, 256, 700, 2048]),
       st.one_of(st.just(0), st.integers(0, 200_000)), st.floats(0.3, 2.0))
def test_fits_is_monotone_in_the_budget_and_agrees_with_the_total(name, backend, new, chunk, cached, scale):
    """The fast path's verdict (cpu / metal) and the exact replay's (cuda) equal ``total <= budget``, so a larger
    budget never turns "fits" into "does not fit"."""
    assume((cached + new) // chunk <= MAX_CALLS)
    t = total(name, backend, new, chunk, cached)
    if t is None:
        return
    r = Request(cached + new, cached=cached, chunk=chunk)
    budgets = sorted({max(0, int(t * scale)), t, max(0, t - 1), t + 1})
    verdicts = [est(name).fits(r, b, weights_bytes=0, reserve=0, backend=backend).fits for b in budgets]
    assert verdicts == [t <= b for b in budgets], (t, budgets, verdicts)


@settings(SETTINGS, max_examples=5)
@given(names, st.sampled_from(("cpu", "metal")), st.integers(1 << 30, 1 << 36), st.integers(1, 1 << 32))
def test_max_tokens_is_monotone_in_the_budget(name, backend, budget, more):
    e = est(name)
    a = e.max_tokens(budget, reserve=0, backend=backend, limit=65536)
    b = e.max_tokens(budget + more, reserve=0, backend=backend, limit=65536)
    assert 0 <= a <= b, (a, b)


# -- the oMLX facade --------------------------------------------------------------------------------------
@SETTINGS
@given(names, backends, st.one_of(st.integers(0, 20_000), st.integers(0, 800_000)), st.integers(1, 200_000),
       st.integers(1, 4096))
def test_facade_kv_counts_are_nonnegative_and_monotone(name, backend, n, more, block):
    """Up to 1M tokens (the resident count replays its chunks: ``chunk_tokens`` 1, the default, is refused past
    a million calls with an InputError that says so)."""
    m = monitor(name, backend)
    assert 0 <= m.estimate_prompt_kv_bytes(n) <= m.estimate_prompt_kv_bytes(n + more)
    q = 1 if n + more <= 20_000 else 2048
    assert 0 <= m.estimate_resident_kv_bytes(n, chunk_tokens=q) <= m.estimate_resident_kv_bytes(n + more, chunk_tokens=q)
    assert 0 <= m.estimate_block_memory(block) <= m.estimate_block_memory(block + more)
    ev = monitor(name, backend, eviction=True)
    need = ev.estimate_blocks_to_free(n + 1, block)
    assert 1 <= need <= ev.estimate_blocks_to_free(n + 1 + more, block)


@SETTINGS
@given(names, backends, st.integers(0, 5000), steps, st.integers(0, 4000), st.integers(1, 4000))
def test_facade_request_memory_grows_with_the_cached_prefix(name, backend, new, chunk, k, more):
    """What a request holds at its peak: the prefix's resident KV + the prefill peak over it (oMLX adds the two),
    whole-step prefixes and chunks (off whole steps the truth itself is not monotone: test_properties_live.py)."""
    m = monitor(name, backend)

    def held(c):
        # the prefix was fed in chunks of ``chunk`` (as the peak model replays it; chunk 1, the default, is
        # refused past a million calls)
        return (m.estimate_resident_kv_bytes(c, chunk_tokens=chunk)
                + m.estimate_prefill_peak_bytes(new, chunk, cached_tokens=c))

    a, b = 256 * k, 256 * (k + more)
    assert 0 <= held(a) <= held(b), (held(a), held(b))


_PM: dict = {}


def _pm(name, backend) -> ProfilePrefillMemory:
    if (name, backend) not in _PM:
        _PM[name, backend] = ProfilePrefillMemory(REG.resolve(name).profile, backend=backend, mlx_version="0.32.4")
    return _PM[name, backend]


@FEW
@given(names, backends, st.integers(1, 4096), st.integers(0, 1_000_000), st.integers(1, 100_000))
def test_prefill_memory_profile_is_the_monitors_fast_path(name, backend, q, kv, more):
    """``make_prefill_memory_profile``'s object (``ProfilePrefillMemory``: what oMLX passes around as a
    PrefillMemoryProfile) answers with the monitor's numbers: non-negative, monotone in the keys and tokens."""
    m = monitor(name, backend)
    pm = _pm(name, backend)
    t = pm.estimate_prefill_transient_bytes(q, kv + q)
    assert t == m.estimate_chunk_transient_bytes(q, kv + q) > 0
    if backend != "cuda":  # the exact CUDA model: see the module docstring
        assert pm.estimate_prefill_transient_bytes(q, kv + q + more) >= t
    r = pm.estimate_resident_kv_bytes(kv, chunk_tokens=q)
    assert 0 <= r <= pm.estimate_resident_kv_bytes(kv + more, chunk_tokens=q)


@SETTINGS
@given(st.integers(1, 128), st.integers(1, 4096), st.integers(1, 1_000_000), st.sampled_from([64, 96, 128, 256]),
       st.integers(1, 4096), st.integers(1, 100_000))
def test_unfused_sdpa_call_bytes_are_monotone(heads, q, kv, d, more_q, more_kv):
    v = estimate_unfused_sdpa_call_bytes(heads, q, kv, d)
    assert v > 0
    assert estimate_unfused_sdpa_call_bytes(heads, q + more_q, kv, d) >= v
    assert estimate_unfused_sdpa_call_bytes(heads, q, kv + more_kv, d) >= v


# -- weights ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.name for p in REG))
def test_weights_are_nonnegative_and_monotone_in_bits_and_groups(name):
    res = REG.resolve(name)
    base = estimate_weights(res)
    if base.bytes is None:
        assert base.reason  # unknown says why
        return
    assert base.bytes > 0
    by_bits = [estimate_weights(res, bits=b, group_size=64).bytes for b in (2, 3, 4, 5, 6, 8)]
    by_bits += [estimate_weights(res, bits=16).bytes]
    assert all(x > 0 for x in by_bits) and by_bits == sorted(by_bits), by_bits
    # more groups, more scales: monotone among the groups that divide every input width (a group that does not
    # leaves those Linear layers unquantized in mlx_lm.utils.quantize_model: counted unquantized, said so)
    ws = [estimate_weights(res, bits=4, group_size=g) for g in (128, 64, 32)]
    fits = [w.bytes for w in ws if "not a multiple of group" not in w.reason]
    assert fits == sorted(fits) and estimate_weights(res, bits=4).bytes == ws[-1].bytes, [w.bytes for w in ws]
    assert all(w.bytes >= by_bits[-1] for w in ws if "not a multiple of group" in w.reason)


# -- where it is not monotone, pinned ---------------------------------------------------------------------
def test_a_longer_prefix_off_whole_steps_now_peaks_higher():
    """Was a pinned counterexample (Qwen3.5-35B-A3B cpu, 2,383 new tokens in chunks of 7: prefix 170,512 -> 3.85
    GB, 165,065 -> 4.01 GB). Its cause was an UNDER: the model evaluated only the first and last 3 calls, and the
    call that grows (copies) the full-attention caches was ~37 calls earlier at 170,512. With the last growing
    call evaluated both rise (4.07 / 4.20 GB) and the order follows the held cache; test_properties_live.py
    checks such calls against a real mlx-lm model (the old numbers were 0.57-0.68 of the measured peak)."""
    m = monitor("qwen3.5-35b-a3b", "cpu")

    def held(c):
        return m.estimate_resident_kv_bytes(c) + m.estimate_prefill_peak_bytes(2383, 7, cached_tokens=c)

    assert held(170_512) > held(165_065) > 4.05e9
    assert total("qwen3.5-35b-a3b", "cpu", 2383, 7, 170_512) > total("qwen3.5-35b-a3b", "cpu", 2383, 7, 165_065)


def test_a_two_token_prompt_can_peak_above_three():
    """gpt-oss-20b on metal after a 3584-token prefix (14 whole steps), chunk 256: 2 new tokens peak at
    171,718,592 B, 3 at 171,243,234 B. Both calls grow the full caches by a step and copy them; the derived
    Metal bound keeps a fixed number of ops alive (11 command buffers x 51 ops), and the 2-token call's extra
    ops (masks, a wider MoE) push part of the cache copies out of that window (kv_update_copy 70.8 MB vs
    67.1 MB). Found by test_estimator_total_grows_with_the_prompt at new >= 2 (test_properties_peak's
    test_peak_grows_with_the_prompt claims that domain but did not draw it). Still open (session 6, s6-mono): an
    artifact of the bound, not a measured truth (MLX's CPU backend has no command-buffer run-ahead to measure); the
    root fix (a window whose retained bytes cannot drop when ops are added) changes the fast path's envelope too
    (peak/fast*.py), so it was left for a coordinated change."""
    assert total("gpt-oss-20b", "metal", 3, 256, 3584) < total("gpt-oss-20b", "metal", 2, 256, 3584)
