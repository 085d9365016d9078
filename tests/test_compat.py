"""The oMLX facade (omlx_profiles.compat): the seed's names and semantics, backed by the profile estimator."""
from __future__ import annotations

import time

import pytest

from omlx_profiles import compat
from omlx_profiles.compat import (
    MemoryMonitor,
    ModelInfoMissingError,
    PrefillMemoryExceededError,
    estimate_mla_kv_bytes_per_token,
    estimate_unfused_sdpa_call_bytes,
    raise_if_prefill_exceeds,
    register_tiled_prefill_head_dim,
)
from omlx_profiles.estimate.estimator import Estimator
from omlx_profiles.kv.bytes import kv_report
from omlx_profiles.peak.prefill import Request
from omlx_profiles.peak.kernels import unregister_tiled
from omlx_profiles.registry.index import load_registry

REG = load_registry([])


def monitor(name: str, backend: str = "metal", version: str = "0.32.4", **kw) -> MemoryMonitor:
    m = MemoryMonitor(None, eviction_enabled=False, backend=backend, mlx_version=version, max_memory=2**36, **kw)
    m.set_profile(REG.resolve(name).profile)
    return m


def test_seed_names_exist():
    for name in ("MemoryMonitor", "MemoryInfo", "set_model_info_from_model", "raise_if_prefill_exceeds",
                 "register_tiled_prefill_head_dim", "estimate_unfused_sdpa_call_bytes",
                 "estimate_mla_kv_bytes_per_token", "PrefillMemoryExceededError"):
        assert hasattr(compat, name), name
    m = MemoryMonitor(2**30, backend="cpu", max_memory=2**34)
    for meth in ("set_model_info", "has_model_info", "estimate_block_memory", "estimate_prompt_kv_bytes",
                 "estimate_prefill_peak_bytes", "estimate_chunk_transient_bytes", "estimate_blocks_to_free",
                 "set_paged_cache_manager", "set_baseline_memory", "set_request_stats", "get_memory_info",
                 "is_under_pressure", "bytes_to_free", "get_stats"):
        assert callable(getattr(m, meth)), meth
    assert m.max_memory == 2**34 and m.max_kv_cache_memory == 2**30 and m.eviction_enabled


def test_no_model_info_is_a_logged_noop(caplog):
    """oMLX calls the estimates and the guard without checking has_model_info(): without model info they
    return 0 / let the request through, and say why in the log -- no guessed 7B default, no exception."""
    m = MemoryMonitor(2**30, backend="cpu", max_memory=2**34)
    assert not m.has_model_info()
    with caplog.at_level("DEBUG", logger="omlx_profiles.compat"):
        for call in (lambda: m.estimate_block_memory(64), lambda: m.estimate_prompt_kv_bytes(1000),
                     lambda: m.estimate_prefill_peak_bytes(1000, 2048),
                     lambda: m.estimate_chunk_transient_bytes(512, 4096), lambda: m.estimate_blocks_to_free(10**9, 64),
                     lambda: m.estimate_resident_kv_bytes(1000, chunk_tokens=512)):
            assert call() == 0
        # the guard does not raise: it cannot estimate, and it says so
        raise_if_prefill_exceeds(m, prefill_memory_guard=True, hard_limit_bytes=1, current_usage_bytes=0,
                                 prefill_step_size=2048, num_prompt_tokens=1000)
    assert sum("no model info" in r.getMessage() for r in caplog.records) >= 6
    assert [r.levelname for r in caplog.records if "no model info" in r.getMessage()][0] == "WARNING"
    # a bad argument is still an error, model info or not
    with pytest.raises(ValueError, match="new_tokens"):
        m.estimate_prefill_peak_bytes(-1, 2048)
    # explicit overrides still compute oMLX's arithmetic
    assert m.estimate_block_memory(64, num_layers=32, num_kv_heads=8, head_dim=128, dtype_size=2) == 64 * 8 * 128 * 2 * 2 * 32
    # ModelInfoMissingError stays importable for callers that catch it
    assert issubclass(ModelInfoMissingError, RuntimeError)


