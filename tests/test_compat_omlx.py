"""The oMLX facade as oMLX uses it (issue 16): oMLX's own exception, DSA / rotating-only / TurboQuant model
info, config-only models, the newer oMLX APIs, and the KV numbers checked against mlx-lm's live caches.

Written from oMLX's public interface and the behaviour issue 16 describes; the truth for every byte count
is a live mlx-lm cache (tiny dims, MLX CPU backend) or oMLX's / mlx-vlm's source where nothing can be
measured here (TurboQuant), and those tests say so.
"""
from __future__ import annotations

import json
import sys
import textwrap
import types

import pytest

from omlx_profiles import compat
from omlx_profiles.compat import (MemoryMonitor, PrefillMemoryExceededError, collect_kv_layer_specs,
                                  estimate_mla_kv_bytes_per_token, make_prefill_memory_profile,
                                  raise_if_prefill_exceeds, set_model_info_from_model)
from omlx_profiles.compat.read import dsa_indexer_row_elements, installed_mlx_lm
from omlx_profiles.registry import load_registry

REG = load_registry([])
CONFIGS = __import__("pathlib").Path(__file__).resolve().parent / "configs"


def monitor(backend: str = "metal") -> MemoryMonitor:
    return MemoryMonitor(None, eviction_enabled=False, backend=backend, mlx_version="0.32.4", max_memory=2**36)


def guard(m, limit=1, **kw):
    args = dict(prefill_memory_guard=True, hard_limit_bytes=limit, current_usage_bytes=0, prefill_step_size=2048,
                num_prompt_tokens=8192, request_id="req-7")
    args.update(kw)
    raise_if_prefill_exceeds(m, **args)


# --------------------------------------------------------------------------------------------------
# oMLX's exception class
# --------------------------------------------------------------------------------------------------

FAKE_EXCEPTIONS = textwrap.dedent('''
    class OMLXError(Exception):
        def __init__(self, message, details=None):
            super().__init__(message)
            self.message = message
            self.details = details or {}

    class OMLXMemoryError(OMLXError):
        pass

    class PrefillMemoryExceededError(OMLXMemoryError):
        def __init__(self, message, request_id=None, estimated_bytes=None, limit_bytes=None, details=None):
            super().__init__(message, details)
            self.request_id = request_id
            self.estimated_bytes = estimated_bytes
            self.limit_bytes = limit_bytes

    def http_status(exc):
        """What oMLX's server does: its own class is a 400, anything else a 500."""
        return 400 if isinstance(exc, PrefillMemoryExceededError) else 500
''')


