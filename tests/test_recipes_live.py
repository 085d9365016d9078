"""Every module recipe (profiles/mlx_lm/<module>.yaml) against the REAL mlx-lm model, per layer.

One test per recipe (``live.recipe_check.check_module``: tiny config -> mlx-lm ``Model``, random weights,
MLX CPU; generate_step with prefill step 256 and one direct call at N in {1, 255, 256, 257} (+3000, lazily), and
kv_bits 4/8 at N=257 where the cache converts). ``profiles/mlx_lm/LIVE_RESULTS.json`` is what
``coverage`` calls verified: each recipe's test also fails unless the file lists it exactly when it
passed, and ``test_recorded_results_name_only_recipes`` fails on a listed name that is no recipe, so the
file equals this run's results. Each test stands alone (no state shared between tests), so pytest-xdist
workers share the recipes (``make test`` runs ``-n``). Regenerate the file in one process with

    OMLX_WRITE_LIVE_RESULTS=1 .venv/bin/python -m pytest -q -p no:cacheprovider -p no:xdist tests/test_recipes_live.py
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
RESULTS_FILE = recipes_dir() / "LIVE_RESULTS.json"
WRITE = bool(os.environ.get("OMLX_WRITE_LIVE_RESULTS"))
WRITTEN: dict[str, bool] = {}  # module -> passed; only used to regenerate the file (WRITE, one process)


def _recorded() -> list[str]:
    return json.loads(RESULTS_FILE.read_text(encoding="utf-8"))["verified"]


@pytest.mark.parametrize("module", MODULES)
def test_recipe_matches_live_mlx_lm(module):
    res = check_module(module)
    if WRITE:
        WRITTEN[module] = res.passed
    assert res.passed, "\n".join(res.problems[:20])
    assert res.runs >= 8
    if not WRITE:
        assert module in _recorded(), f"{module} passed but LIVE_RESULTS.json does not list it: regenerate it " \
                                      "(see the module docstring)"


def test_recorded_results_name_only_recipes():
    """Listed names are sorted, unique recipes; with the per-recipe checks: the file == this run's results."""
    recorded = _recorded()
    assert recorded == sorted(set(recorded)), "LIVE_RESULTS.json 'verified' must be sorted and unique"
    stale = sorted(set(recorded) - set(MODULES))
    assert not stale, f"LIVE_RESULTS.json lists modules with no recipe: {stale}"


def test_write_live_results():
    """OMLX_WRITE_LIVE_RESULTS=1 only: write the file from this process's results (all recipes, one process)."""
    if not WRITE:
        pytest.skip("writes LIVE_RESULTS.json only with OMLX_WRITE_LIVE_RESULTS=1")
    if sorted(WRITTEN) != MODULES:
        pytest.fail("not every recipe ran in this process: regenerate with -p no:xdist and no -k / -x")
    passed = sorted(m for m, ok in WRITTEN.items() if ok)
    RESULTS_FILE.write_text(json.dumps({"mlx_lm": "0.32.2", "verified": passed}, indent=1) + "\n",
                            encoding="utf-8")