def test_eviction_disabled_semantics():
    with pytest.raises(ValueError):
        MemoryMonitor(None)  # eviction on needs a limit, as the seed
    m = monitor("llama-3.1-8b")
    with pytest.raises(RuntimeError):
        m.estimate_blocks_to_free(10**9, 64)


def test_kv_numbers_exact():
    p = REG.resolve("gemma-3-27b-it").profile
    m = monitor("gemma-3-27b-it")
    assert m.estimate_prompt_kv_bytes(32768) == kv_report(p, 32768).total
    # a 64-token block stores every layer's K/V rows (sliding layers included)
    row = sum(e.row_elements for n in p.layer_names for e in p.layer_types[n].entries) * 2
    assert m.estimate_block_memory(64) == 64 * row
    m2 = MemoryMonitor(2**32, backend="cpu", max_memory=2**36)
    m2.set_profile(p)
    assert m2.estimate_blocks_to_free(64 * row * 3 + 1, 64) == 4


@pytest.mark.parametrize("name,backend", [("llama-3.1-8b", "cuda"), ("gemma-3-4b-it", "metal"),
                                          ("qwen3.5-35b-a3b", "metal"), ("deepseek-v2-lite", "cuda"),
                                          ("gpt-oss-20b", "cpu")])
def test_peak_matches_estimator(name, backend):
    """The facade's fast path is the estimator's number, never below it and within one chunk's growth."""
    m = monitor(name, backend=backend)
    est = Estimator(REG.resolve(name).profile)
    for new, cached, chunk in ((1000, 0, 2048), (8192, 0, 2048), (32768, 0, 2048), (24576, 8192, 2048),
                               (65535, 1, 512)):
        exact = est.prefill_peak(Request(new + cached, cached=cached, chunk=chunk), backend, "0.32.4").peak_bytes
        fast = m.estimate_prefill_peak_bytes(new, chunk, cached_tokens=cached)
        assert exact <= fast <= exact * 1.03, (new, cached, chunk, exact, fast)


def test_cached_tokens_widen_attention_but_add_no_kv():
    """D=256 fallback scores span the prefix too: more transient, yet no KV for the prefix itself -- in the exact
    model. The facade reports its monotone envelope, never below it: after a prefix on CUDA that is the bound of
    ``peak.fast_cuda_prefix`` (every call of at most as many queries at an offset at most as far), which here is
    ~2% above the peak of the whole 32,768 tokens without a prefix (session 10: 11.79 vs 11.51 GB), so the second
    comparison is the exact model's."""
    from omlx_profiles.peak.prefill import prefill_peak

    m = monitor("gemma-3-4b-it", backend="cuda")
    p = REG.resolve("gemma-3-4b-it").profile
    without = m.estimate_prefill_peak_bytes(8192, 2048)
    with_prefix = m.estimate_prefill_peak_bytes(8192, 2048, cached_tokens=24576)
    assert with_prefix > without
    exact = prefill_peak(p, Request(8192 + 24576, cached=24576, chunk=2048), backend="cuda", mlx_version="0.32.4")
    assert with_prefix >= exact.peak_bytes
    fresh = prefill_peak(p, Request(8192 + 24576, chunk=2048), backend="cuda", mlx_version="0.32.4")
    assert exact.peak_bytes < fresh.peak_bytes <= m.estimate_prefill_peak_bytes(8192 + 24576, 2048)


