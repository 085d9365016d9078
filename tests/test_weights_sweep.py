"""Issue 14: for every checkpoint with safetensors headers that the tests build, the approximate weights (the
profile's parameter count at the checkpoint's quantization, what the estimate says without the files) are at or
above the exact bytes of that checkpoint.

The checkpoints are the tests' own: the fake-Hub layouts of tests/test_hub.py (``fakehub.llama_like``: every
quantization mode and width MLX writes, affine 2-8 bits at groups 32-128, mxfp4 / nvfp4 / mxfp8, bf16, and the
mixed per-layer 4/8-bit checkpoint), here over every dense llama-shaped real config of tests/configs that the
registry has a parameter count for, not only the one the Hub test uses. Truth is the data bytes of the tensors
as the builder lays them out (``fakehub.checkpoint``), not our reader. The mixed-precision MoE checkpoint
written by MLX itself is tests/test_weights.py::test_approximate_covers_a_mixed_precision_checkpoint.
"""
from __future__ import annotations

import json

import pytest

from omlx_profiles import load_registry
from omlx_profiles.estimate.weights import estimate_weights

from .conftest import CONFIGS
from .fakehub import checkpoint, llama_like
from .test_hub import MODES, quantized

REG = load_registry(include_env=False)
LLAMA_SHAPED = ("llama", "qwen2", "qwen3", "mistral")


def _dense_configs() -> list[str]:
    out = []
    for p in sorted(REG, key=lambda p: p.name):
        path = CONFIGS / f"{p.name}.json"
        if p.weights is None or not p.weights.params or not path.is_file():
            continue
        c = json.loads(path.read_text())
        if c.get("model_type") in LLAMA_SHAPED and "intermediate_size" in c and not c.get("num_experts"):
            out.append(p.name)
    return out


CASES = _dense_configs()


def _approximate(tmp_path, name: str, config: dict):
    """What the estimate says for ``name`` knowing the checkpoint's config.json but not its weight files."""
    d = tmp_path / "cfg"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    return estimate_weights(REG.resolve(name), model_dir=d)


def test_the_sweep_is_not_empty():
    assert len(CASES) >= 10 and "qwen3-0.6b" in CASES


@pytest.mark.parametrize("name", CASES)
def test_approximate_covers_every_mode(tmp_path, name):
    base = json.loads((CONFIGS / f"{name}.json").read_text())
    for label, q in MODES:
        config = quantized(base, q)
        _, exact = checkpoint(llama_like(config, q), 3)
        w = _approximate(tmp_path, name, config)
        assert not w.exact and w.bytes is not None, (name, label, w.reason)
        assert w.bytes >= exact, f"{name} {label}: approximate {w.bytes:,} < exact {exact:,} ({w.reason})"


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("every,high", [(4, {"group_size": 64, "bits": 8}), (3, {"group_size": 32, "bits": 6}),
                                        (1, False)])
def test_approximate_covers_mixed_per_layer(tmp_path, name, every, high):
    """mlx-lm's mixed recipes: some blocks at a wider width (or kept unquantized: ``false``) in config.json's
    per-module ``quantization`` entries; the layout of test_hub.py::test_mixed_per_layer_quantization."""
    q4 = {"group_size": 64, "bits": 4}
    config = quantized(json.loads((CONFIGS / f"{name}.json").read_text()), q4)
    blocks = range(0, config["num_hidden_layers"], every)
    mods = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
            "mlp.up_proj", "mlp.down_proj")
    for i in blocks:
        for m in (mods if every > 1 else mods[-1:]):
            config["quantization"][f"model.layers.{i}.{m}"] = high
    if high is False:  # only the down projections kept unquantized, in every block
        tensors = llama_like(config, q4)
        bf = {n for n in (f"model.layers.{i}.mlp.down_proj" for i in blocks)}
        out = []
        for t in tensors:
            stem = t[0].rsplit(".", 1)[0]
            if stem in bf:
                if t[0].endswith(".weight"):
                    out.append((t[0], "BF16", [config["hidden_size"], config["intermediate_size"]]))
                continue
            out.append(t)
        tensors = out
    else:
        tensors = llama_like(config, q4, per_layer={i: high for i in blocks})
    _, exact = checkpoint(tensors, 2)
    w = _approximate(tmp_path, name, config)
    assert w.bytes >= exact, f"{name}: approximate {w.bytes:,} < exact {exact:,} ({w.reason})"
    assert "upper bound" in w.reason


