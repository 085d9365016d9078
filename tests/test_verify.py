"""Live verification: a profile (YAML or extracted) against the caches mlx-lm really builds.

Models are built lazily from the real configs at full size (nothing allocated; see ``omlx_profiles.live.verify``).
A deliberately wrong YAML must be caught with the field, the YAML line and the live value.
"""
from __future__ import annotations

import csv
import json
import re

import pytest

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from omlx_profiles.extraction.from_config import extract_path, profile_from_config  # noqa: E402
from omlx_profiles.registry.index import build_registry, load_registry  # noqa: E402
from omlx_profiles.live.verify import VerificationError, verify_profile  # noqa: E402

from .conftest import CONFIGS, run_cli  # noqa: E402
from .test_extract import FORMULA, cfg_path  # noqa: E402

pytestmark = pytest.mark.live


@pytest.mark.parametrize("stem", sorted(FORMULA))
def test_extracted_profile_verifies(stem):
    ex, lc = extract_path(cfg_path(stem))
    assert verify_profile(ex.profile(), config=lc.data) == []


def _sources():
    with open(CONFIGS / "SOURCES.tsv", encoding="utf-8") as f:
        return [(r["#short_name"], r["hf_model_id"]) for r in csv.DictReader(f, delimiter="\t")]


@pytest.mark.parametrize("stem,hf_id", _sources())
def test_registry_variant_for_a_real_config_verifies(stem, hf_id):
    """The YAML written for a checkpoint must match mlx-lm built from that checkpoint's config."""
    reg = load_registry()
    try:
        res = reg.resolve(hf_id)
    except LookupError:
        pytest.skip(f"no registry variant answers to {hf_id}")
    cfg = json.loads(cfg_path(stem).read_text())
    dis = verify_profile(res.profile, config=cfg, registry=reg)
    assert dis == [], "\n".join(map(str, dis))


# --------------------------------------------------------------------------------------------------
# wrong YAML -> field, file:line, live value
# --------------------------------------------------------------------------------------------------


def _skeleton(tmp_path, stem: str, edits: list[tuple[str, str]]):
    d = tmp_path / "user"
    d.mkdir(exist_ok=True)
    f = d / f"{stem}.yaml"
    code, _, err = run_cli("extract", str(cfg_path(stem)), "--write", str(f), "--force")
    assert code == 0, err
    text = f.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    f.write_text(text)
    return f


def _line_of(path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_wrong_kv_heads_is_caught_with_field_line_and_live_value(tmp_path):
    f = _skeleton(tmp_path, "qwen3.5-27b", [("num_kv_heads: 4", "num_kv_heads: 8")])
    reg = build_registry([[f]])
    prof = reg.profiles["qwen3.5-27b"]
    dis = verify_profile(prof, config=str(cfg_path("qwen3.5-27b")), registry=reg)
    assert len(dis) == 1
    d = dis[0]
    line = _line_of(f, "num_kv_heads: 8")
    where = f"{f}:{line} (variant qwen3.5-27b)"
    assert (d.field, d.where, d.profile_value, d.live_value) == ("num_kv_heads", where, 8, 4)
    assert str(d).startswith(f"{where}: num_kv_heads: profile says 8, live mlx-lm model has 4")
    with pytest.raises(VerificationError, match="num_kv_heads"):
        verify_profile(prof, config=str(cfg_path("qwen3.5-27b")), registry=reg, strict=True)
    # the same through the CLI: --strict makes it an error (exit 1), message on stderr
    code, out, err = run_cli("resolve", "qwen3.5-27b", "--profiles", str(f.parent), "--verify",
                             "--against", str(cfg_path("qwen3.5-27b")), "--strict")
    assert code == 1 and f"{where}: num_kv_heads: profile says 8, live mlx-lm model has 4" in err
    code, out, err = run_cli("resolve", "qwen3.5-27b", "--profiles", str(f.parent), "--verify",
                             "--against", str(cfg_path("qwen3.5-27b")))
    assert code == 0 and "warning:" in err  # without --strict: reported, not an error


@pytest.mark.parametrize("stem,edit,field,pv,lv", [
    ("gemma-3-4b-it", ("window: 1024", "window: 512"), "layers.kinds.sliding.window", 512, 1024),
    ("deepseek-v3", ("kv_lora_rank: 512", "kv_lora_rank: 256"), "mla.kv_lora_rank", 256, 512),
    ("qwen3.5-27b", ("name: ssm, shape: [48, 128, 128], dtype: fp32", "name: ssm, shape: [48, 128, 128], dtype: model"),
     "layers.kinds.linear.tensors.1.dtype", "model", "fp32"),
    ("nemotron-h-56b-base-8k", ("shape: [3, 20480]", "shape: [3, 10240]"), "layers.kinds.M.tensors.0.shape",
     [3, 10240], [3, 20480]),
    ("qwen3-8b", ("num_layers: 36", "num_layers: 32"), "num_layers", 32, 36),
])
def test_other_wrong_fields(tmp_path, stem, edit, field, pv, lv):
    old, new = edit
    if field == "mla.kv_lora_rank":  # flow mapping on one line in the skeleton
        old, new = "kv_lora_rank: 512", "kv_lora_rank: 256"
    f = _skeleton(tmp_path, stem, [(old, new)])
    reg = build_registry([[f]])
    name = next(iter(reg.profiles))
    dis = verify_profile(reg.profiles[name], config=str(cfg_path(stem)), registry=reg)
    hit = [d for d in dis if d.field == field]
    assert hit, [str(d) for d in dis]
    d = hit[0]
    assert d.profile_value == pv and d.live_value == lv
    assert re.fullmatch(rf"{re.escape(str(f))}:\d+", d.where.split(" ")[0]), d.where


def test_extract_verify_cli():
    code, out, err = run_cli("extract", str(cfg_path("gpt-oss-20b")), "--verify", "--strict")
    assert code == 0 and "verified:" in err


def test_kv_dtype_of_a_given_model_is_checked():
    from omlx_profiles.live.build import build_model, shrink_config

    small = shrink_config(json.loads(cfg_path("llama-3.2-1b-instruct").read_text()), layers=2, q_heads=8)
    model = build_model(small, dtype="fp16", lazy=True)
    prof = profile_from_config(small)  # says bf16 (torch_dtype)
    dis = verify_profile(prof, model)
    assert [(d.field, d.profile_value, d.live_value) for d in dis] == [("dtype", "bf16", "fp16")]


def test_resolve_verify_from_the_profile_alone():
    """Without a config, the live model is synthesized from the profile (``live.synth``)."""
    code, out, err = run_cli("resolve", "qwen3-8b", "--verify", "--strict")
    assert code == 0 and "verified:" in err, err