def test_set_model_info_seed_entry_point():
    m = MemoryMonitor(None, eviction_enabled=False, backend="cuda", mlx_version="0.32.4", max_memory=2**36)
    m.set_model_info(32, 8, 128, dtype_size=2, num_attention_heads=32, compute_dtype_size=2, intermediate_size=14336,
                     hidden_size=4096)
    assert m.has_model_info()
    llama = monitor("llama-3.1-8b", backend="cuda")
    a, b = m.estimate_prefill_peak_bytes(32768, 2048), llama.estimate_prefill_peak_bytes(32768, 2048)
    assert a == pytest.approx(b, rel=0.02)  # same dims as the registry profile
    assert m.estimate_block_memory(64) == 64 * 32 * 8 * 128 * 2 * 2
    # a fractional KV width (TurboQuant) is what a block stores
    m.set_model_info(32, 8, 128, dtype_size=0.75, num_attention_heads=32)
    assert m.estimate_block_memory(64) == 64 * 32 * 8 * 128 * 0.75 * 2


def test_guard_error_is_omlx_compatible():
    m = monitor("llama-3.1-8b", backend="cuda")
    with pytest.raises(PrefillMemoryExceededError) as ei:
        raise_if_prefill_exceeds(m, prefill_memory_guard=True, hard_limit_bytes=20 * 2**30,
                                 current_usage_bytes=15 * 2**30, prefill_step_size=2048, num_prompt_tokens=65536,
                                 request_id="req-1")
    e = ei.value
    assert e.request_id == "req-1" and e.limit_bytes == 20 * 2**30
    assert e.estimated_bytes > e.limit_bytes
    assert "prefill_step_size" in e.message and "Shorten the prompt" in e.message
    # fits: no error; guard off / no limit / no monitor: no-op (as the seed)
    raise_if_prefill_exceeds(m, prefill_memory_guard=True, hard_limit_bytes=100 * 2**30, current_usage_bytes=0,
                             prefill_step_size=2048, num_prompt_tokens=8192)
    raise_if_prefill_exceeds(m, prefill_memory_guard=False, hard_limit_bytes=1, current_usage_bytes=0,
                             prefill_step_size=2048, num_prompt_tokens=8192)
    raise_if_prefill_exceeds(None, prefill_memory_guard=True, hard_limit_bytes=1, current_usage_bytes=0,
                             prefill_step_size=2048, num_prompt_tokens=8192)
    # everything cached: nothing to prefill
    raise_if_prefill_exceeds(m, prefill_memory_guard=True, hard_limit_bytes=1, current_usage_bytes=0,
                             prefill_step_size=2048, num_prompt_tokens=8192, cached_tokens=8192)


def test_register_tiled_changes_the_estimate():
    m = monitor("gemma-3-4b-it", backend="metal")
    before = m.estimate_prefill_peak_bytes(32768, 2048)
    register_tiled_prefill_head_dim(256, min_kv_len=8192, kv_tile=1024)
    try:
        tiled = m.estimate_prefill_peak_bytes(32768, 2048)
        assert tiled < before
        assert m.estimate_prefill_peak_bytes(4096, 2048) == monitor("gemma-3-4b-it").estimate_prefill_peak_bytes(4096, 2048)
    finally:
        unregister_tiled(256)
    assert m.estimate_prefill_peak_bytes(32768, 2048) == before


def test_chunk_transient():
    m = monitor("gemma-3-4b-it", backend="metal")
    t_short = m.estimate_chunk_transient_bytes(2048, 4096)
    t_long = m.estimate_chunk_transient_bytes(2048, 65536)
    assert 0 < t_short < t_long  # D=256 scores span kv_len on Metal


def test_helpers_fixed_where_the_seed_was_wrong():
    # output and scaled q in the compute dtype (the seed charged the output as fp32)
    assert estimate_unfused_sdpa_call_bytes(8, 2048, 32768, 256, 2) == 8 * 2048 * 32768 * 2 + 2 * 8 * 2048 * 256 * 2

    class L:  # a CacheList of main + indexer
        caches = (object(), object())

    cfg = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_head_dim": 128}
    assert estimate_mla_kv_bytes_per_token(cfg, [L(), L()], 2) == 2 * ((512 + 64) + 2 * 128) * 2


