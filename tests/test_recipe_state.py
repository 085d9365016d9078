"""State caches in module recipes: the shape formulas, their grammar, and what a bad config gets.

The byte-exactness of every state recipe against the live mlx-lm ArraysCache is
``tests/test_recipes_live.py``'s job; here: the formula language refuses what it must (it is data a
contributor writes, read without ``eval``), and a config that leaves a state dim unknown or empty is an
error naming the key, never a silent number.
"""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from omlx_profiles.errors import InputError, UnsupportedError
from omlx_profiles.extraction.from_config import extract_config
from omlx_profiles.kv.bytes import kv_report
from omlx_profiles.schema.formula import FormulaError, evaluate, keys, parse
from omlx_profiles.schema.module import KindRecipe, Modulo


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "a ** 2", "1.5", "a if b else c", "a[0]",
                                  "f(a)", "a and b", "-a < b", "", "lambda: 1"])
def test_formula_grammar_refuses(text):
    with pytest.raises(FormulaError):
        parse(text)


def test_formula_reads_keys_and_falls_back_with_or():
    cfg = {"num_heads": 4, "head_dim": 16, "n_groups": 2, "ssm_state_size": None, "state_size": 8, "cfg.k": 3}
    f = "num_heads * head_dim + 2 * n_groups * (ssm_state_size or state_size)"
    assert keys(f) == ["num_heads", "head_dim", "n_groups", "ssm_state_size", "state_size"]
    assert evaluate(f, cfg.get) == 4 * 16 + 2 * 2 * 8
    assert evaluate("cfg.k - 1", cfg.get) == 2
    assert evaluate("absent + 1", cfg.get) is None


def test_schema_state_kind_needs_arrays_and_valid_formulas():
    with pytest.raises(ValidationError):
        KindRecipe.model_validate({"cache": "state"})
    with pytest.raises(ValidationError):
        KindRecipe.model_validate({"cache": "full", "arrays": [{"name": "x", "shape": [1], "dtype": "model"}]})
    with pytest.raises(ValidationError, match="not allowed"):
        KindRecipe.model_validate({"cache": "state", "arrays": [{"name": "x", "shape": ["open(a)"], "dtype": "fp32"}]})
    with pytest.raises(ValidationError):
        Modulo.model_validate({"period": 2, "residue": "a ** 2", "kind": "a", "else": "b"})


MAMBA2 = {"model_type": "mamba2", "num_heads": 4, "head_dim": 16, "vocab_size": 128, "hidden_size": 64,
          "intermediate_size": 96, "state_size": 8, "num_hidden_layers": 3, "layer_norm_epsilon": 1e-5,
          "conv_kernel": 4, "n_groups": 2, "use_bias": False, "use_conv_bias": True, "tie_word_embeddings": True,
          "time_step_limit": [0.001, 100.0], "time_step_rank": "auto"}


def test_state_bytes_do_not_grow_with_the_prompt():
    prof = extract_config(MAMBA2, dtype="bf16").profile()
    per_layer = 3 * (4 * 16 + 2 * 2 * 8) * 2 + 4 * 16 * 8 * 4  # conv bf16 + ssm fp32
    for n in (1, 257, 3000):
        rep = kv_report(prof, n, dtype="bf16", schedule="generate", chunk=256)
        assert rep.total == 3 * per_layer


def test_missing_state_dim_names_the_key():
    cfg = dict(MAMBA2)
    del cfg["n_groups"]
    with pytest.raises((UnsupportedError, InputError), match="n_groups"):
        extract_config(cfg, dtype="bf16").profile()


def test_empty_state_dim_is_refused():
    cfg = dict(MAMBA2, conv_kernel=1)  # conv_kernel - 1 = 0: no conv window
    with pytest.raises(UnsupportedError, match="conv_kernel - 1"):
        extract_config(cfg, dtype="bf16").profile()


def test_wrong_type_in_a_state_dim_names_the_key():
    cfg = dict(MAMBA2, n_groups="two")
    with pytest.raises((InputError, UnsupportedError), match="n_groups"):
        extract_config(cfg, dtype="bf16").profile()
