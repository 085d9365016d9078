"""Layout branches a recipe's one live check does not reach, against the lazily built mlx-lm model.

``tests/test_recipes_live.py`` runs each recipe's tiny config; a recipe whose layout has fallbacks
(minimax_m3_vl: no index_block_size -> all dense; no layer_types -> sparse_attention_freq, nested under
sparse_attention_config or flat; neither -> all sparse) is checked here branch by branch: the extraction
must agree with the mlx-lm model built from the same config (cache classes, CacheList sizes, widths:
``live.verify.verify_profile``, nothing evaluated).
"""
from __future__ import annotations

import copy
import warnings

import pytest

from omlx_profiles.extraction.from_config import extract_config
from omlx_profiles.mlxlm.recipes import live_config, recipe

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from omlx_profiles.live.verify import verify_profile  # noqa: E402

pytestmark = pytest.mark.live


def _no_block_size(t):
    t.pop("index_block_size")


def _nested(t):
    for k in ("layer_types", "index_block_size", "index_head_dim"):
        t.pop(k)
    t["sparse_attention_config"] = {"sparse_block_size": 64, "sparse_attention_freq": [0, 1], "sparse_index_dim": 16,
                                    "sparse_num_index_heads": 2, "sparse_topk_blocks": 2}


def _flat(t):
    t.pop("layer_types")
    t["sparse_attention_freq"] = [1, 0]


def _none(t):
    t.pop("layer_types")


CASES = {  # name: (edit of the tiny text_config, expected kind per layer)
    "layer_types": (lambda t: None, ("dense", "sparse")),
    "no_index_block_size": (_no_block_size, ("dense", "dense")),
    "nested_sparse_attention_config": (_nested, ("dense", "sparse")),
    "flat_sparse_attention_freq": (_flat, ("sparse", "dense")),
    "no_layer_types_no_freq": (_none, ("sparse", "sparse")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_minimax_m3_vl_layout_branches_match_the_live_model(case):
    edit, kinds = CASES[case]
    cfg = copy.deepcopy(live_config(recipe("minimax_m3_vl")))
    edit(cfg["text_config"])
    p = extract_config(cfg, source=case, dtype="bf16").profile()
    assert p.layer_names == kinds
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert verify_profile(p, config=cfg) == []
