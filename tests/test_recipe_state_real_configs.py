"""Public configs of state-cache types at their real dims (``tests/state_configs/``, sources in its SOURCES.tsv).

``extract`` resolves each through its module recipe; the full-size mlx-lm model (built lazily: no weights
computed) has exactly the caches the extraction says (``verify_profile``: classes, ArraysCache array shapes and
dtypes, KV widths), and its resident bytes after prompts of 1 and 257 tokens - read from the lazily built cache
graph, both schedules - equal the estimate layer by layer. A hand formula from the config pins the total.
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

from omlx_profiles.live.build import build_model  # noqa: E402
from omlx_profiles.live.lazy_replay import replay_lazily  # noqa: E402
from omlx_profiles.live.probe import cache_report  # noqa: E402
from omlx_profiles.live.verify import verify_profile  # noqa: E402

pytestmark = pytest.mark.live
DIR = Path(__file__).resolve().parent / "state_configs"
DT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

# name: (module, cache entries, bf16 bytes of all caches after 256 tokens (direct), by hand from the config)
CASES = {
    # 64 x ArraysCache: conv (4-1) x intermediate 8192 and ssm 8192 x state 16, both bf16 (mamba.py)
    "falcon-mamba-7b": ("mamba", 64, 64 * (3 * 8192 + 8192 * 16) * 2),
    # 36 x CacheList(ArraysCache, KVCache): conv 3 x (1536 + 2*1*128) bf16, ssm 24 x 64 x 128 fp32,
    # KV 2 heads x 64 x 2 (k, v) x 256 tokens bf16
    "falcon-h1-0.5b-base": ("falcon_h1", 36, 36 * (3 * (1536 + 2 * 128) * 2 + 24 * 64 * 128 * 4
                                                 + 256 * 2 * 2 * 64 * 2)),
    # 32 layers, attention at i % 8 == 4 (4 layers: 8 KV heads x 128); 28 mamba: conv 3 x 8192, ssm 8192 x 16
    "ai21-jamba-1.5-mini": ("jamba", 32, 4 * 256 * 2 * 8 * 128 * 2 + 28 * (3 * 8192 + 8192 * 16) * 2),
    # 26 layers cycling _block_types (recurrent, recurrent, attention): 18 recurrent (conv 3 x 2560 + RG-LRU 2560,
    # bf16) and 8 sliding-window attention layers with ONE KV head of 2560 // 10 = 256 (256 rows < window 2048)
    "recurrentgemma-2b": ("recurrent_gemma", 26, 18 * (3 * 2560 + 2560) * 2 + 8 * 256 * 2 * 1 * 256 * 2),
    # 93 layers: 69 KDA (1-based kda_layers): conv 3 x (3 x 96 heads x 128) bf16 + state 96 x 128 x 128 fp32;
    # 24 MLA latent layers: kv_lora_rank 512 + qk_rope_head_dim 64 per token, bf16
    "kimi-k3": ("kimi_k3", 93, 69 * (3 * 3 * 96 * 128 * 2 + 96 * 128 * 128 * 4) + 24 * 256 * (512 + 64) * 2),
    # 24 layers, full_attention at 2, 6, 10, 14, 18, 21 (layer_types: no full_attn_idxs): 6 x 8 KV heads x
    # 2048 // 32 = 64; 18 short-conv layers of (3 - 1) x 2048, bf16
    "lfm2-8b-a1b": ("lfm2_moe", 24, 6 * 256 * 2 * 8 * 64 * 2 + 18 * 2 * 2048 * 2),
}


def _load(name: str):
    cfg = json.loads((DIR / f"{name}.json").read_text(encoding="utf-8"))
    return cfg, extract_config(cfg, source=f"{name}.json", dtype="bf16")


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_state_config_resolves_and_matches_the_full_size_model(name):
    module, entries, total = CASES[name]
    cfg, ext = _load(name)
    assert ext.payload["mlx_model_type"] == module
    assert "module recipe" in ext.provenance["layers"]
    p = ext.profile()
    assert verify_profile(p, config=cfg) == []
    rep = kv_report(p, 256, schedule="direct", dtype="bf16")
    assert rep.total == total
    assert sum(1 for l in rep.layers if l.nbytes) == entries


def _act_dtype(report: list[dict]) -> str:
    """The activation dtype of the live caches (an MoE model builds in float32 on CPU: gather_mm)."""
    dts = set()
    for r in report:
        for leaf in r.get("children") or [r]:
            if leaf["class"] != "ArraysCache":
                dts |= {a["dtype"] for a in leaf["arrays"]}
            elif leaf["arrays"]:
                dts.add(leaf["arrays"][0]["dtype"])  # the conv window is in the activation dtype
    assert len(dts) == 1, dts
    return DT[dts.pop()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_dims_state_caches_are_byte_exact_per_layer(name):
    cfg, ext = _load(name)
    p = ext.profile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = build_model(cfg, dtype="bfloat16", lazy=True)
    for schedule in ("generate", "direct"):
        for n in (1, 257):
            live = cache_report(replay_lazily(model, n, schedule, prefill_step=256))
            rep = kv_report(p, n, schedule=schedule, chunk=256, dtype=_act_dtype(live))
            est = [l.nbytes for l in rep.layers if any(e.kind != "none" for e in l.entries)]
            assert est == [r["nbytes"] for r in live], f"{name} N={n} {schedule}"


def test_listed_sources_match_the_files():
    rows = [r.split("\t")[0] for r in (DIR / "SOURCES.tsv").read_text(encoding="utf-8").splitlines()[1:] if r]
    assert sorted(rows) == sorted(p.stem for p in DIR.glob("*.json")) == sorted(CASES)
