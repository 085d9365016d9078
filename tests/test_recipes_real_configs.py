"""Public configs of recipe-covered types, at their real dims: ``extract`` resolves them through the
module recipe, and the full-size mlx-lm model (built lazily: nothing allocated) has exactly the caches the
extraction says - class, KV heads, key/value widths, windows, entry count (``live.verify.verify_profile``).

The configs (``tests/module_configs/``, sources in its SOURCES.tsv) are public copies found with the
search tools; what each copy trims or completes is said there.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from omlx_profiles.extraction.from_config import extract_config
from omlx_profiles.kv.bytes import kv_report

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from omlx_profiles.live.verify import verify_profile  # noqa: E402

pytestmark = pytest.mark.live
DIR = Path(__file__).resolve().parent / "module_configs"
CASES = {
    # name: (module, layers with a cache, per-token bytes of every layer in bf16)
    "minimax-m2.7": ("minimax", 62, 62 * 2 * 8 * 128 * 2),
    "qwen3-vl-8b-instruct": ("qwen3_vl", 36, 36 * 2 * 8 * 128 * 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_config_resolves_and_matches_the_full_size_live_model(name):
    module, layers, per_token = CASES[name]
    cfg = json.loads((DIR / f"{name}.json").read_text(encoding="utf-8"))
    ext = extract_config(cfg, source=f"{name}.json")
    assert ext.payload["mlx_model_type"] == module
    assert "module recipe" in ext.provenance["layers"]
    p = ext.profile()
    assert verify_profile(p, config=cfg) == []
    rep = kv_report(p, 256, schedule="direct")
    assert sum(l.nbytes for l in rep.layers) == 256 * per_token
    assert sum(1 for l in rep.layers if l.nbytes) == layers


def test_listed_sources_match_the_files():
    rows = [r.split("\t")[0] for r in (DIR / "SOURCES.tsv").read_text(encoding="utf-8").splitlines()[1:] if r]
    assert sorted(rows) == sorted(p.stem for p in DIR.glob("*.json")) == sorted(CASES)
