"""Recipe layouts against mlx-lm's own ``make_cache`` on the config branches the live check does not take.

``tests/test_recipes_live.py`` runs each recipe's one tiny config through prompts. A layout has other
branches too - the args class's default when a key is absent (jamba's ``attn_layer_period`` rule, lfm2_moe's
``layer_types`` fallback, recurrent_gemma's ``_block_types``), the incomplete last group of bailing's
``layer_group_size``, one layer per ``layer_types`` entry. Here each such config builds the REAL mlx-lm model
(no forward pass: cheap) and ``make_prompt_cache``'s classes and ArraysCache slot counts must equal what the
recipe extracts, layer by layer.
"""
from __future__ import annotations

import warnings

import pytest

from omlx_profiles.extraction.from_config import extract_config
from omlx_profiles.kv.bytes import kv_report
from omlx_profiles.mlxlm.recipes import live_config, recipe, recipes

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from mlx_lm.models.cache import make_prompt_cache  # noqa: E402

from omlx_profiles.live.build import build_model  # noqa: E402

pytestmark = pytest.mark.live

CLASS = {"full": "KVCache", "latent": "KVCache", "indexer": "KVCache", "sliding": "RotatingKVCache",
         "chunked": "ChunkedKVCache"}


def _expected(cfg: dict) -> list:
    prof = extract_config(cfg, dtype="bf16").profile()
    out = []
    for name in prof.layer_names:
        entries = prof.layer_types[name].entries
        if all(e.kind == "none" for e in entries):
            continue
        parts = [("ArraysCache", len(e.tensors)) if e.kind == "state" else (CLASS[e.kind], None) for e in entries]
        out.append(parts[0] if len(parts) == 1 else ("CacheList", tuple(parts)))
    return out


def _live(cfg: dict, *, empty: bool = True) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(cfg, "bfloat16")
    cache = make_prompt_cache(model)
    if empty:  # before the first call mlx-lm has allocated nothing: every ArraysCache slot is None
        assert [c.nbytes for c in cache] == [0] * len(cache)

    def one(c):
        name = type(c).__name__
        if name == "CacheList":
            return ("CacheList", tuple(one(x) for x in c.caches))
        return (name, len(c.cache) if name == "ArraysCache" else None)

    return [one(c) for c in cache]


def _cfg(module: str, **over) -> dict:
    cfg = live_config(recipe(module))
    inner = cfg[recipe(module).text.key] if recipe(module).text else cfg
    for k, v in over.items():
        if v is None:
            inner.pop(k, None)
        else:
            inner[k] = v
    return cfg


STATE_MODULES = sorted(m for m, r in recipes().items()
                       if any(k.cache == "state" for v in r.kinds.values() for k in (v if isinstance(v, list) else [v])))


@pytest.mark.parametrize("module", STATE_MODULES)
def test_state_recipe_declares_every_arrays_cache_slot(module):
    """Each state kind lists as many arrays as mlx-lm's ArraysCache(size) has slots, at every layer; before the
    first call the caches hold nothing, live and estimated."""
    cfg = _cfg(module)
    assert _expected(cfg) == _live(cfg)
    assert kv_report(extract_config(cfg, dtype="bf16").profile(), 0).total == 0  # and the estimate agrees


BRANCHES = [
    # ModelArgs.__post_init__: attention iff i % attn_layer_period == attn_layer_offset
    ("jamba", {"layers_block_type": None, "num_hidden_layers": 6, "attn_layer_period": 3, "attn_layer_offset": 2}),
    # full_attn_idxs absent: the 'full_attention' entries of layer_types
    ("lfm2_moe", {"full_attn_idxs": None, "layer_types": ["conv", "full_attention", "full_attention"]}),
    # block_types null: _block_types (the 9B checkpoints' spelling), cycled over 5 layers
    ("recurrent_gemma", {"block_types": None, "_block_types": ["recurrent", "attention"], "num_hidden_layers": 5}),
    # no layer_types: full iff i % 4 == 3
    ("olmo_hybrid", {"layer_types": None, "num_hidden_layers": 6}),
    # 7 layers in groups of 3: layer 6 is past the last whole group, so global
    ("bailing_moe_linear", {"num_hidden_layers": 7, "layer_group_size": 3}),
    ("bailing_hybrid", {"num_hidden_layers": 7, "layer_group_size": 3}),
    ("bailing_moe_v3", {"num_hidden_layers": 7, "layer_group_size": 3}),
    # one layer per layer_types entry, whatever num_hidden_layers says
    ("granitemoehybrid", {"layer_types": ["mamba", "attention", "mamba", "mamba"]}),
    # two sliding-window layers with their own heads
    ("baichuan_m1", {"sliding_window_layers": [0, 2]}),
    ("kimi_linear", {"linear_attn_config": {"kda_layers": [2], "num_heads": 2, "head_dim": 32}}),
    # mamba_enabled false: every layer attention; mamba_step 4: attention iff i % 4 == 2
    ("plamo2", {"mamba_enabled": False}),
    ("plamo2", {"mamba_step": 4, "num_hidden_layers": 6}),
]


@pytest.mark.parametrize("module,over", BRANCHES, ids=[f"{b[0]}-{i}" for i, b in enumerate(BRANCHES)])
def test_layout_branch_matches_mlx_lm(module, over):
    cfg = _cfg(module, **over)
    assert _expected(cfg) == _live(cfg)


def test_plamo2_with_too_few_layers_is_refused_and_mlx_lm_fails_too():
    """plamo2 reads cache[mamba_step // 2] for the attention mask: with fewer layers mlx-lm raises, and the
    recipe (``needs_residue``) refuses instead of answering."""
    from omlx_profiles.errors import UnsupportedError
    from omlx_profiles.live.probe import run_schedule

    cfg = _cfg("plamo2", num_hidden_layers=1)
    with pytest.raises(UnsupportedError, match="indexes layer 1"):
        extract_config(cfg, dtype="bf16").profile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_model(cfg, "bfloat16")
    with pytest.raises(IndexError):
        run_schedule(model, 2, "direct")
