"""Public configs of recipe-covered types, at their real dims (the six models of issue 13 among them).

* ``extract`` resolves each through the module recipe, and the full-size mlx-lm model (built lazily:
  nothing allocated) has exactly the caches the extraction says - class, KV heads, key/value widths,
  windows, entry count (``live.verify.verify_profile``); the resident KV at N=256 equals a hand formula.
* Byte for byte at the real dims: the full-size model is fed N in {1, 255, 256, 257, 3000} tokens through
  generate_step's prompt loop (prefill step 256) and one direct call WITHOUT evaluating anything
  (``live.lazy_replay``): each cache's ``nbytes`` is the size of the buffers mlx-lm allocated, known from
  the lazy graph, and must equal ``kv_report`` per layer. MLX's active memory must stay flat (nothing was
  computed: a 30B-750B model never fits here).

The configs (``tests/module_configs/``, sources in its SOURCES.tsv) are public copies found with the
search tools; what each copy trims, completes or assembles is said there.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from omlx_profiles.extraction.from_config import extract_config
from omlx_profiles.kv.bytes import kv_report

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

import mlx.core as mx  # noqa: E402

from omlx_profiles.live.build import build_model  # noqa: E402
from omlx_profiles.live.lazy_replay import replay_lazily  # noqa: E402
from omlx_profiles.live.probe import cache_report  # noqa: E402
from omlx_profiles.live.verify import verify_profile  # noqa: E402

pytestmark = pytest.mark.live
DIR = Path(__file__).resolve().parent / "module_configs"
KB = 1024
# name: (module, layers with a cache, bf16 bytes per token of all layers (hand formula), full-size build is MoE)
CASES = {
    "minimax-m2.7": ("minimax", 62, 62 * 2 * 8 * 128 * 2),
    # multi-head: 32 KV heads x 2560 // 32 = 80, fp16 (the config's dtype; the test reads bf16: same 2 bytes)
    "phi-2": ("phi", 32, 32 * 2 * 32 * 80 * 2),
    # per-layer KV heads 4,4,4, 5 x7, 6 x8, 7 x6, 8 x4 (sum 169) of head_dim 64
    "openelm-1.1b-instruct": ("openelm", 28, 169 * 2 * 64 * 2),
    "qwen3-vl-8b-instruct": ("qwen3_vl", 36, 36 * 2 * 8 * 128 * 2),
    "qwen3-vl-32b-instruct": ("qwen3_vl", 64, 64 * 2 * 8 * 128 * 2),
    # 48 sliding (window 4096) + 16 full layers, all 8 KV heads x 128 (every layer holds 256 rows at N=256)
    "olmo-3.1-32b-instruct": ("olmo3", 64, 64 * 2 * 8 * 128 * 2),
    "exaone-4.0-32b": ("exaone4", 64, 64 * 2 * 8 * 128 * 2),
    # 25 sliding layers: 8 KV heads x 256; 5 full layers: attention_k_eq_v -> 2 global KV heads x 512
    "gemma-4-26b-a4b-it": ("gemma4", 30, 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2),
    # MLA latent (kv_lora_rank 512 keys + qk_rope_head_dim 64 values) + DSA indexer (128 keys + 128 zero values)
    "glm-5": ("glm_moe_dsa", 78, 78 * ((512 + 64) + (128 + 128)) * 2),
    # every 4th layer KVCache, the others ChunkedKVCache(8192): all 8 KV heads x 128
    "llama-4-scout-17b-16e": ("llama4", 48, 48 * 2 * 8 * 128 * 2),
    # expanded MLA: 40 heads of keys 64 + 32 and values hidden // heads = 64
    "minicpm3-4b": ("minicpm3", 62, 62 * 40 * ((64 + 32) + 2560 // 40) * 2),
    # MLA latent 512 + k_pe 64
    "kimi-k2.x-kimi_k25": ("kimi_k25", 61, 61 * (512 + 64) * 2),
}
#: modules whose extraction is still a hand-written rule (to_layers), not their recipe (llama4 is a recipe now)
HAND_WRITTEN: set[str] = set()
ISSUE_13_SIX = {"olmo-3.1-32b-instruct", "exaone-4.0-32b", "gemma-4-26b-a4b-it", "glm-5", "minimax-m2.7",
                "qwen3-vl-32b-instruct"}
NS = (1, 255, 256, 257, 3000)
DT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _load(name: str):
    cfg = json.loads((DIR / f"{name}.json").read_text(encoding="utf-8"))
    ext = extract_config(cfg, source=f"{name}.json")
    return cfg, ext


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_config_resolves_and_matches_the_full_size_live_model(name):
    module, layers, per_token = CASES[name]
    cfg, ext = _load(name)
    assert ext.payload["mlx_model_type"] == module
    assert ("module recipe" in ext.provenance["layers"]) == (module not in HAND_WRITTEN)
    p = ext.profile()
    assert verify_profile(p, config=cfg) == []
    rep = kv_report(p, 256, schedule="direct", dtype="bf16")
    assert sum(l.nbytes for l in rep.layers) == 256 * per_token
    assert sum(1 for l in rep.layers if l.nbytes) == layers


def _leaf_dtypes(report: list[dict]) -> set[str]:
    out = set()
    for r in report:
        for leaf in r.get("children") or [r]:
            out |= {a["dtype"] for a in leaf["arrays"]}
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_dims_resident_kv_is_byte_exact_per_layer(name):
    """The full-size model (lazy: no weights computed) against the estimate, every layer, both schedules."""
    cfg, ext = _load(name)
    p = ext.profile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CPU gather_mm: an MoE model builds in float32 (said below)
        model = build_model(cfg, dtype=p.dtype, lazy=True)
    mx.synchronize()
    before = mx.get_active_memory()
    for schedule in ("generate", "direct"):
        for n in NS:
            live = cache_report(replay_lazily(model, n, schedule, prefill_step=256))
            dts = _leaf_dtypes(live)
            assert len(dts) == 1, dts
            # CPU gather_mm promotes an MoE model to float32 (build_model says so): compare in the live dtype
            rep = kv_report(p, n, schedule=schedule, chunk=256, dtype=DT[dts.pop()])
            est = [l.nbytes for l in rep.layers if any(e.kind != "none" for e in l.entries)]
            got = [r["nbytes"] for r in live]
            assert len(est) == len(got) == CASES[name][1]
            assert est == got, f"{name} N={n} {schedule}: first differing layer " + str(
                next(i for i, (a, b) in enumerate(zip(est, got)) if a != b))
    assert mx.get_active_memory() - before < 64 * KB * KB, "the replay computed something (weights?)"


def test_the_six_models_of_issue_13_are_covered():
    assert ISSUE_13_SIX <= set(CASES)


def test_listed_sources_match_the_files():
    rows = [r.split("\t")[0] for r in (DIR / "SOURCES.tsv").read_text(encoding="utf-8").splitlines()[1:] if r]
    assert sorted(rows) == sorted(p.stem for p in DIR.glob("*.json")) == sorted(CASES)