def test_without_overrides_the_bound_changes_nothing(tmp_path):
    """A uniform checkpoint's approximation is not inflated by the override rule (4-bit Qwen3-0.6B: within
    0.5% of the headers -- the norm / bias bound's slack, 0.18% here -- and no override sentence)."""
    q = {"group_size": 64, "bits": 4}
    config = quantized(json.loads((CONFIGS / "qwen3-0.6b.json").read_text()), q)
    _, exact = checkpoint(llama_like(config, q), 1)
    w = _approximate(tmp_path, "qwen3-0.6b", config)
    assert exact <= w.bytes <= exact * 1.005 and "override" not in w.reason


# --------------------------------------------------------------------------------------------------
# Real mlx-lm checkpoints: tiny models of each layout built by mlx-lm, quantized by mlx-lm's own
# ``quantize_model`` (the function ``mlx_lm.convert`` calls, with its recipes and the model's own
# ``quant_predicate``: 8-bit routers), saved by ``mlx_lm.utils.save_model``. Truth: MLX's ``nbytes`` of the
# quantized parameters (and the saved headers, equal). The approximation sees only config.json (with its
# ``quantization`` block, per-module overrides included) and the unquantized model's parameter count,
# which is what a registry profile's ``weights.params`` is.
# --------------------------------------------------------------------------------------------------
_TINY = dict(hidden_size=128, num_hidden_layers=4, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=320, rms_norm_eps=1e-5, max_position_embeddings=512, rope_theta=10000.0)
TINY = {
    "llama": dict(_TINY, model_type="llama", tie_word_embeddings=False),
    "qwen2": dict(_TINY, model_type="qwen2", tie_word_embeddings=True),  # q/k/v biases
    "gemma3_text": dict(_TINY, model_type="gemma3_text", head_dim=32, sliding_window=64, sliding_window_pattern=2,
                        query_pre_attn_scalar=32, rope_local_base_freq=10000.0),  # four norms per block
    "mixtral": dict(_TINY, model_type="mixtral", num_local_experts=4, num_experts_per_tok=2, tie_word_embeddings=False),
    "qwen3_moe": dict(_TINY, model_type="qwen3_moe", head_dim=32, num_experts=8, num_experts_per_tok=2,
                      moe_intermediate_size=64, decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
                      tie_word_embeddings=False),  # q/k norms, 8-bit router override
    "gpt_oss": dict(_TINY, model_type="gpt_oss", head_dim=32, num_local_experts=4, num_experts_per_tok=2,
                    sliding_window=64, layer_types=["sliding_attention", "full_attention"] * 2,
                    swiglu_limit=7.0),  # expert biases, sinks
    "qwen3_next": dict(_TINY, model_type="qwen3_next", head_dim=32, num_experts=8, num_experts_per_tok=2,
                       moe_intermediate_size=64, shared_expert_intermediate_size=64, decoder_sparse_step=1,
                       mlp_only_layers=[], norm_topk_prob=True, full_attention_interval=2, linear_num_value_heads=4,
                       linear_num_key_heads=2, linear_key_head_dim=32, linear_value_head_dim=32,
                       linear_conv_kernel_dim=4, partial_rotary_factor=0.25,
                       tie_word_embeddings=False),  # gated DeltaNet: conv1d, A_log, dt_bias
}
# (mode, bits, group, recipe): every mode MLX 0.32 quantizes (mlx/ops.cpp: affine 2-8 bits at groups 32/64/128;
# mxfp4 g32, nvfp4 g16, mxfp8 g32, one-byte scales, no biases) and mlx_lm.convert's mixed recipes
QUANTS = [("affine", 4, 64, None), ("affine", 2, 32, None), ("affine", 3, 128, None), ("affine", 5, 64, None),
          ("affine", 8, 64, None), ("mxfp4", None, None, None), ("nvfp4", None, None, None),
          ("mxfp8", None, None, None), ("affine", 4, 64, "mixed_3_6"), ("affine", 4, 64, "mixed_2_6")]


