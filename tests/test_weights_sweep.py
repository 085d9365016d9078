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
    0.01% of the headers, and no override sentence)."""
    q = {"group_size": 64, "bits": 4}
    config = quantized(json.loads((CONFIGS / "qwen3-0.6b.json").read_text()), q)
    _, exact = checkpoint(llama_like(config, q), 1)
    w = _approximate(tmp_path, "qwen3-0.6b", config)
    assert exact <= w.bytes <= exact * 1.0001 and "override" not in w.reason
