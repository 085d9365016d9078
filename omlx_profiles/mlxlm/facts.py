"""What mlx-lm 0.32.2 does with a config.json, as data (no mlx import).

Why a copy and not an import: the estimator must run in processes that never import mlx (an engine's
request path, CI without MLX). The copy is checked against the installed mlx-lm by
``tests/test_extract_specs.py`` (the remapping table, every ``required`` set and every default below),
so a new mlx-lm release that changes one of them fails a test instead of silently changing a number.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .model_types import ARCHITECTURE_REMAPPING as ARCH_REMAPPING, REMAPPING

MLX_LM_VERSION = "0.32.2"

#: ``mlx_lm.utils.MODEL_REMAPPING``: config model_type -> the module that builds it (data: index.yaml).
MODEL_REMAPPING: dict[str, str] = REMAPPING

#: ``mlx_lm.utils.MODEL_ARCHITECTURE_REMAPPING``: (model_type, architecture) -> module; checked first (data:
#: index.yaml ``architecture_remapping``).
ARCHITECTURE_REMAPPING: dict[tuple[str, str], str] = ARCH_REMAPPING

#: Keys under which multimodal wrappers keep the language model's config (the seed's order).
WRAPPER_KEYS = ("text_config", "language_config", "llm_config")


@dataclass(frozen=True)
class ArgsSpec:
    """One mlx-lm args class: the fields ``from_dict`` cannot do without, and the defaults it fills.

    ``head_dim`` says how the attention layers get their head width:

    * ``optional``: ``head_dim or hidden_size // num_attention_heads`` (llama and friends);
    * ``explicit``: the ``head_dim`` field (required or defaulted), never derived;
    * ``derived``:  ``hidden_size // num_attention_heads``; a config ``head_dim`` is ignored (qwen2, phi3, ...).

    ``kv_from_heads``: ``__post_init__`` replaces ``num_key_value_heads=None`` by ``num_attention_heads``.
    """

    cls: str  # "module.Class", for messages and the drift test
    required: frozenset[str]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    head_dim: str = "optional"
    kv_from_heads: bool = False


def _spec(cls, required, defaults=None, head_dim="optional", kv_from_heads=False) -> ArgsSpec:
    return ArgsSpec(cls, frozenset(required.split()), dict(defaults or {}), head_dim, kv_from_heads)


#: Args classes of the modules extracted by a hand-written rule (``to_layers.RULES``); every other module's
#: args class is in its file (``profiles/mlx_lm/<module>.yaml``: ``args``, or ``text_by.args_class``).
SPECS: dict[str, ArgsSpec] = {
    "nemotron_h": _spec(
        "nemotron_h.ModelArgs",
        "model_type vocab_size hidden_size intermediate_size max_position_embeddings num_attention_heads "
        "num_key_value_heads attention_bias mamba_num_heads mamba_head_dim mamba_proj_bias ssm_state_size "
        "conv_kernel n_groups mlp_bias layer_norm_epsilon use_bias use_conv_bias",
        {"hybrid_override_pattern": None, "layers_block_type": None, "layer_types": None,
         "num_hidden_layers": None, "head_dim": None},
        "optional"),
}
