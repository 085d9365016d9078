"""How mlx-lm itself reads a config.json: model class, text-stack args, layer kinds.

The harness must mirror mlx-lm, not Hugging Face: a key that HF honours but mlx-lm ignores
(`attention_head_dim` for nemotron_h, `sliding_window` for gemma2/phi3/mistral without
`layer_types`) changes nothing in the mlx-lm cache, and a key that is *absent* takes mlx-lm's
dataclass default (gemma3_text: head_dim 256, sliding_window_pattern 6; the gemma3 wrapper:
8 query heads, 4 KV heads, vocab 262208). So every effective value is read back from mlx-lm's
own ``ModelArgs.from_dict`` instead of from the raw dict.

Only ``omlx_profiles.live`` imports this module; it imports mlx_lm.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from typing import Any

from mlx_lm.utils import _get_classes

from ..mlxlm.facts import WRAPPER_KEYS  # the keys a VLM wrapper nests its text config under: one list
from ..mlxlm.recipe_files import module_files
from ..mlxlm.recipe_layout import layer_kind_names
from ..mlxlm.recipes import reader_for, recipes


def harness_remap() -> dict[str, str]:
    """model_type -> mlx-lm module for checkpoints ``mlx_lm.utils._get_classes`` cannot import: a module file's
    ``checkpoint_model_type`` (mlx-lm 0.32.2 ships ``lfm2-vl.py``, LFM2-VL checkpoints say ``lfm2_vl``, so
    ``mlx_lm.load`` raises "Model type lfm2_vl not supported"). The harness maps them so the text stack can
    still be measured; callers are told through ``BuildInfo.module``."""
    return {f.checkpoint_model_type: m for m, f in module_files().items() if f.checkpoint_model_type}


def get_classes(config: dict) -> tuple[type, type, str]:
    """Return (Model, ModelArgs, module name) the way mlx-lm picks them, plus ``harness_remap()``."""
    model_type = config["model_type"]
    name = harness_remap().get(model_type)
    if name is not None:
        arch = importlib.import_module(f"mlx_lm.models.{name}")
        return arch.Model, arch.ModelArgs, name
    model_cls, args_cls = _get_classes(config)
    return model_cls, args_cls, model_cls.__module__.rsplit(".", 1)[-1]


def text_dict(config: dict) -> dict:
    """The dict that describes the layer stack: the wrapper's inner config, or config itself.

    Returns the *same object* (not a copy), so callers may edit it in place.
    """
    for key in WRAPPER_KEYS:
        inner = config.get(key)
        if isinstance(inner, dict):
            return inner
    return config


def _text_module(module: str, text_model_type: str | None) -> str | None:
    """The module whose recipe reads a wrapper's text config, from the wrapper's file
    (``profiles/mlx_lm/<module>.yaml``): ``text_by`` (picked by the text model_type: mistral3), else the text
    recipe it wraps (``args.class``'s module: gemma3 -> gemma3_text); None when the file has neither."""
    f = module_files().get(module)
    if f is None:
        return None
    if f.text_by is not None:
        return f.text_by.module_for(text_model_type)
    if f.text is None or f.args is None:
        return None
    return f.args.cls.split(".", 1)[0]


def _inner_args_class(module: str, text_model_type: str | None):
    """The args class a wrapper module hands its text_config to (its text module's ``args.class``)."""
    text = _text_module(module, text_model_type)
    f = module_files().get(text) if text is not None else None
    if f is None or f.args is None:
        return None
    pkg, name = f.args.cls.rsplit(".", 1)
    return getattr(importlib.import_module(f"mlx_lm.models.{pkg}"), name)


def text_args(config: dict) -> Any:
    """mlx-lm's parsed args for the text stack, every default filled in.

    For a wrapper the wrapper's ``__post_init__`` runs first (gemma3 injects vocab and head
    counts into text_config there), then the inner class parses the result, exactly as the
    wrapper's ``Model.__init__`` does. Raises whatever mlx-lm raises for a config it cannot read.
    """
    cfg = copy.deepcopy(config)
    _, args_cls, module = get_classes(cfg)
    args = args_cls.from_dict(cfg)
    tc = getattr(args, "text_config", None)
    if tc is None:
        return args
    if not isinstance(tc, dict):  # llama4: already a TextArgs dataclass
        return tc
    inner_cls = _inner_args_class(module, tc.get("model_type"))
    if inner_cls is None:
        raise ValueError(
            f"no text-args resolver for wrapper module {module!r}: profiles/mlx_lm/{module}.yaml names no text "
            "recipe (text / text_by)"
        )
    return inner_cls.from_dict(tc)


def module_name(config: dict) -> str:
    return get_classes(config)[2]


def text_family(config: dict) -> str:
    """mlx-lm module that builds the text layers (``mistral`` → ``llama``, wrappers → inner)."""
    module = module_name(config)
    inner = text_dict(config)
    if inner is config:
        return module
    mt = inner.get("model_type")
    text = _text_module(module, mt if isinstance(mt, str) else None)
    return text if text is not None else module


def layer_kinds(config: dict) -> list[str]:
    """The kind of every layer of the text stack, as mlx-lm will lay it out.

    Read by the text family's module recipe (``profiles/mlx_lm/<module>.yaml``: its layout over mlx-lm's
    *effective* args, so a defaulted pattern counts) with the recipe's kind names (``full``, ``sliding``,
    ``linear``, ``conv``, ...). This is the layer *pattern* (what ``shrink_config(layers=...)`` must keep),
    not the cache class: the mistral3 wrapper, for instance, still builds sliding layers (masks) but gives
    them KVCache. nemotron_h's kinds are the characters of ``hybrid_override_pattern`` (its MLP and MoE blocks
    are distinct kinds, so a prefix keeps both).
    """
    family = text_family(config)
    a = text_args(config)
    n = getattr(a, "num_hidden_layers", None)
    rec = recipes().get(family)
    if rec is not None:
        data = {f.name: getattr(a, f.name) for f in dataclasses.fields(a)} if dataclasses.is_dataclass(a) else vars(a)
        return layer_kind_names(rec, reader_for(rec, data, label=f"mlx-lm {family} args"))[0]
    return ["full"] * n


def min_layers(config: dict) -> int:
    """Smallest prefix of the layer stack that contains every layer kind the model has.

    For periodic patterns that is one full period (gemma3: 6, qwen3-next: 4, gpt-oss: 2,
    llama4: 4); for nemotron_h it runs to the first attention layer. mlx-lm needs this much in
    several models anyway (gpt_oss, llama, qwen3_next index the first layer of each kind to
    build masks).
    """
    kinds = layer_kinds(config)
    wanted = set(kinds)
    seen: set[str] = set()
    for i, k in enumerate(kinds):
        seen.add(k)
        if seen == wanted:
            return i + 1
    return len(kinds)
