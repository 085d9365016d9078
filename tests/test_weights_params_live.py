"""``weights.params`` in the profiles equals the parameter count of the mlx-lm model built from the real
config (lazily: shapes only, nothing evaluated), so the weights term is not a number copied by hand."""
from __future__ import annotations

import json

import pytest

from omlx_profiles import load_registry

from .conftest import CONFIGS

pytest.importorskip("mlx_lm")
from mlx.utils import tree_flatten  # noqa: E402

from omlx_profiles.live.build import build_model  # noqa: E402

pytestmark = pytest.mark.live

REG = load_registry(include_env=False)
CASES = sorted(p.name for p in REG if p.weights is not None and p.weights.params and (CONFIGS / f"{p.name}.json").is_file())


@pytest.mark.parametrize("name", CASES)
def test_params_match_the_live_model(name):
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    model = build_model(config, lazy=True)
    params = dict(tree_flatten(model.parameters()))
    if REG.profiles[name].tie_word_embeddings:
        # a tied checkpoint stores no lm_head (mlx-lm's gemma3 builds one and its sanitize pops it)
        params = {k: v for k, v in params.items() if not k.endswith("lm_head.weight")}
    live = sum(v.size for v in params.values())
    assert REG.profiles[name].weights.params == live
