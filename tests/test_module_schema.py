"""The module-file shapes that replaced the last hand-written extraction code (session 7): ``text_by`` (a
wrapper that picks its language model's module by the text model_type), a whole-stack ``chars`` layout with
block-name fallbacks, and ``ignores[...].unless_equal``. Their byte-exact truth is live (tests/test_extract_live.py
``test_text_by_wrapper_equals_live``, tests/test_recipes_live.py for nemotron_h); here: the schema refuses what
the interpreters cannot mean, and the interpreters read the data, not a module name."""
from __future__ import annotations

import copy
import json

import pytest
from pydantic import ValidationError

from omlx_profiles.errors import InputError, UnsupportedError
from omlx_profiles.extraction.from_config import extract_config
from omlx_profiles.mlxlm.recipes import module_files
from omlx_profiles.schema.module import ModuleRecipe
from omlx_profiles.schema.module_layout import Layout

from .test_extract import cfg_path

CHARS = {"key": "pattern", "map": {"M": "m", "*": "a"}}


@pytest.mark.parametrize("chars,extra,match", [
    ({**CHARS, "lists": ["blocks"]}, {}, "'lists' and 'names' are given together"),
    ({**CHARS, "names": {"mamba": "M"}}, {}, "'lists' and 'names' are given together"),
    ({**CHARS, "as_string": True}, {}, "'as_string' needs 'length'"),
    ({**CHARS, "length": True}, {"shared": "num_kv_shared_layers"}, "is the layout by itself"),
])
def test_chars_shapes_the_interpreter_cannot_mean_are_refused(chars, extra, match):
    with pytest.raises(ValidationError, match=match):
        Layout.model_validate({"chars": chars, **extra})


def test_text_by_is_for_traits_only_files():
    data = {"module": "w", "mlx_lm": "0.32.2", "text_by": {"args_class": "w.ModelArgs", "modules": {"a": "llama"},
                                                          "default": "llama"},
            "text": {"key": "text_config", "recipe": "llama"}}
    with pytest.raises(ValidationError, match="traits-only wrapper file"):
        ModuleRecipe.model_validate(data)
    del data["text"]
    assert ModuleRecipe.model_validate(data).text_by.module_for("a") == "llama"
    assert ModuleRecipe.model_validate(data).text_by.module_for(None) == "llama"


def _devstral() -> dict:
    return json.loads(cfg_path("devstral-small-2-24b-instruct").read_text())


def test_text_by_picks_the_module_its_data_names(monkeypatch):
    """Extraction follows mistral3.yaml's text_by, not a name in Python: point ministral3 configs at the mistral4
    recipe and a ministral3 text config is refused the way mistral4's reader refuses it."""
    cfg = _devstral()
    assert extract_config(cfg).text_model_type == "ministral3"
    files = dict(module_files())
    tb = files["mistral3"].text_by.model_copy(update={"modules": {"ministral3": "mistral4"}})
    files["mistral3"] = files["mistral3"].model_copy(update={"text_by": tb})
    monkeypatch.setattr("omlx_profiles.extraction.from_config.module_files", lambda: files)
    with pytest.raises(UnsupportedError, match="mistral4"):
        extract_config(cfg)


def test_text_by_defaults_and_refusals():
    cfg = _devstral()
    ex = extract_config(cfg)
    assert ex.payload.get("tie_word_embeddings") is False  # mistral3.ModelArgs.__post_init__ (text_by.defaults)
    cfg["text_config"]["tie_word_embeddings"] = True
    assert extract_config(cfg).payload["tie_word_embeddings"] is True  # only where the text config lacks it
    bad = copy.deepcopy(cfg)
    del bad["text_config"]
    with pytest.raises(UnsupportedError, match="has no text_config, which mlx-lm's mistral3.ModelArgs requires"):
        extract_config(bad)
    bad["text_config"] = [1]
    with pytest.raises(InputError, match="text_config must be an object"):
        extract_config(bad)


def _nemotron() -> dict:
    return json.loads(cfg_path("nemotron-h-56b-base-8k").read_text())


def test_whole_stack_chars_fallbacks_and_refusals():
    cfg = _nemotron()
    pat = cfg.pop("hybrid_override_pattern")
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    with pytest.raises(UnsupportedError, match="neither hybrid_override_pattern nor layers_block_type nor layer_types"):
        extract_config(cfg)
    cfg["layers_block_type"] = [names[c] for c in pat]
    ex = extract_config(cfg)
    lay = ex.payload["layers"]
    assert ex.payload["num_layers"] == len(pat) and isinstance(lay.get("pattern", lay.get("types")), str)  # as_string
    assert extract_config(_nemotron()).payload["layers"] == lay  # the block list reads as the pattern
    cfg["layers_block_type"] = ["mamba", "bogus"]
    with pytest.raises(UnsupportedError, match=r"layer block types \['bogus'\]"):
        extract_config(cfg)
    cfg.pop("layers_block_type")
    cfg["hybrid_override_pattern"] = "M*X"
    with pytest.raises(UnsupportedError, match=r"block characters \['X'\]"):
        extract_config(cfg)


def test_unless_equal_silences_a_note_that_changes_nothing():
    cfg = _nemotron()
    same = cfg["hidden_size"] // cfg["num_attention_heads"]
    cfg["attention_head_dim"] = same
    assert not any("attention_head_dim" in n for n in extract_config(cfg).notes)
    cfg["attention_head_dim"] = same // 2
    assert any("attention_head_dim = " in n for n in extract_config(cfg).notes)
