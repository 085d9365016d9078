"""AutoAWQ / GPTQ checkpoints: the weights term is what mlx-lm holds after loading them, not the stored sum.

mlx-lm 0.32 repacks ``qweight``, replaces ``qzeros`` by ``biases`` and casts floats to the scales' dtype
while loading, so the loaded model is larger than the files. Truth here is the real ``mlx_lm.load_model``
on a tiny AWQ-layout checkpoint written to disk: the sum of its parameters' bytes.
"""
from __future__ import annotations

import json

import pytest

from .conftest import CONFIGS

pytest.importorskip("mlx_lm")
import mlx.core as mx  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402
from mlx_lm.utils import load_model  # noqa: E402

from omlx_profiles import load_registry  # noqa: E402
from omlx_profiles.extraction.from_config import resolve_path  # noqa: E402
from omlx_profiles.estimate.weights import estimate_weights  # noqa: E402

pytestmark = pytest.mark.live


def _awq_checkpoint(d, *, zeros: bool, float_dtype=mx.float16, method="awq"):
    cfg = json.loads((CONFIGS / "qwen3-0.6b.json").read_text())
    cfg.update(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
               num_hidden_layers=2, vocab_size=512, tie_word_embeddings=False, torch_dtype="float16")
    cfg["quantization_config"] = {"quant_method": method, "bits": 4, "group_size": 128, "zero_point": zeros,
                                  "version": "gemm"}
    h, inter, hd = 256, 512, 64
    w = {"model.embed_tokens.weight": mx.zeros((512, h), float_dtype), "lm_head.weight": mx.zeros((512, h), float_dtype),
         "model.norm.weight": mx.ones((h,), mx.float32)}  # an fp32 norm: cast to fp16 on load
    shapes = {"self_attn.q_proj": (4 * hd, h), "self_attn.k_proj": (2 * hd, h), "self_attn.v_proj": (2 * hd, h),
              "self_attn.o_proj": (h, 4 * hd), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h),
              "mlp.down_proj": (h, inter)}
    for i in range(2):
        p = f"model.layers.{i}"
        for name, (out_f, in_f) in shapes.items():
            w[f"{p}.{name}.qweight"] = mx.zeros((in_f, out_f // 8), mx.int32)
            w[f"{p}.{name}.scales"] = mx.ones((in_f // 128, out_f), float_dtype)
            if zeros:
                w[f"{p}.{name}.qzeros"] = mx.zeros((in_f // 128, out_f // 8), mx.int32)
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[f"{p}.{n}.weight"] = mx.ones((h,), float_dtype)
        w[f"{p}.self_attn.q_norm.weight"] = mx.ones((hd,), float_dtype)
        w[f"{p}.self_attn.k_norm.weight"] = mx.ones((hd,), float_dtype)
    mx.save_safetensors(str(d / "model.safetensors"), w)
    (d / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("zeros,method", [(True, "awq"), (False, "gptq")])
def test_awq_weights_equal_the_loaded_model(tmp_path, zeros, method):
    _awq_checkpoint(tmp_path, zeros=zeros, method=method)
    model, _ = load_model(tmp_path, lazy=True)
    live = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    w = estimate_weights(resolve_path(tmp_path, registry=load_registry(include_env=False)))
    assert w.exact and w.bytes == live, (w.bytes, live, w.reason)
    stored = (tmp_path / "model.safetensors").stat().st_size
    assert live > stored - 100_000  # mlx-lm holds more than the files (biases), not less
