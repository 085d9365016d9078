"""The live mlx-lm harness reproduces mlx-lm's cache bytes, layouts and peaks.

Expected byte counts are written out from the formulas of reference/mlxlm_caches.md (mlx-lm
0.32.2), not computed by the code under test. Real configs come from the shared folder beside
the repository; tests skip when it or mlx-lm is absent.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("mlx_lm")

from omlx_profiles.live.build import (  # noqa: E402
    build_model,
    layer_kinds,
    load_local,
    min_layers,
    save_local,
    shrink_config,
)
from omlx_profiles.live.measure import measure_prefill_peak  # noqa: E402
from omlx_profiles.live.probe import (  # noqa: E402
    cache_report,
    cache_totals,
    probe_layout,
    run_schedule,
)

CONFIGS = Path(__file__).resolve().parent / "configs"  # copy of shared/configs
ALL_CONFIGS = sorted(CONFIGS.glob("*.json")) if CONFIGS.is_dir() else []


def load(name: str) -> dict:
    path = CONFIGS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} absent")
    return json.loads(path.read_text())


def rows_kv(n: int) -> int:
    """KVCache rows after one call of n tokens, or generate_step with a 256-multiple step."""
    return 256 * math.ceil(n / 256)


def build(name: str, **shrink) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU GatherMM fp32 promotion warning
        return build_model(shrink_config(load(name), **shrink))


# --- expected bytes per layer, from the catalogue's formulas ----------------------------


def llama_1b(sched: str, n: int) -> list[int]:
    # llama-3.2-1b: n_kv 8, head_dim 64, bf16; 2 layers kept.
    return [rows_kv(n) * 2 * 8 * 64 * 2] * 2


def gemma3_4b(sched: str, n: int) -> list[int]:
    # gemma-3-4b-it: the text_config omits heads/head_dim, so mlx-lm's defaults apply:
    # n_kv 4 (gemma3 wrapper), head_dim 256 (gemma3_text), pattern 6, window 1024; bf16.
    row = 2 * 4 * 256 * 2
    if n == 1:  # one single-token call: a Rotating cache grows by min(256, W - 0) rows
        sliding = 256
    elif sched == "direct":  # the first multi-token call keeps all n rows
        sliding = n
    else:  # generate_step with n-1 < W: min(W, n-1+256)
        sliding = min(1024, n - 1 + 256)
    return [sliding * row] * 5 + [rows_kv(n) * row]


def gpt_oss_20b(sched: str, n: int) -> list[int]:
    # gpt-oss-20b: sliding(128) then full; n_kv 8, head_dim 64; MoE → fp32 on CPU.
    row = 2 * 8 * 64 * 4
    if n == 1:
        sliding = min(256, 128)
    elif sched == "direct":
        sliding = n
    else:  # n-1 = 256 > W: the 1-token call trims the buffer to W rows
        sliding = 128
    return [sliding * row, rows_kv(n) * row]


def deepseek_v32(sched: str, n: int) -> list[int]:
    # CacheList(MLA latent kv_lora_rank 512 + rope 64, indexer keys 128 + zero values 128).
    return [rows_kv(n) * ((512 + 64) + 2 * 128) * 2]


CASES = {
    "llama-3.2-1b-instruct": (dict(layers=2, q_heads=8), llama_1b),
    "gemma-3-4b-it": (dict(layers="period", q_heads=4), gemma3_4b),
    "gpt-oss-20b": (dict(layers="period", q_heads=8), gpt_oss_20b),
    "deepseek-v3.2": (dict(layers=1, q_heads=4), deepseek_v32),
}


# pytest-xdist (--dist loadgroup): the tests that share the module's built models run on one worker
SAME_MODELS = pytest.mark.xdist_group("live_harness_models")


@pytest.fixture(scope="module")
def models() -> dict:
    return {}


def get_model(models: dict, name: str):
    if name not in models:
        models[name] = build(name, **CASES[name][0])
    return models[name]


@SAME_MODELS
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("sched", ["generate", "direct"])
@pytest.mark.parametrize("n", [1, 257])
def test_resident_bytes_match_formulas(models, name, sched, n):
    model = get_model(models, name)
    cache = run_schedule(model, n, sched)
    report = cache_report(cache)
    assert [r["nbytes"] for r in report] == CASES[name][1](sched, n)
    assert cache_totals(report)["nbytes"] == sum(c.nbytes for c in cache)


@SAME_MODELS
def test_chunked_generate_and_prefix_rows(models):
    """Chunks of 128 still give 256-aligned rows; a prefix hit then slices (catalogue rule)."""
    model = get_model(models, "llama-3.2-1b-instruct")
    cache = run_schedule(model, 257, "generate", prefill_step=128)
    assert cache[0].keys.shape[2] == 512
    # 300 tokens already cached (rows 512, offset 300), then 300 more in one chunk + 1:
    # prev 300 is not 256-aligned → capacity cut to 300, then +256*ceil(299/256) = 812 rows.
    cache = run_schedule(model, 300, "generate")
    run_schedule(model, 300, "generate", cache=cache)
    assert cache[0].keys.shape[2] == 300 + 512 and cache[0].offset == 600


def test_gated_deltanet_state_is_fp32_in_bf16_model():
    # qwen3.5-27b: 3 linear layers + 1 full; conv (K-1)*(2*nk*dk + nv*dv)*s, ssm nv*dv*dk*4.
    model = build("qwen3.5-27b", layers="period", q_heads=4)
    report = cache_report(run_schedule(model, 17, "direct"))
    conv = 3 * (2 * 16 * 128 + 48 * 128) * 2
    ssm = 48 * 128 * 128 * 4
    assert [r["nbytes"] for r in report] == [conv + ssm] * 3 + [256 * 2 * 4 * 256 * 2]
    assert cache_totals(report)["by_dtype"] == {"bfloat16": 3 * conv + 256 * 4096,
                                                "float32": 3 * ssm}


@SAME_MODELS
def test_quantized_kv_keeps_capacity(models):
    model = get_model(models, "llama-3.2-1b-instruct")
    cache = run_schedule(model, 257, "generate", kv_bits=8, kv_group_size=64,
                         quantized_kv_start=0)
    # K and V: packed 8-bit values + scales and biases in the activation dtype (bf16 here)
    row = 2 * 8 * (64 * 8 // 8 + 2 * (64 // 64) * 2)
    assert [type(c).__name__ for c in cache] == ["QuantizedKVCache"] * 2
    assert sum(c.nbytes for c in cache) == 2 * 512 * row


@SAME_MODELS
@pytest.mark.parametrize("name", ["llama-3.2-1b-instruct", "gemma-3-4b-it"])
def test_prefill_peak_covers_cache(models, name):
    model = get_model(models, name)
    r = measure_prefill_peak(model, 300, prefill_step=128)
    assert [row["q_len"] for row in r["rows"]] == [128, 128, 43, 1]
    assert r["peak_over_baseline"] >= r["cache_nbytes"] > 0
    assert r["peak_over_baseline"] == max(row["peak_over_baseline"] for row in r["rows"])
    assert r["cache_held"] >= r["cache_nbytes"]
    assert r["backend"] in ("cpu", "metal", "cuda") and r["mlx_version"]


@SAME_MODELS
def test_prefill_peak_with_prefix_cache(models):
    model = get_model(models, "llama-3.2-1b-instruct")
    r = measure_prefill_peak(model, 600, prefill_step=2048, cached=300)
    assert r["cache_nbytes_before"] == llama_1b("generate", 300)[0] * 2
    assert [(row["q_len"], row["kv_len"]) for row in r["rows"]] == [(299, 599), (1, 600)]
    assert r["cache_nbytes"] == 2 * 812 * 2 * 8 * 64 * 2
    assert r["peak_over_baseline"] > 0


def test_last_layer_is_dead_in_generate_prefill_chunks():
    """generate_step evaluates only cache states: a 1-layer model never computes attention in
    a prefill chunk, so its chunk transient lacks the (8 heads x 512 x 512) bf16 scores."""
    cfg = load("llama-3.2-1b-instruct")
    one, two = (measure_prefill_peak(build_model(shrink_config(cfg, layers=n, q_heads=8)), 513,
                                     prefill_step=512)["rows"][0] for n in (1, 2))
    scores = 8 * 512 * 512 * 2
    assert (two["peak"] - two["active_before"]) - (one["peak"] - one["active_before"]) > scores
    assert shrink_config(load("gemma-3-4b-it"), layers="period+1")["text_config"][
        "num_hidden_layers"] == 7
    with pytest.raises(ValueError):  # a prefix without gemma3's global layer
        shrink_config(load("gemma-3-4b-it"), layers=3)


@SAME_MODELS
def test_probe_layout_reports_row_shapes(models):
    layout = probe_layout(get_model(models, "gemma-3-4b-it"))
    assert [e["class"] for e in layout] == ["RotatingKVCache"] * 5 + ["KVCache"]
    assert layout[0]["max_size"] == 1024
    assert layout[5]["keys"]["row_shape"] == [4, 256]
    mla = probe_layout(get_model(models, "deepseek-v3.2"))[0]
    main, indexer = mla["children"]
    assert (main["keys"]["row_shape"], main["values"]["row_shape"]) == ([1, 512], [1, 64])
    assert (indexer["keys"]["row_shape"], indexer["values"]["row_shape"]) == ([1, 128], [1, 128])


@SAME_MODELS
def test_load_local_round_trip(models, tmp_path):
    cfg = shrink_config(load("llama-3.2-1b-instruct"), layers=2, q_heads=8)
    model = build_model(cfg)
    loaded, _ = load_local(save_local(model, cfg, tmp_path / "m"))
    assert [c.nbytes for c in run_schedule(loaded, 257, "generate")] == llama_1b("generate", 257)
    with pytest.raises(FileNotFoundError):
        load_local(tmp_path / "nothing-here")


def _strip(layout: list[dict]) -> list[dict]:
    """Per-token layout only: class, bounds, row shapes, dtypes, constant-state shapes."""
    out = []
    for e in layout:
        e = {k: v for k, v in e.items() if k != "index"}
        for k in ("keys", "values"):
            if isinstance(e.get(k), dict):
                e[k] = {kk: e[k][kk] for kk in ("row_shape", "dtype")}
        if "children" in e:
            e["children"] = _strip(e["children"])
        out.append(e)
    return out


def _layouts(config: dict) -> tuple[list, list, list]:
    """Cache layouts of the full-size, the shrunk and the one-period models, all built lazily."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        big = build_model(config, lazy=True)
        # Same dtype for all three: a cut stack may lose its MoE layers and with them the
        # CPU GatherMM float32 promotion (deepseek-v2-lite's first layer is dense).
        dtype = big.omlx_build_info.dtype
        full = _strip(probe_layout(big, evaluate=False))
        small = _strip(probe_layout(build_model(shrink_config(config), dtype, lazy=True), evaluate=False))
        cut = _strip(probe_layout(
            build_model(shrink_config(config, layers="period"), dtype, lazy=True), evaluate=False))
    return full, small, cut


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: p.stem)
def test_shrink_keeps_cache_layout(path):
    """Full-size config vs shrunk config, both built lazily: nothing is allocated or computed,
    yet every cache entry's class, window, row shape and dtype is known and must agree."""
    config = json.loads(path.read_text())
    full, small, cut = _layouts(config)
    assert small == full
    assert cut == full[: len(cut)]
    assert len(layer_kinds(shrink_config(config, layers="period"))) == min_layers(config)
    assert set(layer_kinds(shrink_config(config, layers="period"))) == set(layer_kinds(config))