def _approximate_for(tmp_path, config: dict, params: int, **kw):
    """The approximate weights for a checkpoint whose config.json is ``config`` and whose unquantized model has
    ``params`` parameters, without its weight files (the profile is extracted from the config, as for a local
    directory; ``weights.params`` set the way the registry sets it)."""
    import dataclasses

    from omlx_profiles.extraction.from_config import resolve_path
    from omlx_profiles.schema.family import Weights

    d = tmp_path / "cfg-only"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    res = resolve_path(d)
    res = dataclasses.replace(res, profile=dataclasses.replace(res.profile, weights=Weights(params=params)))
    return estimate_weights(res, model_dir=d, **kw)


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_real_mlx_lm_checkpoints(tmp_path, model_type):
    mx = pytest.importorskip("mlx.core")
    from mlx.utils import tree_flatten

    pytest.importorskip("mlx_lm")
    from mlx_lm.convert import mixed_quant_predicate_builder
    from mlx_lm.utils import _get_classes, quantize_model, save_model

    from omlx_profiles.estimate.safetensors import read_checkpoint

    base = TINY[model_type]
    model_cls, args_cls = _get_classes(base)
    worst = []
    for mode, bits, group, recipe in QUANTS + [("affine", 2, 32, "group not stated")]:
        model = model_cls(args_cls.from_dict(base))
        model.set_dtype(mx.bfloat16)
        params = sum(v.size for _, v in tree_flatten(model.parameters()))
        pred = mixed_quant_predicate_builder(recipe, model, group) if recipe and recipe.startswith("mixed") else None
        model, qconfig = quantize_model(model, dict(base), group, bits, mode=mode, quant_predicate=pred)
        held = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
        d = tmp_path / f"{mode}-{bits}-{group}-{recipe}"
        d.mkdir()
        save_model(d, model)
        assert read_checkpoint(d).nbytes == held  # the headers are what MLX holds
        if recipe == "group not stated":  # the approximation is told 2 bits and nothing else
            w = _approximate_for(tmp_path, dict(base), params, bits=2)
            assert w.group_size == 32 and "not stated" in w.reason
        else:
            w = _approximate_for(tmp_path, qconfig, params)
        assert not w.exact and w.bytes is not None, (model_type, mode, bits, recipe, w.reason)
        assert w.bytes >= held, f"{model_type} {mode}/{bits}/{group}/{recipe}: approximate {w.bytes:,} < {held:,} " \
                                f"({w.reason})"
        worst.append(w.bytes / held)
    print(model_type, f"approx/exact {min(worst):.4f}..{max(worst):.4f} over {len(worst)} checkpoints")


# --------------------------------------------------------------------------------------------------
# VLM checkpoints: the vision tower is in the files, not in the text profile's parameter count.
# --------------------------------------------------------------------------------------------------
#: github leo-kreisman/Qwen3.5-9B-MLX-8bit@57b661376e13233dcd17a91f69f6fd00ada7f1c6 (an MLX 8-bit conversion of
#: Qwen/Qwen3.5-9B): model.safetensors.index.json metadata.total_size; its config.json is tests/configs/qwen3.5-9b.json
#: with ``quantization: {group_size: 64, bits: 8, mode: affine}``; its weight_map stores ``language_model.*``
#: quantized and ``vision_tower.*`` (patch_embed.proj, pos_embed, blocks.N.{attn.qkv, attn.proj, mlp.linear_fc1,
#: mlp.linear_fc2, norm1, norm2}, merger.{norm, linear_fc1, linear_fc2}, weights and biases) without scales
QWEN35_9B_MLX_8BIT_TOTAL = 10_426_433_504
#: github Ibtasam-98/medgemma-27b-it@248890241658b01897602b12d3b9fc920ecb4676 (google/medgemma-27b-it, bf16, the
#: Gemma 3 27B architecture: text and vision dims equal tests/configs/gemma-3-27b-it.json's):
#: model.safetensors.index.json metadata.total_size, with vision_tower.vision_model.* and multi_modal_projector.*
MEDGEMMA_27B_TOTAL = 54_864_813_280


