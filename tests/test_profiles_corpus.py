"""The first corpus: every real config.json beside the checkout has a variant, and the variant says what
mlx-lm really builds from that config - per layer, at full size.

``test_kv_live.py`` proves the estimator right *for the layout a profile declares*. This file proves the
declaration right for the real checkpoint: the real config.json is built lazily by mlx-lm (nothing is
allocated; ``probe_layout(evaluate=False)`` reads the cache classes and shapes off the graph) and every
cache entry - class, window, KV heads, key and value widths, state-tensor shapes and dtypes - must be what
the profile declares for that layer. The same is checked for the config that
``config_for_profile(shrink=False)`` writes from the profile, so the synth path is tied to reality too.
"""
from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest

from omlx_profiles import load_registry

from .conftest import CONFIGS

REG = load_registry(include_env=False)
SOURCES = CONFIGS / "SOURCES.tsv"


def _sources() -> list[tuple[str, str]]:
    if not SOURCES.is_file():
        return []
    with SOURCES.open() as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r and not r[0].startswith("#")]
    return [(r[0], r[1]) for r in rows]


CORPUS = _sources()
needs_corpus = pytest.mark.skipif(not CORPUS, reason=f"no config corpus at {CONFIGS}")


@needs_corpus
@pytest.mark.parametrize("short,hf_id", CORPUS, ids=[c[0] for c in CORPUS])
def test_every_corpus_config_resolves_to_a_variant(short, hf_id):
    assert (CONFIGS / f"{short}.json").is_file()
    res = REG.resolve(hf_id)
    assert res.matched_by == "id", (hf_id, res.matched_by)
    assert hf_id in res.profile.ids


# --------------------------------------------------------------------------------------------------
# full-size layouts (needs mlx-lm; lazy: no weights are allocated)
# --------------------------------------------------------------------------------------------------


def _expected(profile, dtype: str) -> list[dict]:
    """What each cache entry should look like, from the profile alone (layers without a cache skipped)."""
    out = []
    for name in profile.layer_names:
        lt = profile.layer_types[name]
        if all(e.kind == "none" for e in lt.entries):
            continue
        parts = [_expected_entry(e, dtype) for e in lt.entries]
        out.append({"class": "CacheList", "children": parts} if len(parts) > 1 else parts[0])
    return out


def _expected_entry(e, dtype: str) -> dict:
    if e.kind == "state":
        return {"class": "ArraysCache",
                "state": [{"shape": [1, *t.shape], "dtype": dtype if t.dtype == "model" else t.dtype}
                          for t in e.tensors]}
    cls = {"full": "KVCache", "latent": "KVCache", "indexer": "KVCache", "sliding": "RotatingKVCache",
           "chunked": "ChunkedKVCache"}[e.kind]
    row = {"class": cls, "keys": [e.n_kv, e.k_width], "values": [e.n_kv, e.v_width]}
    if e.kind == "sliding":
        row["max_size"] = e.window
    if e.kind == "chunked":
        row["chunk_size"] = e.chunk
    return row


def _observed(layout: list[dict], dtype_names: dict) -> list[dict]:
    def one(r):
        if "children" in r:
            return {"class": r["class"], "children": [one(c) for c in r["children"]]}
        if "state" in r:
            return {"class": r["class"],
                    "state": [{"shape": s["shape"], "dtype": dtype_names[s["dtype"]]} for s in r["state"]]}
        row = {"class": r["class"], "keys": r["keys"]["row_shape"], "values": r["values"]["row_shape"]}
        for k in ("max_size", "chunk_size"):
            if k in r and r["class"] != "KVCache":
                row[k] = r[k]
        return row
    return [one(r) for r in layout]


@pytest.fixture(scope="module")
def live():
    pytest.importorskip("mlx.core")
    pytest.importorskip("mlx_lm")
    from omlx_profiles.live import build, probe

    def layout(cfg: dict):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = build.build_model(cfg, "bf16", lazy=True)
        dt = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[model.omlx_build_info.dtype]
        return probe.probe_layout(model, evaluate=False), dt

    return layout


DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _diff(want: list[dict], have: list[dict]) -> list[str]:
    if len(want) != len(have):
        return [f"{len(have)} cache entries, the profile expects {len(want)}"]
    return [f"entry {i}: profile {w} != mlx-lm {h}" for i, (w, h) in enumerate(zip(want, have)) if w != h]


@needs_corpus
@pytest.mark.parametrize("short,hf_id", CORPUS, ids=[c[0] for c in CORPUS])
def test_real_config_layout_matches_profile(short, hf_id, live):
    p = REG.resolve(hf_id).profile
    cfg = json.loads((CONFIGS / f"{short}.json").read_text())
    layout, dt = live(cfg)
    bad = _diff(_expected(p, dt), _observed(layout, DTYPES))
    assert not bad, f"{short} vs {p.source}:\n" + "\n".join(bad[:10])