def seed_like_peak(new_tokens, chunk_size, cached_tokens=0, _s=(34, 4, 256, 2, 8)):
    """The seed's per-call arithmetic (estimate_prefill_peak_bytes), transcribed as the speed baseline."""
    layers, kv_heads, hd, dt, n_q = _s
    if n_q == 0 or hd == 0 or new_tokens <= 0:
        return 0
    q = min(chunk_size, new_tokens)
    kv = new_tokens + max(cached_tokens, 0)
    fused = (hd in (64, 96, 128, 256) and q * max(1, n_q // kv_heads) <= 32) if q <= 8 else hd in (64, 80, 128)
    sdpa = n_q * q * hd * 4 if fused else int(n_q * q * kv * dt + n_q * q * hd * 4)
    return sdpa + new_tokens * layers * kv_heads * hd * dt * 2


def test_facade_per_call_speed_vs_seed_arithmetic():
    m = monitor("gemma-3-4b-it")
    m.estimate_prefill_peak_bytes(32768, 2048)  # precompute
    n = 20000

    def clock(fn):
        t = time.perf_counter()
        for i in range(n):
            fn(32768 + (i & 7), 2048, cached_tokens=0)
        return (time.perf_counter() - t) / n

    # rounds interleaved, best of each: a burst of load on a shared machine slows both sides of one round,
    # not one side of the whole comparison (measured here: the facade ~0.4x the seed's time)
    rounds = [(clock(m.estimate_prefill_peak_bytes), clock(seed_like_peak)) for _ in range(3)]
    facade, seed = min(r[0] for r in rounds), min(r[1] for r in rounds)
    assert facade <= seed * 1.0, f"facade {facade * 1e6:.2f} us/call vs seed arithmetic {seed * 1e6:.2f} us/call"


def test_set_model_info_from_model_live():
    mx = pytest.importorskip("mlx.core")
    from omlx_profiles.live.build import build_model

    cfg = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, intermediate_size=64, vocab_size=512,
               num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=10000.0,
               tie_word_embeddings=False)
    model = build_model(cfg, "bf16")
    m = MemoryMonitor(None, eviction_enabled=False, backend="cpu", mlx_version=mx.__version__, max_memory=2**34)
    compat.set_model_info_from_model(m, model)
    assert m.has_model_info()
    assert m.estimate_prompt_kv_bytes(300) == 2 * 2 * 512 * 2 * 32 * 2  # 2 layers x K,V x 512 rows x 2 heads x 32 x bf16
    compat.set_model_info_from_model(m, object())  # unreadable: left without model info, no exception
    assert not m.has_model_info()


def test_warm_up_model_runs_a_prefill_and_frees_it():
    """The CUDA estimate is for a warmed-up process (benchmarks/cuda/README.md, "Traced commits"):
    ``warm_up_model`` must run a real prefill through the live model and leave nothing allocated."""
    mx = pytest.importorskip("mlx.core")
    import gc

    from omlx_profiles.live.build import build_model

    cfg = dict(model_type="llama", num_hidden_layers=2, hidden_size=64, intermediate_size=64, vocab_size=512,
               num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=10000.0,
               tie_word_embeddings=False)
    model = build_model(cfg, "bf16")
    w = model.model.embed_tokens.weight
    before_sum = float(w.astype(mx.float32).sum())
    gc.collect()
    mx.clear_cache()
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    seconds = compat.warm_up_model(model, 64)
    assert seconds > 0
    assert mx.get_peak_memory() > base + 64 * 2 * 2 * 2 * 32 * 2  # at least the 2-layer KV of 64 rows was built
    assert mx.get_active_memory() == base  # the cache and activations are gone
    assert float(model.model.embed_tokens.weight.astype(mx.float32).sum()) == before_sum
    for bad in (1, 0, True, 2.5):
        with pytest.raises(ValueError, match="tokens"):
            compat.warm_up_model(model, bad)
