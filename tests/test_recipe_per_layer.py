"""Bad per-layer input of the attention recipes is a clear error naming the key (no mlx needed).

The byte-exact truth of these layouts is tests/test_recipes_live.py (openelm, nemotron-nas against the live
mlx-lm model); here only what the live check cannot show: configs mlx-lm itself refuses, and the kv_bits refusal
of a module whose attention crashes on a quantized cache.
"""
from __future__ import annotations

import copy

import pytest

from omlx_profiles.errors import InputError, UnsupportedError
from omlx_profiles.extraction.from_config import profile_from_config
from omlx_profiles.kv.bytes import KVQuant, kv_report
from omlx_profiles.mlxlm.recipes import live_config, recipe


def _cfg(module: str) -> dict:
    return copy.deepcopy(live_config(recipe(module)))


def test_a_per_layer_list_shorter_than_the_layers_is_unsupported():
    cfg = _cfg("openelm")
    cfg["num_kv_heads"] = cfg["num_kv_heads"][:-1]  # mlx-lm indexes num_kv_heads[i] and fails
    with pytest.raises(UnsupportedError, match=r"num_kv_heads has 2 entries, layer 2 needs one"):
        profile_from_config(cfg)


def test_a_non_boolean_block_switch_names_its_path():
    cfg = _cfg("nemotron-nas")
    cfg["block_configs"][1]["attention"]["no_op"] = "yes"
    with pytest.raises(InputError, match=r"block_configs\[1\]\.attention\.no_op must be true or false"):
        profile_from_config(cfg)


def test_per_layer_heads_and_slots():
    p = profile_from_config(_cfg("openelm"))
    assert [p.layer_types[n].entries[0].n_kv for n in p.layer_names] == [1, 2, 4]
    assert p.num_heads == 8  # the largest layer's query heads
    q = profile_from_config(_cfg("nemotron-nas"))
    ents = [q.layer_types[n].entries[0] for n in q.layer_names]
    assert [(e.kind, e.slot) for e in ents] == [("full", False), ("none", False), ("full", False), ("none", True)]


def test_kv_bits_refused_where_the_module_crashes():
    p = profile_from_config(_cfg("phi"))
    assert kv_report(p, 300).total > 0
    with pytest.raises(UnsupportedError, match="kv_bits with .*phi.py casts the attention output"):
        kv_report(p, 300, quant=KVQuant(8, 32, 0))
    kv_report(p, 300, quant=KVQuant(8, 32, 5000))  # below quantized_kv_start nothing is converted: a number
