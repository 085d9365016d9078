"""Every module recipe (profiles/mlx_lm/<module>.yaml) against the REAL mlx-lm model, per layer.

One test per recipe (``live.recipe_check.check_module``: tiny config -> mlx-lm ``Model``, random weights,
MLX CPU; generate_step with prefill step 256 and one direct call at N in {1, 255, 256, 257} (+3000), and
kv_bits 4/8 at N=257 where the cache converts). ``profiles/mlx_lm/LIVE_RESULTS.json`` is what
``coverage`` calls verified; the last test fails unless it equals this run's results. Regenerate it with

    OMLX_WRITE_LIVE_RESULTS=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_recipes_live.py
"""
from __future__ import annotations

import json
import os

import pytest

from omlx_profiles.mlxlm.recipes import recipes, recipes_dir

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from omlx_profiles.live.recipe_check import check_module  # noqa: E402

pytestmark = pytest.mark.live

MODULES = sorted(recipes())
RESULTS: dict[str, dict] = {}
RESULTS_FILE = recipes_dir() / "LIVE_RESULTS.json"


@pytest.mark.parametrize("module", MODULES)
def test_recipe_matches_live_mlx_lm(module):
    res = check_module(module)
    RESULTS[module] = res.as_dict()
    assert res.passed, "\n".join(res.problems[:20])
    assert res.runs >= 8


def test_recorded_results_are_this_runs():
    """COVERAGE.md's "verified" comes from LIVE_RESULTS.json: it must be what the live check just found."""
    if len(RESULTS) != len(MODULES):
        pytest.skip("not every recipe ran in this session (-k / -x)")
    passed = sorted(m for m, r in RESULTS.items() if r["passed"])
    if os.environ.get("OMLX_WRITE_LIVE_RESULTS"):
        RESULTS_FILE.write_text(json.dumps({"mlx_lm": "0.32.2", "verified": passed}, indent=1) + "\n",
                                encoding="utf-8")
    recorded = json.loads(RESULTS_FILE.read_text(encoding="utf-8"))
    assert recorded["verified"] == passed, "regenerate LIVE_RESULTS.json (see the module docstring)"
