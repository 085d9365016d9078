"""A recipe -> the tiny mlx-lm config its live check builds (``live.recipe_check``). No module name here."""
from __future__ import annotations

import copy
from typing import Any

from ..errors import ProfileError
from ..schema.module import ModuleRecipe

# --------------------------------------------------------------------------------------------------
# recipe -> the tiny mlx-lm config the live check builds
# --------------------------------------------------------------------------------------------------

#: generic tiny dims (canonical names); a recipe's ``live.config`` overrides and completes them
TINY: dict[str, Any] = {
    "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "vocab_size": 128, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": True, "num_hidden_layers": 2,
}


#: the head width the live check writes into a config whose recipe derives or optionally reads head_dim
HEAD_DIM_PROBE = 64


def live_config(rec: ModuleRecipe, *, probe_head_dim: bool = True) -> dict:
    """The tiny config of ``rec``'s live check: generic tiny dims under the module's key names, the
    recipe's ``live.config`` on top, ``model_type`` = the module."""
    cfg: dict[str, Any] = {"model_type": rec.module}
    nested: dict[str, Any] = {}
    for k, v in TINY.items():
        if not (rec.args.mha and k == "num_key_value_heads"):
            key = rec.args.keys.get(k, k)
            (nested if "." in key else cfg)[key] = copy.deepcopy(v)
    cfg.update(copy.deepcopy(rec.live.config))
    for path, v in nested.items():  # a tiny dim at a nested key path, unless live.config set it
        *outer, last = path.split(".")
        cur = cfg
        for part in outer:
            cur = cur.setdefault(part, {})
            if not isinstance(cur, dict):
                raise ProfileError(f"profiles/mlx_lm/{rec.module}.yaml: live.config {part} must be an object")
        cur.setdefault(last, v)
    hd_key = rec.args.keys.get("head_dim", "head_dim")
    if probe_head_dim and rec.args.head_dim != "explicit" and hd_key not in cfg:
        # A head_dim unlike hidden // heads (128 // 4 = 32; 64 keeps kv_bits groups of 32 and 64 whole), so the live check tells "optional" (mlx-lm uses
        # it) from "derived" (mlx-lm ignores it): a wrong rule is a wrong KV width, not a passing test.
        cfg[hd_key] = HEAD_DIM_PROBE
    if rec.text is not None:  # a wrapper: the tiny language model goes under its key
        return {"model_type": rec.module, **copy.deepcopy(rec.live.top), rec.text.key: cfg}
    return cfg
