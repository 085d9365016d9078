"""config.json extraction without mlx: every real config, the formula at 32k, skeletons, errors.

The 32k numbers are computed here from the models' published dims with the catalogue's verified
formulas (``../shared/reference/mlxlm_caches.md`` §2.1, bytes per token and windowed / constant bytes)
- never copied from this package's output. The live tests (``test_extract_live.py``) check the same
extraction against mlx-lm's real caches at N = 1 and 1000.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from omlx_profiles.errors import InputError, UnsupportedError
from omlx_profiles.extraction.from_config import extract_config, profile_from_config, resolve_path
from omlx_profiles.mlxlm.fold import build_layers, period
from omlx_profiles.kv.bytes import kv_bytes
from omlx_profiles.registry.check import validate_paths

from .conftest import CONFIGS, run_cli

N32K = 32768

# bytes per token of the unbounded layers, bytes of the windowed caches at full size, constant state
# (bf16 unless noted). Catalogue rows where it lists the model, else L x 2 x n_kv x head_dim x 2.
FORMULA = {
    "deepseek-v2-lite": (276480, 0, 0),
    "deepseek-v3.2": (101504, 0, 0),
    "deepseek-v3": (70272, 0, 0),
    "devstral-small-2-24b-instruct": (40 * 2 * 8 * 128 * 2, 0, 0),  # mistral3 wrapper: all 40 layers KVCache
    "gemma-2-9b-it": (344064, 0, 0),  # sliding_window ignored by mlx-lm
    "gemma-3-27b-it": (81920, 436207616, 0),
    "gemma-3-4b-it": (5 * 2 * 4 * 256 * 2, 29 * 1024 * 2 * 4 * 256 * 2, 0),  # 5 full + 29 sliding(1024), 4 kv x 256
    "gpt-oss-20b": (12 * 2 * 8 * 64 * 2, 12 * 128 * 2 * 8 * 64 * 2, 0),  # 12 full + 12 sliding(128); bf16 assumed
    "llama-3.1-8b": (131072, 0, 0),
    "llama-3.1-8b-instruct": (131072, 0, 0),
    "llama-3.2-1b-instruct": (16 * 2 * 8 * 64 * 2, 0, 0),
    "llama-3.2-3b-instruct": (28 * 2 * 8 * 128 * 2, 0, 0),
    "mistral-7b-v0.3": (32 * 2 * 8 * 128 * 2, 0, 0),  # sliding_window without layer_types: ignored
    "mixtral-8x7b-v0.1": (32 * 2 * 8 * 128 * 2, 0, 0),
    "nemotron-h-56b-base-8k": (40960, 0, 912605184),
    "phi-3-mini-4k-instruct": (393216, 0, 0),  # sliding_window 2047 ignored
    "qwen2.5-72b": (80 * 2 * 8 * 128 * 2, 0, 0),
    "qwen2.5-7b-instruct": (28 * 2 * 4 * 128 * 2, 0, 0),
    "qwen3-0.6b": (28 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-30b-a3b": (48 * 2 * 4 * 128 * 2, 0, 0),
    "qwen3-32b": (64 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-8b": (36 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-next-80b-a3b-thinking": (24576, 0, 77266944),
    "qwen3.5-27b": (65536, 0, 153944064),
    "smollm3-3b": (36 * 2 * 4 * 128 * 2, 0, 0),  # hidden 2048 / 16 heads = 128
    # added with the registry growth (issue 15): configs listed in tests/configs/SOURCES.tsv
    "llama-3.1-70b": (80 * 2 * 8 * 128 * 2, 0, 0),
    "llama-3.1-405b": (126 * 2 * 8 * 128 * 2, 0, 0),
    "llama-3.3-70b-instruct": (80 * 2 * 8 * 128 * 2, 0, 0),
    "llama-2-7b": (32 * 2 * 32 * 128 * 2, 0, 0),
    "llama-2-13b": (40 * 2 * 40 * 128 * 2, 0, 0),
    "llama-2-70b": (80 * 2 * 8 * 128 * 2, 0, 0),
    "qwen2.5-1.5b": (28 * 2 * 2 * 128 * 2, 0, 0),
    "qwen2.5-7b-base": (28 * 2 * 4 * 128 * 2, 0, 0),
    "qwen2.5-32b": (64 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-1.7b": (28 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-235b-a22b": (94 * 2 * 4 * 128 * 2, 0, 0),
    "qwen3-coder-480b-a35b-instruct": (62 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3.5-122b-a10b": (12 * 2 * 2 * 256 * 2, 0, 36 * ((4 - 1) * (2 * 16 * 128 + 64 * 128) * 2 + 64 * 128 * 128 * 4)),  # 12 full + 36 DeltaNet (bf16 conv + fp32 state)
    "qwen3.5-397b-a17b": (15 * 2 * 2 * 256 * 2, 0, 45 * ((4 - 1) * (2 * 16 * 128 + 64 * 128) * 2 + 64 * 128 * 128 * 4)),  # 15 full + 45 DeltaNet (bf16 conv + fp32 state)
    "qwen3.6-35b-a3b": (10 * 2 * 2 * 256 * 2, 0, 30 * ((4 - 1) * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4)),  # 10 full + 30 DeltaNet (bf16 conv + fp32 state)
    "qwen3.5-35b-a3b": (10 * 2 * 2 * 256 * 2, 0, 30 * ((4 - 1) * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4)),  # 10 full + 30 DeltaNet (bf16 conv + fp32 state)
    "deepseek-r1": (61 * (512 + 64) * 2, 0, 0),  # MLA latent
    "deepseek-v3.1": (61 * (512 + 64) * 2, 0, 0),  # MLA latent
    "deepseek-r1-distill-qwen-32b": (64 * 2 * 8 * 128 * 2, 0, 0),
    "kimi-k2-instruct": (61 * (512 + 64) * 2, 0, 0),  # MLA latent
    "kimi-k2-thinking": (61 * (512 + 64) * 2, 0, 0),  # MLA latent
    "gpt-oss-120b": (18 * 2 * 8 * 64 * 2, 18 * 128 * 2 * 8 * 64 * 2, 0),  # 18 full + 18 sliding(128); bf16 assumed
    "mixtral-8x22b-v0.1": (56 * 2 * 8 * 128 * 2, 0, 0),
    "nemotron-3-nano-30b-a3b": (6 * 2 * 2 * 128 * 2, 0, 23 * ((4 - 1) * (64 * 64 + 2 * 8 * 128) * 2 + 64 * 64 * 128 * 4)),  # 6 attention + 23 Mamba-2 (bf16 conv + fp32 state)
    "codellama-34b-instruct": (48 * 2 * 8 * 128 * 2, 0, 0),
    "llama-3.1-70b-instruct": (80 * 2 * 8 * 128 * 2, 0, 0),
    "mistral-7b-v0.1": (32 * 2 * 8 * 128 * 2, 0, 0),  # sliding_window 4096 ignored
    "mistral-nemo-instruct-2407": (40 * 2 * 8 * 128 * 2, 0, 0),
    "mixtral-8x22b-instruct-v0.1": (56 * 2 * 8 * 128 * 2, 0, 0),
    "mixtral-8x7b-instruct-v0.1": (32 * 2 * 8 * 128 * 2, 0, 0),
    "qwen2.5-1.5b-instruct": (28 * 2 * 2 * 128 * 2, 0, 0),
    "qwen2.5-3b-instruct": (36 * 2 * 2 * 128 * 2, 0, 0),
    "qwen3-14b": (40 * 2 * 8 * 128 * 2, 0, 0),
    "yi-34b": (60 * 2 * 8 * 128 * 2, 0, 0),
    "tinyllama-1.1b-chat-v1.0": (22 * 2 * 4 * 64 * 2, 0, 0),
    "phi-3.5-mini-instruct": (32 * 2 * 32 * 96 * 2, 0, 0),  # sliding_window 262144 ignored
    "gemma-2-2b-it": (26 * 2 * 4 * 256 * 2, 0, 0),  # sliding_window 4096 ignored
    "gemma-2-2b-jpn-it": (26 * 2 * 4 * 256 * 2, 0, 0),  # sliding_window 4096 ignored
    "gemma-2-27b-it": (46 * 2 * 16 * 128 * 2, 0, 0),  # sliding_window 4096 ignored
    "gemma-3-1b-it": (4 * 2 * 1 * 256 * 2, 22 * 512 * 2 * 1 * 256 * 2, 0),  # 4 full + 22 sliding(512)
    "qwen2-0.5b-instruct": (24 * 2 * 2 * 64 * 2, 0, 0),
    "qwen2-1.5b-instruct": (28 * 2 * 2 * 128 * 2, 0, 0),
    "qwen2-7b-instruct": (28 * 2 * 4 * 128 * 2, 0, 0),
    "smollm2-135m-instruct": (30 * 2 * 3 * 64 * 2, 0, 0),
    "smollm2-360m-instruct": (32 * 2 * 5 * 64 * 2, 0, 0),
    "phi-4-mini-instruct": (32 * 2 * 8 * 128 * 2, 0, 0),  # sliding_window 262144 ignored
    "qwen2.5-32b-instruct": (64 * 2 * 8 * 128 * 2, 0, 0),
    "phi-4": (40 * 2 * 10 * 128 * 2, 0, 0),
    "qwen3.5-9b": (8 * 2 * 4 * 256 * 2, 0, 24 * ((4 - 1) * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4)),  # 8 full + 24 DeltaNet (bf16 conv + fp32 state)
    "devstral-2-123b-instruct": (88 * 2 * 8 * 128 * 2, 0, 0),
    "llama-3.2-3b-base": (28 * 2 * 8 * 128 * 2, 0, 0),
    "qwen2.5-14b": (48 * 2 * 8 * 128 * 2, 0, 0),
    "qwen2.5-3b": (36 * 2 * 2 * 128 * 2, 0, 0),
    "qwen3-4b": (36 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-4b-instruct-2507": (36 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-4b-thinking-2507": (36 * 2 * 8 * 128 * 2, 0, 0),
    "smollm2-1.7b-instruct": (24 * 2 * 32 * 64 * 2, 0, 0),
    "llama-3-8b": (32 * 2 * 8 * 128 * 2, 0, 0),
    "llama-3-70b": (80 * 2 * 8 * 128 * 2, 0, 0),
    "cogito-v1-preview-qwen-14b": (48 * 2 * 8 * 128 * 2, 0, 0),
    "nemotron-3-super-120b-a12b": (8 * 2 * 2 * 128 * 2, 0, 40 * ((4 - 1) * (128 * 64 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 4)),  # 8 attention + 40 Mamba-2 (bf16 conv + fp32 state)
    "allam-7b-instruct-preview": (32 * 2 * 32 * 128 * 2, 0, 0),
    "qwen3-embedding-8b": (36 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-embedding-4b": (36 * 2 * 8 * 128 * 2, 0, 0),
    "qwen3-embedding-0.6b": (28 * 2 * 8 * 128 * 2, 0, 0),
    "codellama-7b": (32 * 2 * 32 * 128 * 2, 0, 0),
    "tinyllama-1.1b-chat-v0.4": (22 * 2 * 4 * 64 * 4, 0, 0),  # float32 checkpoint: 4-byte cache
    "smollm-135m-instruct": (30 * 2 * 3 * 64 * 2, 0, 0),
    "smollm-360m-instruct": (32 * 2 * 5 * 64 * 2, 0, 0),
    "smollm-1.7b-instruct": (24 * 2 * 32 * 64 * 2, 0, 0),
}
UNSUPPORTED = {"lfm2.5-vl-1.6b": "lfm2_vl"}  # mlx-lm 0.32.2 cannot import mlx_lm.models.lfm2_vl

ALL = sorted(p.stem for p in CONFIGS.glob("*.json"))


def estimate_ok(code: int, out: str) -> bool:
    """``estimate`` answered: exit 0, or exit 1 with the JSON's ``past_context`` said (docs/errors.md: a prompt
    past the model's context exits 1 even without ``--budget``; the bytes are still reported, and these
    tests check the bytes at 32k on models trained for less)."""
    if code == 0:
        return True
    try:
        return code == 1 and bool(json.loads(out).get("past_context"))
    except ValueError:
        return False


def cfg_path(stem: str) -> Path:
    return CONFIGS / f"{stem}.json"


def test_every_config_is_classified():
    assert set(ALL) == set(FORMULA) | set(UNSUPPORTED), "a new config in ../shared/configs needs a FORMULA row"


@pytest.mark.parametrize("stem", sorted(FORMULA))
def test_estimate_config_32k_equals_formula(stem):
    grow, windowed, const = FORMULA[stem]
    code, out, err = run_cli("estimate", "--config", str(cfg_path(stem)), "--tokens", str(N32K), "--json")
    assert estimate_ok(code, out), err
    assert json.loads(out)["kv_bytes"] == grow * N32K + windowed + const


@pytest.mark.parametrize("stem", sorted(UNSUPPORTED))
def test_unbuildable_config_is_unsupported_with_reason(stem):
    code, out, err = run_cli("estimate", "--config", str(cfg_path(stem)), "--tokens", "1000")
    assert code == 1 and out == ""
    assert err.startswith(f"unsupported: {cfg_path(stem)}: model_type 'lfm2_vl'") and "lfm2-vl.py" in err
    assert "Traceback" not in err


def test_lfm2_vl_with_mlx_lm_spelling_is_supported():
    cfg = json.loads(cfg_path("lfm2.5-vl-1.6b").read_text())
    cfg["model_type"] = "lfm2-vl"  # the module name mlx-lm can import
    p = profile_from_config(cfg)
    full = [i for i, n in enumerate(p.layer_names) if n == "full"]
    assert full == [2, 5, 8, 10, 12, 14] and p.num_kv_heads == 8 and p.head_dim == 2048 // 32
    conv = p.layer_types["conv"].entries[0]
    assert conv.state_bytes(2) == (3 - 1) * 2048 * 2  # (conv_L_cache - 1) x hidden


# --------------------------------------------------------------------------------------------------
# what mlx-lm ignores / derives (the explanation says so)
# --------------------------------------------------------------------------------------------------


def _notes(stem):
    return " ".join(resolve_path(cfg_path(stem)).notes)


def test_ignored_keys_are_explained():
    assert "sliding_window = 4096 is ignored" in _notes("gemma-2-9b-it")
    assert "sliding_window = 2047 is ignored" in _notes("phi-3-mini-4k-instruct")
    mistral = json.loads(cfg_path("mistral-7b-v0.3").read_text())
    mistral["sliding_window"] = 4096  # Mistral 7B v0.1 had one; mlx-lm still builds plain KVCaches
    ex = extract_config(mistral)
    assert any("without layer_types" in n for n in ex.notes) and set(ex.payload["layers"]["kinds"]) == {"full"}
    assert "defines no make_cache" in _notes("devstral-small-2-24b-instruct")
    assert "Infinity" in _notes("nemotron-h-56b-base-8k")  # loads although time_step_limit has Infinity


def test_qwen2_ignores_config_head_dim():
    cfg = json.loads(cfg_path("qwen2.5-7b-instruct").read_text())
    cfg["head_dim"] = 64
    ex = extract_config(cfg)
    assert ex.payload["head_dim"] == 3584 // 28
    assert any("head_dim = 64 is ignored" in n for n in ex.notes)


def test_vlm_prefers_the_language_model():
    p = resolve_path(cfg_path("gemma-3-4b-it")).profile
    assert p.num_layers == 34  # text_config, not vision_config's 27
    assert (p.num_heads, p.num_kv_heads, p.head_dim) == (8, 4, 256)  # gemma3 wrapper / gemma3_text defaults
    prov = p.provenance
    assert "text_config.num_hidden_layers" in prov["num_layers"]
    assert "gemma3.ModelArgs.__post_init__" in prov["num_kv_heads"]
    assert "gemma3_text.ModelArgs.head_dim = 256" in prov["head_dim"]


def test_qwen3_5_without_text_config_is_its_own_text_config():
    cfg = json.loads(cfg_path("qwen3.5-27b").read_text())
    flat = dict(cfg["text_config"], model_type="qwen3_5")
    a, b = profile_from_config(cfg), profile_from_config(flat)
    assert kv_bytes(a, 5000) == kv_bytes(b, 5000)


def test_remapping_table():
    cfg = json.loads(cfg_path("deepseek-v3").read_text())
    cfg["model_type"] = "kimi_k2"
    p = profile_from_config(cfg)
    assert p.mlx_model_type == "deepseek_v3" and "MODEL_REMAPPING" in p.provenance["mlx_model_type"]
    assert profile_from_config(json.loads(cfg_path("mistral-7b-v0.3").read_text())).mlx_model_type == "llama"


def test_layer_types_sliding_in_llama():
    cfg = json.loads(cfg_path("llama-3.2-1b-instruct").read_text())
    cfg["layer_types"] = ["sliding_attention", "full_attention"] * 8
    cfg["sliding_window"] = 512
    p = profile_from_config(cfg)
    assert p.layer_names[:2] == ("sliding", "full") and p.layer_types["sliding"].entries[0].window == 512
    cfg["model_type"] = "smollm3"  # smollm3 has no make_cache: every layer a KVCache
    assert set(profile_from_config(cfg).layer_names) == {"full"}


def test_quantization_and_dtype():
    cfg = json.loads(cfg_path("qwen3-8b").read_text())
    cfg["quantization"] = {"group_size": 64, "bits": 4}
    cfg["torch_dtype"] = "float16"
    r = extract_config(cfg)
    assert r.payload["weights"] == {"bits": 4, "group_size": 64} and r.payload["dtype"] == "fp16"
    del cfg["torch_dtype"]
    r = extract_config(cfg)
    assert r.dtype_assumed and r.payload["dtype"] == "bf16" and any("bf16 assumed" in n for n in r.notes)


# --------------------------------------------------------------------------------------------------
# errors: clear, naming the file and the key
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,needle", [
    ("{not json", ":1:2: invalid JSON"),
    ("[1, 2]", "top level must be a JSON object, got array"),
    ((CONFIGS / "qwen3-8b.json").read_text().replace('"num_hidden_layers": 36', '"num_hidden_layers": NaN'),
     "num_hidden_layers must be an integer"),
    ((CONFIGS / "qwen3-8b.json").read_text().replace('"head_dim": 128', '"head_dim": Infinity'),
     "head_dim must be an integer"),
    ('{"hidden_size": 8}', "no 'model_type' key"),
    ('{"model_type": 7}', "'model_type' must be a non-empty string"),
])
def test_bad_files(tmp_path, text, needle):
    f = tmp_path / "config.json"
    f.write_text(text)
    code, out, err = run_cli("estimate", "--config", str(f), "--tokens", "10")
    assert code == 2 and needle in err and str(f) in err and "Traceback" not in err


def test_wrong_types_name_the_key():
    base = json.loads(cfg_path("qwen3-8b").read_text())
    for key, bad in (("num_key_value_heads", "8"), ("head_dim", 128.0), ("num_hidden_layers", True),
                     ("num_attention_heads", -4)):
        cfg = dict(base, **{key: bad})
        with pytest.raises(InputError, match=key):
            profile_from_config(cfg, source="x/config.json")


def test_missing_path_and_directory(tmp_path):
    code, _, err = run_cli("estimate", "--config", str(tmp_path), "--tokens", "1")
    assert code == 2 and "has no config.json" in err
    code, _, err = run_cli("estimate", "--config", str(tmp_path / "nope.json"), "--tokens", "1")
    assert code == 2 and "no such file" in err


def test_model_directory_resolves(tmp_path):
    d = tmp_path / "Qwen3-8B"
    d.mkdir()
    shutil.copy(cfg_path("qwen3-8b"), d / "config.json")
    r = resolve_path(d)
    assert r.matched_by == "directory" and r.profile.name == "qwen3-8b"
    assert r.profile.source.endswith("config.json")


@pytest.mark.parametrize("cfg,why", [
    ({"model_type": "rwkv7", "hidden_size": 64}, "'head_dim', 'intermediate_size', 'norm_eps', 'num_hidden_layers', 'v_low_rank_dim', 'vocab_size', which mlx-lm's rwkv7.ModelArgs requires"),
    ({"model_type": "no_such_arch"}, "no cache-layout rule"),
    ({"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 64,
      "num_attention_heads": 4, "rms_norm_eps": 1e-6, "vocab_size": 100, "num_key_value_heads": 2,
      "max_position_embeddings": 100, "tie_word_embeddings": False}, "'head_dim', which mlx-lm's qwen3.ModelArgs requires"),
    ({"model_type": "gemma3"}, "lacks ['text_config']"),
    ({"model_type": "gpt_oss", "layer_types": ["full_attention"] * 36}, "has no ['sliding_attention'] entry"),
])
def test_unsupported_says_why(cfg, why):
    with pytest.raises(UnsupportedError, match="^unsupported: ") as e:
        profile_from_config(cfg)
    assert why in str(e.value)
    assert str(e.value).count("unsupported: ") == 1 and why in e.value.reason  # the prefix once, owned by the class


def test_unsupported_error_owns_its_prefix():
    """``UnsupportedError`` adds ``unsupported: `` itself (once: a why that already has it is not doubled) and
    keeps the why alone in ``reason``, so a caller adding context never strips and re-adds the prefix."""
    import pickle

    for why in ("no rule for x", "unsupported: no rule for x"):
        e = UnsupportedError(why)
        assert str(e) == "unsupported: no rule for x" and e.reason == "no rule for x"
        assert str(pickle.loads(pickle.dumps(e))) == str(e)
    with pytest.raises(UnsupportedError, match="^unsupported: config.json: model_type .no_such_arch.: no cache-layout rule"):
        profile_from_config({"model_type": "no_such_arch"}, source="config.json")


# --------------------------------------------------------------------------------------------------
# layout folding
# --------------------------------------------------------------------------------------------------


def test_period_and_fold():
    assert period(list("aab" * 5)) == 3 and period(list("abcd")) == 4 and period(["x"]) == 1
    lay = build_layers([("s", {"kind": "sliding", "window": 4})] * 5 + [("f", {"kind": "full"})] + [("s", {"kind": "sliding", "window": 4})] * 2)
    assert lay["pattern"] == ["s"] * 5 + ["f"] and lay["cyclic"] is True
    # equal names with different specs never merge
    lay = build_layers([("s", {"kind": "sliding", "window": 4}), ("s", {"kind": "sliding", "window": 8})])
    assert set(lay["kinds"]) == {"s", "s_2"}


# --------------------------------------------------------------------------------------------------
# extract: skeleton validates, and resolving it reproduces --config
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", sorted(FORMULA))
def test_extract_skeleton_validates_and_reproduces(tmp_path, stem):
    out = tmp_path / "user"
    out.mkdir()
    dest = out / f"{stem}.yaml"
    code, _, err = run_cli("extract", str(cfg_path(stem)), "--write", str(dest))
    assert code == 0, err
    text = dest.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    issues, count = validate_paths([dest])
    assert not issues and count == 1, [str(i) for i in issues]
    name = resolve_path(cfg_path(stem)).profile.name
    for n, chunk in ((1, 2048), (1000, 256), (N32K, 2048)):
        a = run_cli("estimate", "--config", str(cfg_path(stem)), "--tokens", str(n), "--chunk", str(chunk), "--json")
        b = run_cli("estimate", name, "--profiles", str(out), "--tokens", str(n), "--chunk", str(chunk), "--json")
        assert estimate_ok(a[0], a[1]) and estimate_ok(b[0], b[1]), (a[2], b[2])
        assert json.loads(a[1])["kv_bytes"] == json.loads(b[1])["kv_bytes"]
        assert [x["bytes"] for x in json.loads(a[1])["layers"]] == [x["bytes"] for x in json.loads(b[1])["layers"]]


def test_extract_ids_and_todos(tmp_path):
    d = tmp_path / "Qwen3-8B-local"
    d.mkdir()
    cfg = json.loads(cfg_path("qwen3-8b").read_text())
    (d / "config.json").write_text(json.dumps(dict(cfg, _name_or_path="Qwen/Qwen3-8B")))
    code, out, _ = run_cli("extract", str(d))
    assert code == 0 and "ids: [Qwen/Qwen3-8B]" in out and "name: qwen3-8b" in out  # from _name_or_path
    (d / "config.json").write_text(json.dumps(cfg))
    code, out, _ = run_cli("extract", str(d))
    assert code == 0 and "name: qwen3-8b-local" in out  # from the directory
    code, out, _ = run_cli("extract", str(cfg_path("phi-3-mini-4k-instruct")))
    assert code == 0 and "name: phi-3-mini-4k-instruct" in out  # _name_or_path without org: a name, no id
    code, out, _ = run_cli("extract", str(cfg_path("qwen3-8b")))
    assert "ids: []  # TODO" in out and "# TODO: weights" in out
    code, out, _ = run_cli("extract", str(cfg_path("gpt-oss-20b")))
    assert "dtype: bf16  # TODO" in out


def test_extract_write_safety(tmp_path):
    dest = tmp_path / "new.yaml"
    assert run_cli("extract", str(cfg_path("qwen3-8b")), "--write", str(dest))[0] == 0
    before = dest.read_text()
    code, _, err = run_cli("extract", str(cfg_path("qwen3-0.6b")), "--write", str(dest))
    assert code == 2 and "already exists" in err and dest.read_text() == before
    assert run_cli("extract", str(cfg_path("qwen3-0.6b")), "--write", str(dest), "--force")[0] == 0
    assert "qwen3-0.6b" in dest.read_text()
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "elsewhere.yaml")
    code, _, err = run_cli("extract", str(cfg_path("qwen3-8b")), "--write", str(link), "--force")
    assert code == 2 and "symbolic link" in err and not (tmp_path / "elsewhere.yaml").exists()
    code, _, err = run_cli("extract", str(cfg_path("qwen3-8b")), "--write", str(tmp_path / "no" / "x.yaml"))
    assert code == 2 and "no such directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "new.yaml"]  # nothing else written


def test_resolve_explain_shows_config_provenance():
    code, out, err = run_cli("resolve", "--config", str(cfg_path("qwen3-next-80b-a3b-thinking")), "--explain", "--json")
    assert code == 0, err
    prov = json.loads(out)["provenance"]
    assert "full_attention_interval" in prov["layers"] and "num_key_value_heads" in prov["num_kv_heads"]


def test_config_matching_a_registry_variant_says_so(tmp_path):
    cfg = json.loads(cfg_path("llama-3.2-1b-instruct").read_text())
    cfg["_name_or_path"] = "meta-llama/Llama-3.2-1B-Instruct"
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    from omlx_profiles import load_registry

    r = resolve_path(f, registry=load_registry())
    assert any("matches registry variant 'llama-3.2-1b-instruct'" in n for n in r.notes)
    cfg["num_key_value_heads"] = 4
    f.write_text(json.dumps(cfg))
    r = resolve_path(f, registry=load_registry())
    msg = " ".join(r.notes)
    assert "disagrees" in msg and "num_kv_heads: config.json has 4" in msg and "llama.yaml:" in msg
    # config layout; the variant describes another checkpoint, so nothing (not its weights) is taken (#18)
    assert r.profile.num_kv_heads == 4 and r.profile.weights is None and "nothing is taken" in msg


def test_kv_bytes_scale_with_dtype():
    p = profile_from_config(json.loads(cfg_path("qwen3.5-27b").read_text()))
    # conv state follows the activation dtype, the gated-DeltaNet state stays fp32
    lin = p.layer_types["linear"].entries[0]
    assert lin.state_bytes(2) != lin.state_bytes(4) and lin.state_bytes(4) - lin.state_bytes(2) == 3 * (2 * 16 * 128 + 48 * 128) * 2
    assert math.prod([48, 128, 128]) * 4 < lin.state_bytes(2)


def test_explain_follows_the_merge_order(tmp_path):
    """A base variant's field beats the inheriting variant's family defaults (loader merge order)."""
    from omlx_profiles.registry.provenance import yaml_provenance
    from omlx_profiles.registry.index import build_registry

    head = "# yaml-language-server: $schema=../schema/v1/profile.schema.json\n"
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    b.write_text(head + "family: fb\nmodel_types: [llama]\nvariants:\n  - name: v1\n    mlx_model_type: llama\n"
                 "    num_layers: 2\n    num_kv_heads: 2\n    head_dim: 64\n    dtype: fp16\n"
                 "    layers: {kinds: {full: {kind: full}}, pattern: [full]}\n")
    a.write_text(head + "family: fa\nmodel_types: [llama]\ndefaults:\n  dtype: bf16\nvariants:\n"
                 "  - name: v2\n    base: v1\n")
    reg = build_registry([[a, b]])
    assert reg.profiles["v2"].dtype == "fp16"
    prov = yaml_provenance(reg, "v2")
    assert prov["dtype"] == f"{b}:10 (base v1)"  # not a.yaml's defaults


def test_hub_cache_layout_gives_the_id(tmp_path):
    d = tmp_path / "models--Qwen--Qwen3-8B" / "snapshots" / "0123abcd"
    d.mkdir(parents=True)
    shutil.copy(cfg_path("qwen3-8b"), d / "config.json")
    code, out, _ = run_cli("extract", str(d))
    assert code == 0 and "ids: [Qwen/Qwen3-8B]" in out and "name: qwen3-8b" in out


def test_merge_precedence():
    from omlx_profiles.extraction.match import Source, merge_fields

    vals, where = merge_fields(
        Source("live-probe", {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}, {}),
        Source("config.json", {"a": 2, "b": 2, "c": 2, "d": 2, "e": None}, {"a": "cfg"}),
        Source("yaml-family", {"a": 3, "b": 3, "c": 3}, {}),
        Source("yaml-variant", {"a": 4, "b": 4}, {}),
        Source("override", {"a": 5}, {"a": "--flag"}),
    )
    assert vals == {"a": 5, "b": 4, "c": 3, "d": 2, "e": 1}
    assert where["a"] == "--flag" and where["e"] == "live-probe"


def test_config_wins_over_yaml_and_the_difference_is_said(tmp_path):
    """Files on disk win (#18): the YAML variant fills only what the config lacks."""
    from omlx_profiles import load_registry

    cfg = json.loads(cfg_path("llama-3.2-1b-instruct").read_text())
    cfg.update(_name_or_path="meta-llama/Llama-3.2-1B-Instruct", max_position_embeddings=4096)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    r = resolve_path(f, registry=load_registry())
    p = r.profile
    assert p.max_context == 4096 and "max_position_embeddings" in p.provenance["max_context"]
    assert any("max_context: config.json 4096 used; the YAML variant says 131072" in n for n in r.notes)
    assert p.weights is not None and "llama.yaml" in p.provenance["weights"]  # what the config lacks: filled
    assert p.num_kv_heads == 8 and "num_key_value_heads" in p.provenance["num_kv_heads"]  # layout: the config's