@pytest.mark.parametrize("name", sorted(REG.profiles))
def test_full_size_synth_config_layout_matches_profile(name, live):
    from omlx_profiles.mlxlm.to_config import config_for_profile

    p = REG.profiles[name]
    layout, dt = live(config_for_profile(p, shrink=False))
    bad = _diff(_expected(p, dt), _observed(layout, DTYPES))
    assert not bad, f"{name}:\n" + "\n".join(bad[:10])


_SCALARS = {  # profile field -> mlx-lm text-args attribute
    "num_heads": "num_attention_heads",
    "hidden_size": "hidden_size",
    "vocab_size": "vocab_size",
}


@needs_corpus
@pytest.mark.parametrize("short,hf_id", CORPUS, ids=[c[0] for c in CORPUS])
def test_real_config_numbers_match_profile(short, hf_id):
    """The numbers outside the cache (used for weights and transients) as mlx-lm reads them."""
    pytest.importorskip("mlx_lm")
    from omlx_profiles.live._resolve import layer_kinds, text_args, text_dict

    p = REG.resolve(hf_id).profile
    cfg = json.loads((CONFIGS / f"{short}.json").read_text())
    eff = text_args(cfg)
    raw = text_dict(cfg)
    assert len(layer_kinds(cfg)) == p.num_layers
    for field, attr in _SCALARS.items():
        want = getattr(p, field)
        if want is not None and getattr(eff, attr, None) is not None:
            assert want == getattr(eff, attr), (field, want, getattr(eff, attr))
    if p.intermediate_size is not None and "intermediate_size" in raw:
        assert p.intermediate_size == raw["intermediate_size"]
    if p.max_context is not None and "max_position_embeddings" in raw:
        assert p.max_context == raw["max_position_embeddings"]
    if p.tie_word_embeddings is not None and "tie_word_embeddings" in raw:
        assert p.tie_word_embeddings == raw["tie_word_embeddings"]
    if p.moe is not None:
        n_exp = next(raw[k] for k in ("num_experts", "num_local_experts", "n_routed_experts") if k in raw)
        top_k = next(raw[k] for k in ("num_experts_per_tok", "experts_per_token") if k in raw)
        assert (p.moe.num_experts, p.moe.experts_per_token) == (n_exp, top_k)
        if p.moe.moe_intermediate_size is not None and "moe_intermediate_size" in raw:
            assert p.moe.moe_intermediate_size == raw["moe_intermediate_size"]
    if p.mla is not None:
        for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank",
                  "index_head_dim", "index_n_heads", "index_topk"):
            if k in raw:
                assert getattr(p.mla, k) == raw[k], k


def test_corpus_has_no_stray_files():
    """Every config.json in the corpus is listed in SOURCES.tsv (so it is checked above)."""
    if not CORPUS:
        pytest.skip("no corpus")
    listed = {s for s, _ in CORPUS}
    files = {f.stem for f in Path(CONFIGS).glob("*.json")}
    assert files <= listed, sorted(files - listed)


# --------------------------------------------------------------------------------------------------
# the coverage report
# --------------------------------------------------------------------------------------------------


def test_stored_model_types_match_installed_mlx_lm():
    """data_mlxlm_model_types was derived from mlx-lm 0.32.2; a different mlx-lm must re-derive it."""
    import re

    mlx_lm = pytest.importorskip("mlx_lm")
    from mlx_lm.utils import MODEL_REMAPPING

    from omlx_profiles.mlxlm.model_types import MLXLM_VERSION, MODULES, REMAPPING

    models = Path(mlx_lm.__file__).parent / "models"
    found = set()
    for f in models.glob("*.py"):
        t = f.read_text()
        if (re.search(r"^class Model\b|^from \S+ import .*\bModel\b", t, re.M)
                and re.search(r"^class ModelArgs\b|^from \S+ import .*\bModelArgs\b", t, re.M)):
            found.add(f.stem)
    assert mlx_lm.__version__ == MLXLM_VERSION
    assert found == set(MODULES), (sorted(found - set(MODULES)), sorted(set(MODULES) - found))
    assert REMAPPING == MODEL_REMAPPING


def test_coverage_report_is_current(cli):
    code, out, err = cli("coverage", "--check")
    assert code == 0, out + err


def test_coverage_lists_every_model_type_and_variant():
    from omlx_profiles.mlxlm.coverage import coverage_rows
    from omlx_profiles.mlxlm.model_types import MODULES, REMAPPING

    rows = coverage_rows(REG)
    assert {r.module for r in rows} == set(MODULES)
    assert len(rows) == len(MODULES) + len(REMAPPING)
    status = {r.module: r.status for r in rows if r.model_type == r.module}
    for p in REG:
        assert status[p.mlx_model_type] == "verified", p.name
    assert all(r.status in ("verified", "not yet", "unsupported") and r.detail for r in rows)