def _qwen_vl_tower_bytes(vc: dict) -> int:
    """Bytes of the tensors the Qwen3.5-9B index names under ``vision_tower.``, shapes from the Qwen3-VL vision
    architecture (patch Conv3d [W, C, t, p, p] + bias, pos_embed [P, W], per block qkv [3W, W], proj [W, W],
    fc1 [I, W], fc2 [W, I] with biases and two LayerNorms, merger LayerNorm [W], fc1 [4W, 4W], fc2 [T, 4W]), bf16."""
    w, i, p, t = vc["hidden_size"], vc["intermediate_size"], vc["patch_size"], vc["out_hidden_size"]
    m = w * vc["spatial_merge_size"] ** 2
    embed = w * vc["in_channels"] * vc["temporal_patch_size"] * p * p + w + vc["num_position_embeddings"] * w
    block = 3 * w * w + 3 * w + w * w + w + i * w + i + w * i + w + 4 * w
    merger = 2 * w + m * m + m + t * m + t
    return 2 * (embed + vc["depth"] * block + merger)


def test_vlm_qwen35_9b_mlx_8bit_checkpoint(tmp_path):
    """The published size of a real MLX 8-bit Qwen3.5-9B (tower included) is reproduced from mlx-lm's text model
    (built lazily at real dims, quantized by mlx-lm) plus the tower's tensors; the approximate weights cover it,
    and would not without the tower bound."""
    mx = pytest.importorskip("mlx.core")
    from mlx.utils import tree_flatten

    pytest.importorskip("mlx_lm")
    from mlx_lm.utils import _get_classes, quantize_model

    config = json.loads((CONFIGS / "qwen3.5-9b.json").read_text())
    model_cls, args_cls = _get_classes(config)
    model = model_cls(args_cls.from_dict(config))  # lazy: shapes only, nothing is allocated
    model.set_dtype(mx.bfloat16)
    model, _ = quantize_model(model, dict(config), 64, 8)
    text = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    rebuilt = text + _qwen_vl_tower_bytes(config["vision_config"])
    assert abs(rebuilt - QWEN35_9B_MLX_8BIT_TOTAL) <= 1e-5 * QWEN35_9B_MLX_8BIT_TOTAL, rebuilt
    q = {"group_size": 64, "bits": 8, "mode": "affine"}
    w = _approximate(tmp_path, "qwen3.5-9b", dict(config, quantization=q, quantization_config=q))
    assert w.bytes >= QWEN35_9B_MLX_8BIT_TOTAL, (w.bytes, w.reason)
    assert "vision tower bound" in w.reason
    registry_only = estimate_weights(REG.resolve("mlx-community/Qwen3.5-9B-8bit"))
    assert registry_only.bytes >= QWEN35_9B_MLX_8BIT_TOTAL and "vision_params" in registry_only.reason
    # the text model alone (what the approximation was before the tower bound) is under the checkpoint
    assert text < QWEN35_9B_MLX_8BIT_TOTAL


def test_vlm_medgemma_27b_bf16_checkpoint(tmp_path):
    config = json.loads((CONFIGS / "gemma-3-27b-it.json").read_text())
    w = _approximate(tmp_path, "gemma-3-27b-it", config)
    assert w.bytes >= MEDGEMMA_27B_TOTAL, (w.bytes, w.reason)
    assert estimate_weights(REG.resolve("gemma-3-27b-it")).bytes >= MEDGEMMA_27B_TOTAL
    assert 2 * REG.resolve("gemma-3-27b-it").profile.weights.params < MEDGEMMA_27B_TOTAL  # text only: under


@pytest.mark.parametrize("drop", ["intermediate_size", "patch_size", "num_hidden_layers", "hidden_size"])
def test_vlm_without_tower_dims_is_unknown(tmp_path, drop):
    config = json.loads((CONFIGS / "gemma-3-27b-it.json").read_text())
    del config["vision_config"][drop]
    w = _approximate(tmp_path, "gemma-3-27b-it", config)
    assert w.bytes is None and w.label == "unknown" and drop.split("_")[0] in w.reason and "vision" in w.reason


def test_registry_vision_params_follow_their_configs():
    """Every registry variant whose config (tests/configs) has a vision_config carries the tower bound of that
    config in weights.vision_params (so an id without a directory counts the tower too)."""
    from omlx_profiles.estimate.weights.vision import vision_bound, vision_config

    seen = 0
    for p in REG:
        path = CONFIGS / f"{p.name}.json"
        if not path.is_file() or p.weights is None or not p.weights.params:
            continue
        c = json.loads(path.read_text())
        if vision_config(c) is None:
            assert not p.weights.vision_params, p.name
            continue
        seen += 1
        assert p.weights.vision_params == vision_bound(c, p.hidden_size).params, p.name
    assert seen >= 5
