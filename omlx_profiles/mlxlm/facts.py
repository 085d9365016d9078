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