@pytest.fixture
def fake_omlx(tmp_path, monkeypatch):
    """An ``omlx`` package layout on sys.path whose ``omlx.exceptions`` has oMLX's exception class."""
    pkg = tmp_path / "omlx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "exceptions.py").write_text(FAKE_EXCEPTIONS)
    for name in [n for n in sys.modules if n == "omlx" or n.startswith("omlx.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    import omlx.exceptions

    yield omlx.exceptions
    for name in [n for n in sys.modules if n == "omlx" or n.startswith("omlx.")]:
        del sys.modules[name]  # not through monkeypatch: its undo would put them back


def _llama(backend="cpu"):
    m = monitor(backend)
    m.set_profile(REG.resolve("llama-3.1-8b").profile)
    return m


def test_guard_raises_omlx_own_exception_when_importable(fake_omlx):
    m = _llama()
    with pytest.raises(fake_omlx.PrefillMemoryExceededError) as ei:
        guard(m)
    e = ei.value
    assert isinstance(e, PrefillMemoryExceededError)  # ours too: callers of the facade catch either
    assert fake_omlx.http_status(e) == 400  # oMLX's server answers 400, not a 500
    assert e.request_id == "req-7" and e.limit_bytes == 1 and e.estimated_bytes > 1
    assert "Prefill would require" in e.message and "KV+SDPA" in e.message and e.message == str(e)
    assert e.details == {}


def test_guard_raises_ours_without_omlx(monkeypatch):
    monkeypatch.setitem(sys.modules, "omlx", None)  # "import omlx" fails
    monkeypatch.setitem(sys.modules, "omlx.exceptions", None)
    m = _llama()
    with pytest.raises(PrefillMemoryExceededError) as ei:
        guard(m)
    assert type(ei.value) is PrefillMemoryExceededError


def test_guard_fits_and_noops():
    m = _llama()
    guard(m, limit=2**40)  # fits
    guard(m, prefill_memory_guard=False)
    guard(None)
    guard(m, cached_tokens=8192)  # everything cached
    guard(monitor())  # no model info: a logged no-op


# --------------------------------------------------------------------------------------------------
# caches, as mlx-lm builds them
# --------------------------------------------------------------------------------------------------


def test_collect_kv_layer_specs_on_mlx_lm_caches():
    c = pytest.importorskip("mlx_lm.models.cache")
    caches = ([c.KVCache(), c.KVCache()] + [c.RotatingKVCache(max_size=1024) for _ in range(3)]
              + [c.RotatingKVCache(max_size=512), c.ArraysCache(size=2), c.CacheList(c.KVCache(), c.KVCache())])
    assert collect_kv_layer_specs(caches) == (4, [(1, 512), (3, 1024)], 1)
    assert collect_kv_layer_specs(None) == (0, [], 0)
    assert collect_kv_layer_specs(42) == (0, [], 0)


def _live(stem: str, **shrink):
    pytest.importorskip("mlx_lm")
    from omlx_profiles.live.build import build_model, shrink_config

    cfg = shrink_config(json.loads((CONFIGS / f"{stem}.json").read_text()), **shrink)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MoE models run in fp32 on MLX's CPU backend: build_model says so
        return cfg, build_model(cfg, "bf16")


def _width(model) -> int:
    """Bytes per element the live model's caches hold (fp32 for MoE models on the CPU backend)."""
    return 4 if "float32" in str(model.omlx_build_info.dtype) else 2


def _nbytes(c) -> int:
    if hasattr(c, "caches"):
        return sum(_nbytes(x) for x in c.caches)
    if hasattr(c, "cache") and isinstance(c.cache, list):
        return sum(a.nbytes for a in c.cache if a is not None)
    return 0 if getattr(c, "keys", None) is None else c.nbytes


def _prefill(model, tokens: int, step: int) -> tuple[int, int]:
    """generate_step's prompt loop on the live model (lazily: shapes only): (largest cache total seen after
    any call, cache total at the end)."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    prompt = (mx.arange(tokens, dtype=mx.int32) * 31 + 7) % 256
    most = 0
    while prompt.shape[0] > 1:
        n = min(step, prompt.shape[0] - 1)
        model(prompt[:n][None], cache=cache)
        prompt = prompt[n:]
        most = max(most, sum(_nbytes(x) for x in cache))
    model(prompt[None], cache=cache)
    end = sum(_nbytes(x) for x in cache)
    return max(most, end), end


def test_dsa_more_kv_caches_than_layers_is_accepted_and_matches_the_live_cache():
    """DeepSeek-V3.2 / GLM DSA: a CacheList of the latent cache and the indexer cache per layer, so oMLX
    passes num_kv_cache_layers > num_layers. The facade accepts it and prices the KV the live caches hold."""
    cfg, model = _live("deepseek-v3.2", layers="period+1")
    cache = model.make_cache()
    full, rot, state = collect_kv_layer_specs(cache)
    layers = len(cache)
    assert full > layers and not rot and not state
    w = _width(model)
    bpt = estimate_mla_kv_bytes_per_token(cfg, cache, w)
    m = monitor("cpu")
    m.set_model_info(num_layers=layers, num_kv_heads=cfg["num_attention_heads"], head_dim=cfg["qk_nope_head_dim"]
                     + cfg["qk_rope_head_dim"], dtype_size=w, num_attention_heads=cfg["num_attention_heads"],
                     num_kv_cache_layers=full, compute_dtype_size=w, kv_bytes_per_token=bpt)
    assert m.has_model_info() and m._num_kv_cache_layers == full
    for n in (300, 1000):
        most, end = _prefill(model, n, 256)
        est = m.estimate_prompt_kv_bytes(n)
        assert end <= est <= end * 1.01 + 256 * bpt, (n, end, est)
        assert m.estimate_prefill_peak_bytes(n, 256) >= est - 256 * bpt > 0


def test_dsa_indexer_value_width_follows_installed_mlx_lm():
    assert dsa_indexer_row_elements(128, (0, 31, 3)) == 128  # 0.31.x: zero-width values
    assert dsa_indexer_row_elements(128, (0, 32, 2)) == 256  # 0.32.x: values as wide as the keys
    assert dsa_indexer_row_elements(128, None) == 256 or installed_mlx_lm() is not None
    # the live cache of the installed mlx-lm is the truth
    cfg, model = _live("deepseek-v3.2", layers="period+1")
    cache = model.make_cache()
    bpt = estimate_mla_kv_bytes_per_token(cfg, cache, _width(model))
    _, end = _prefill(model, 257, 256)  # 257 tokens: 512 rows in every cache (two 256-row steps)
    assert bpt * 512 == end


def test_rotating_only_model_kv_is_window_bounded_like_mlx_lm():
    """num_kv_cache_layers=0 with rotating_layer_specs: a sliding-window-only model. Its resident KV stops
    growing at the window; during a chunk a RotatingKVCache holds window-1+chunk rows (measured here on
    mlx-lm's own RotatingKVCache)."""
    mx = pytest.importorskip("mlx.core")
    from mlx_lm.models.cache import RotatingKVCache

    layers, heads, dim, window, chunk = 3, 2, 32, 128, 64
    m = monitor("cpu")
    m.set_model_info(num_layers=layers, num_kv_heads=heads, head_dim=dim, num_attention_heads=4,
                     num_kv_cache_layers=0, rotating_layer_specs=[(layers, window)])
    assert m.has_model_info() and m._num_kv_cache_layers == 0
    caches = [RotatingKVCache(max_size=window) for _ in range(layers)]
    most = 0
    fed = 0
    while fed < 1000:
        kv = mx.zeros((1, heads, chunk, dim), dtype=mx.bfloat16)
        for c in caches:
            c.update_and_fetch(kv, kv)
        fed += chunk
        most = max(most, sum(c.nbytes for c in caches))
    assert most == layers * (window - 1 + chunk) * heads * dim * 2 * 2
    est = m.estimate_resident_kv_bytes(1000, chunk_tokens=chunk)
    assert most <= est <= most * 1.01
    assert m.estimate_resident_kv_bytes(100_000, chunk_tokens=chunk) == est  # bounded by the window
    assert m.estimate_prefill_peak_bytes(100_000, chunk) >= 0


def test_turboquant_width_prices_the_prefill_as_omlx_runs_it():
    """A fractional dtype_size (TurboQuant). oMLX's scheduler prefills a fresh request at the model's
    width and converts the cache at the end (its source: "Fresh TurboQuant requests run fp16 during the
    cold prefill loop"), and a restored TurboQuant prefix is attended through mlx-vlm's fp32 scores or a
    dequantized fp32 copy. Nothing here measures TurboQuant: these are the bounds that source implies."""
    full, tq = monitor(), monitor()
    full.set_model_info(40, 8, 128, dtype_size=2, num_attention_heads=32)
    q = 4 / 8 + 2 / 128
    tq.set_model_info(40, 8, 128, dtype_size=q, num_attention_heads=32)
    assert tq.estimate_block_memory(64) == 64 * 40 * 8 * 128 * 2 * q  # blocks are stored narrow
    for n in (8192, 65536):
        p_full, p_tq = full.estimate_prefill_peak_bytes(n, 2048), tq.estimate_prefill_peak_bytes(n, 2048)
        kv = full.estimate_prompt_kv_bytes(n)
        assert p_tq >= p_full  # a fresh prefill is not narrower
        assert p_tq >= kv + kv * q / 2  # the full-width cache and its quantized copy at the conversion
    # a restored prefix: the suffix attends to the quantized prefix through fp32 scores
    assert tq.estimate_prefill_peak_bytes(2048, 2048, cached_tokens=30000) >= \
        full.estimate_prefill_peak_bytes(2048, 2048, cached_tokens=30000) + 3 * 32 * 2048 * 32048 * 4


# --------------------------------------------------------------------------------------------------
# models oMLX hands over
# --------------------------------------------------------------------------------------------------


def test_config_only_models_object_dict_nested_and_args():
    """DFlash / VLM targets expose model.config (object or dict, LM dims under text_config) or model.args;
    the facade reads them the way oMLX does and never needs a cache probe for it."""
    lm = types.SimpleNamespace(num_hidden_layers=40, num_key_value_heads=2, num_attention_heads=16, head_dim=256)
    vision_top = types.SimpleNamespace(num_hidden_layers=27, num_attention_heads=16, text_config=lm)
    cases = [types.SimpleNamespace(config=vision_top, dtype="bfloat16"),
             types.SimpleNamespace(config={"model_type": "qwen3_5_moe", "text_config": vars(lm)}),
             types.SimpleNamespace(args=lm)]
    for model in cases:
        m = monitor()
        set_model_info_from_model(m, model)
        assert (m._num_layers, m._num_kv_heads, m._num_attention_heads, m._head_dim) == (40, 2, 16, 256)
        assert m.estimate_prefill_peak_bytes(50_000, 2048) > m.estimate_prompt_kv_bytes(50_000) > 0
    gpt = types.SimpleNamespace(config=types.SimpleNamespace(n_layer=12, n_head=12, n_embd=768))
    m = monitor()
    set_model_info_from_model(m, gpt)
    assert (m._num_layers, m._num_kv_heads, m._head_dim) == (12, 12, 64)
    # nothing to read: left without model info, nothing raised
    for bad in (object(), types.SimpleNamespace(config={"text_config": {"num_hidden_layers": 4}})):
        m = monitor()
        set_model_info_from_model(m, bad)
        assert not m.has_model_info()


def test_config_only_model_with_a_full_config_matches_the_live_cache():
    """A config-only model whose config is a complete one (an mlx-vlm target, say): the facade builds the
    config's whole profile, so a sliding-window model's KV is what mlx-lm's caches hold."""
    cfg, model = _live("gemma-3-4b-it", layers=6, q_heads=4)
    target = types.SimpleNamespace(config=json.loads(json.dumps(cfg)))
    m = monitor("cpu")
    set_model_info_from_model(m, target)
    assert m.profile is not None and m.profile.source.startswith("model.config")
    for n, step in ((1000, 256), (3000, 2048)):
        most, end = _prefill(model, n, step)
        assert m.profile and m.estimate_resident_kv_bytes(n, chunk_tokens=step) >= most
    _, end = _prefill(model, 3000, 2048)
    assert m.estimate_prompt_kv_bytes(3000) == end


def test_make_prefill_memory_profile_and_set_model_info_use_the_whole_profile():
    cfg, model = _live("gpt-oss-20b", layers=4)
    strategy = make_prefill_memory_profile(cfg, compute_dtype_size=_width(model), backend="cpu")
    assert strategy is not None
    most, _ = _prefill(model, 2000, 512)
    assert strategy.estimate_resident_kv_bytes(2000, chunk_tokens=512) >= most
    assert strategy.estimate_prefill_transient_bytes(512, 2000) > 0
    m = monitor("cpu")
    m.set_model_info(4, 8, 64, prefill_memory_profile=strategy)
    assert m.profile is strategy.profile
    assert make_prefill_memory_profile({"model_type": "no-such-model"}, compute_dtype_size=2) is None
    assert make_prefill_memory_profile(None, compute_dtype_size=2) is None


def test_a_foreign_prefill_memory_profile_is_a_floor():
    class Big:
        def estimate_resident_kv_bytes(self, n, *, chunk_tokens=1):
            return 10**12

        def estimate_prefill_transient_bytes(self, q, kv):
            return 10**11

    m = monitor()
    m.set_model_info(32, 8, 128, num_attention_heads=32, prefill_memory_profile=Big())
    assert m.estimate_prefill_peak_bytes(4096, 2048) >= 10**12 + 10**11
    assert m.estimate_resident_kv_bytes(4096, chunk_tokens=2048) >= 10**12


def test_fixed_state_bytes_and_ane_transient():
    m = monitor()
    m.set_model_info(32, 8, 128, num_attention_heads=32)
    base_res, base_peak = m.estimate_resident_kv_bytes(4096, chunk_tokens=2048), m.estimate_prefill_peak_bytes(4096, 2048)
    assert m.fixed_state_bytes == 0
    m.set_fixed_state_bytes(10**8)
    assert m.fixed_state_bytes == 10**8
    assert m.estimate_resident_kv_bytes(4096, chunk_tokens=2048) == base_res + 10**8
    m.set_model_info(32, 8, 128, num_attention_heads=32, ane_prefill_transient_bytes=12345)
    assert m.fixed_state_bytes == 0  # a new model is measured again
    assert m.estimate_prefill_peak_bytes(4096, 2048) == base_peak + 12345
    with pytest.raises(ValueError):
        m.set_model_info(32, 8, 128, num_kv_cache_layers=-1)


def test_repr_names_used_memory():
    r = repr(monitor())
    assert r.startswith("MemoryMonitor(") and "max_kv_cache=" in r and "used=" in r


def test_module_names_omlx_imports():
    for name in ("MemoryMonitor", "MemoryInfo", "PrefillMemoryExceededError", "raise_if_prefill_exceeds",
                 "set_model_info_from_model", "estimate_mla_kv_bytes_per_token", "estimate_unfused_sdpa_call_bytes",
                 "register_tiled_prefill_head_dim", "collect_kv_layer_specs", "make_prefill_memory_profile",
                 "_SDPA_FALLBACK_SCORE_DTYPE_SIZE", "_SDPA_FULL_SUPPORTED_HEAD_DIMS", "_SDPA_VECTOR_SUPPORTED_HEAD_DIMS",
                 "_SDPA_VECTOR_QUERY_TOKEN_THRESHOLD", "mx"):
        assert name in compat.__all__, name
        getattr(compat, name)
    # newer oMLX's keyword options are accepted
    compat.register_tiled_prefill_head_dim(384, min_kv_len=8192, kv_tile=1024, min_query_len=16,
                                           supports_array_mask=True)
    from omlx_profiles.peak.kernels import unregister_tiled

    unregister_tiled(384)