def _derived_configs() -> dict:
    """Model types with no shared config: direct text configs cut out of the wrappers, a
    sliding-window ministral3 (bare and wrapped), and two hand-written checkpoints whose
    cache figures agree with the catalogue (Llama-4-Scout, Qwen3.5-35B-A3B shapes)."""
    if not ALL_CONFIGS:
        return {}
    cfg = {p.stem: json.loads(p.read_text()) for p in ALL_CONFIGS}
    m3 = dict(cfg["devstral-small-2-24b-instruct"]["text_config"], sliding_window=4096,
              layer_types=(["sliding_attention"] * 3 + ["full_attention"]) * 10)
    return {
        "gemma3_text": cfg["gemma-3-27b-it"]["text_config"],
        "gemma3_text-defaults": cfg["gemma-3-4b-it"]["text_config"],
        "lfm2": cfg["lfm2.5-vl-1.6b"]["text_config"],
        "ministral3-swa": m3,
        "mistral3-swa": {**cfg["devstral-small-2-24b-instruct"], "text_config": m3},
        "qwen3_5-bare": dict(cfg["qwen3.5-27b"]["text_config"], model_type="qwen3_5"),
        "qwen3_5_moe": {"model_type": "qwen3_5_moe", "text_config": {
            "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
            "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
            "linear_num_key_heads": 16, "linear_num_value_heads": 32,
            "linear_key_head_dim": 128, "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "num_experts": 256,
            "num_experts_per_tok": 8, "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512, "vocab_size": 248320,
            "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                                "partial_rotary_factor": 0.25}}},
        "llama4": {"model_type": "llama4", "text_config": {
            "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
            "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "attention_chunk_size": 8192, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "num_local_experts": 16, "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 1, "vocab_size": 202048, "rope_theta": 500000.0,
            "rope_scaling": None, "use_qk_norm": True, "attention_bias": False,
            "max_position_embeddings": 10485760, "rms_norm_eps": 1e-5}},
    }


DERIVED = _derived_configs()


@pytest.mark.parametrize("name", sorted(DERIVED))
def test_shrink_keeps_cache_layout_derived(name):
    config = DERIVED[name]
    full, small, cut = _layouts(config)
    assert small == full and cut == full[: len(cut)]
    if name == "mistral3-swa":  # the wrapper has no make_cache: sliding layers get KVCache
        assert {e["class"] for e in full} == {"KVCache"}
    if name == "llama4":
        assert [e["class"] for e in cut] == ["ChunkedKVCache"] * 3 + ["KVCache"]
        assert cut[0]["chunk_size"] == 8192


def test_q_heads_refused_where_it_is_a_cache_dim():
    with pytest.raises(ValueError):
        shrink_config(load("deepseek-v2-lite"), q_heads=4)
    with pytest.raises(ValueError):
        shrink_config(load("llama-3.2-1b-instruct"), q_heads=12)  # not a multiple of n_kv 8


def test_package_import_does_not_import_mlx():
    code = ("import sys, omlx_profiles.live; "
            "assert not any(m == 'mlx' or m.startswith('mlx.') or m.startswith('mlx_lm') "
            "for m in sys.modules), sorted(m for m in sys.modules if 'mlx' in m)")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)