def test_coverage_needs_no_mlx():
    import subprocess
    import sys

    code = ("import sys, omlx_profiles; from omlx_profiles.mlxlm.coverage import coverage_rows, render_markdown; "
            "render_markdown(coverage_rows(omlx_profiles.load_registry(include_env=False))); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('mlx', 'mlx_lm', 'transformers')]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1]).returncode == 0


# --------------------------------------------------------------------------------------------------
# synth: the profile -> mlx-lm config translation (no mlx needed)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REG.profiles))
def test_synth_config_for_every_variant(name):
    from omlx_profiles.mlxlm.to_config import config_for_profile, cut_profile

    p = REG.profiles[name]
    for layers in (None, "period", "kinds"):
        for shrink in (True, False):
            cfg = config_for_profile(p, shrink=shrink, layers=layers)
            assert cfg["model_type"] == p.mlx_model_type
            text = cfg.get("text_config", cfg)
            assert text["num_hidden_layers"] == cut_profile(p, layers).num_layers


def _real(short: str) -> dict:
    cfg = json.loads((CONFIGS / f"{short}.json").read_text())
    return cfg.get("text_config", cfg)


@needs_corpus
@pytest.mark.parametrize("name,short,keys", [
    ("qwen3-next-80b-a3b-thinking", "qwen3-next-80b-a3b-thinking",
     ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
      "linear_conv_kernel_dim", "full_attention_interval", "head_dim", "num_key_value_heads")),
    ("qwen3.5-27b", "qwen3.5-27b",
     ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
      "linear_conv_kernel_dim", "full_attention_interval", "head_dim", "num_key_value_heads")),
    ("nemotron-h-56b-base-8k", "nemotron-h-56b-base-8k",
     ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "hybrid_override_pattern",
      "num_key_value_heads")),
    ("lfm2.5-vl-1.6b", "lfm2.5-vl-1.6b", ("conv_L_cache", "hidden_size", "num_attention_heads", "num_key_value_heads")),
    ("deepseek-v2-lite", "deepseek-v2-lite",
     ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "num_attention_heads")),
    ("gpt-oss-20b", "gpt-oss-20b", ("layer_types", "sliding_window", "head_dim", "num_key_value_heads")),
])
def test_state_shapes_round_trip_to_config_dims(name, short, keys):
    """The config dims synth solves back from the profile's tensor shapes are the checkpoint's own."""
    from omlx_profiles.mlxlm.to_config import config_for_profile

    cfg = config_for_profile(REG.profiles[name], shrink=False)
    cfg = cfg.get("text_config", cfg)
    real = _real(short)
    for k in keys:
        assert cfg[k] == real[k], (k, cfg[k], real[k])


def _relaid(name: str, **layers):
    from omlx_profiles.schema.family import Layers

    p = REG.profiles[name]
    return p.relaid(Layers(**layers), name=name + "-relaid", num_layers=p.num_layers)


@pytest.mark.parametrize("name,layers,match", [
    ("qwen3-next-80b-a3b-thinking",
     {"kinds": {"lin": {"kind": "state", "tensors": [{"name": "conv", "shape": [3, 8193], "dtype": "model"},
                                                     {"name": "ssm", "shape": [32, 128, 128], "dtype": "fp32"}]},
                "full": {"kind": "full"}}, "pattern": ["lin", "lin", "lin", "full"]},
     "for any whole linear_num_key_heads"),
    ("nemotron-h-56b-base-8k",
     {"kinds": {"M": {"kind": "state", "tensors": [{"name": "conv", "shape": [3, 20480], "dtype": "model"}]},
                "*": {"kind": "full"}}, "types": "M*" * 59},
     "holds 2 tensor"),
    ("gemma-3-4b-it",
     {"kinds": {"s": {"kind": "sliding", "window": 1024}, "f": {"kind": "full"}},
      "pattern": ["s", "f", "f", "s", "s", "f"], "cyclic": True},
     "iff i % 2 == 1"),
    ("llama-3.1-8b",
     {"kinds": {"s": {"kind": "sliding", "window": 128, "num_kv_heads": 4}, "f": {"kind": "full"}},
      "pattern": ["s", "f"]},
     "different"),
    ("qwen3-8b", {"kinds": {"x": {"kind": "chunked", "chunk": 128}}, "pattern": ["x"]}, "has no layer of kind"),
])
def test_synth_refuses_layouts_mlx_lm_cannot_build(name, layers, match):
    from omlx_profiles.mlxlm.to_config import SynthError, config_for_profile

    with pytest.raises(SynthError, match=match):
        config_for_profile(_relaid(name, **layers))


def test_cut_profile_keeps_kinds():
    from omlx_profiles.mlxlm.to_config import cut_profile

    nem = REG.profiles["nemotron-h-56b-base-8k"]
    assert "".join(cut_profile(nem, "kinds").layer_names) == "M-*"
    assert cut_profile(nem, "period").layer_names == cut_profile(nem, "kinds").layer_names
    g = REG.profiles["gemma-3-4b-it"]
    assert cut_profile(g, "period").layer_names == ("sliding",) * 5 + ("full",)
    assert cut_profile(g, "kinds").layer_names == ("sliding", "full")
    assert cut_profile(g, 3).num_layers == 3 and cut_profile(g, None) is g
    assert cut_profile(REG.profiles["qwen3-8b"], "kinds").num_layers == 1
