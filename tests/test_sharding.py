"""The sharding plan (profiles/mlx_lm/sharding.yaml) against the installed mlx-lm, and the per-rank
estimate's arithmetic and errors through the CLI. The byte-exact per-rank checks against two live ranks
are in ``test_sharded_live.py``."""
from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import sys
from pathlib import Path

import pytest

from omlx_profiles.sharding import ShardSpec, load_plan, pipeline_ranges
from omlx_profiles.sharding.plan import plan_path

from .conftest import REPO, run_cli

GIB = 1024**3


def _generator():
    spec = importlib.util.spec_from_file_location("gen_sharding_plan", REPO / "tools" / "gen_sharding_plan.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plan_is_current_with_installed_mlx_lm():
    """Re-reading the installed mlx-lm's model sources gives the committed file, byte for byte."""
    mlx_lm = pytest.importorskip("mlx_lm")
    import importlib.metadata as md

    gen = _generator()
    text = gen.render(gen.read_modules(Path(mlx_lm.__file__).parent / "models"), md.version("mlx-lm"))
    assert plan_path().read_text(encoding="utf-8") == text, "rerun: python tools/gen_sharding_plan.py"


def test_plan_validates_against_committed_json_schema():
    import jsonschema
    import yaml

    from omlx_profiles.registry.paths import schema_dir

    assert plan_path().read_text().splitlines()[0] == "# yaml-language-server: $schema=../../schema/v1/sharding.schema.json"
    schema = json.loads((schema_dir() / "v1" / "sharding.schema.json").read_text())
    doc = yaml.safe_load(plan_path().read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(doc)) == []
    assert len(load_plan().modules) >= 24


def test_plan_agrees_with_live_mlx_lm_classes():
    """Every importable mlx-lm module: ``Model.shard`` exists iff the plan has a tensor entry."""
    pytest.importorskip("mlx.core")
    models = importlib.import_module("mlx_lm.models")
    plan = load_plan().modules
    checked = 0
    for info in pkgutil.iter_modules(models.__path__):
        try:
            mod = importlib.import_module(f"mlx_lm.models.{info.name}")
        except (Exception, SystemExit):  # optional dependencies (olmo exits when hf_olmo is missing)
            continue
        model = getattr(mod, "Model", None)
        if model is None:
            continue
        has_shard = callable(getattr(model, "shard", None))
        entry = plan.get(info.name)
        assert has_shard == (entry is not None and entry.tensor is not None), info.name
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("n_layers, ranks, split", [(4, 2, None), (61, 2, None), (61, 3, None), (5, 4, None),
                                                    (61, 2, (30, 31)), (3, 2, (1, 2))])
def test_pipeline_ranges_are_mlx_lms(n_layers, ranks, split):
    """The same layer ranges as mlx-lm's own ``PipelineMixin.pipeline`` (its code, run on a plain list)."""
    mixin = pytest.importorskip("mlx_lm.models.pipeline").PipelineMixin

    class Group:  # what pipeline() reads of an mx.distributed.Group
        def __init__(self, r):
            self.r = r

        def rank(self):
            return self.r

        def size(self):
            return ranks

    ours = pipeline_ranges(n_layers, ranks, split)
    for r in range(ranks):
        m = mixin()
        m.layers = list(range(n_layers))
        m.pipeline(Group(r), list(split) if split else None)
        assert (m.start_idx, m.end_idx) == ours[r]
        assert [x for x in m.layers if x is not None] == list(range(*ours[r]))


def _est(*args):
    code, out, err = run_cli("estimate", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_tensor_divides_gqa_kv_and_keeps_mla_latent_whole():
    whole = _est("meta-llama/Llama-3.1-8B-Instruct", "--tokens", "8k")
    sh = _est("meta-llama/Llama-3.1-8B-Instruct", "--tokens", "8k", "--ranks", "2", "--parallel", "tensor")
    assert [r["kv_bytes"] for r in sh["per_rank"]] == [whole["kv_bytes"] // 2] * 2
    ds = _est("mlx-community/DeepSeek-V3-0324-4bit", "--tokens", "8k")
    dsh = _est("mlx-community/DeepSeek-V3-0324-4bit", "--tokens", "8k", "--ranks", "2", "--parallel", "tensor")
    assert [r["kv_bytes"] for r in dsh["per_rank"]] == [ds["kv_bytes"]] * 2
    # fewer heads per rank: the prefill transient per rank is below the whole model's
    assert all(r["peak_bytes"] < ds["peak_bytes"] for r in dsh["per_rank"])


def test_pipeline_ranks_hold_their_layers():
    whole = _est("Qwen/Qwen3-30B-A3B", "--tokens", "4k")
    sh = _est("Qwen/Qwen3-30B-A3B", "--tokens", "4k", "--ranks", "3", "--parallel", "pipeline", "--split", "15,16,17")
    per = sh["per_rank"]
    assert [r["layers"] for r in per] == [[33, 48], [17, 33], [0, 17]]
    assert sum(r["kv_bytes"] for r in per) == whole["kv_bytes"]
    assert [r["comm_bytes"] > 0 for r in per] == [True, True, False]  # the first stage only sends


def test_per_rank_budgets_and_fit():
    # rank 1's 35 GiB binds below the model's context (40,960), so the answer is memory's, not the context clamp's
    args = ["Qwen/Qwen3-30B-A3B", "--ranks", "2", "--parallel", "pipeline", "--weights", "60GB", "--chunk", "512"]
    code, out, err = run_cli("fit", *args, "--budget", "48GiB,35GiB", "--json")
    assert code == 0, err
    fit = json.loads(out)
    assert fit["budgets"] == [48 * GIB, 35 * GIB]
    mt = fit["max_tokens"]
    assert mt == min(fit["max_tokens_per_rank"]) and fit["binding_rank"] == 1
    assert fit["at_max"]["fits"] is True and fit["next"]["fits"] is False
    code, out, _ = run_cli("estimate", *args, "--budget", "48GiB,35GiB", "--tokens", str(mt), "--json")
    assert code == 0 and json.loads(out)["fits"] is True
    code, out, _ = run_cli("estimate", *args, "--budget", "48GiB,35GiB", "--tokens", str(mt + 256), "--json")
    assert code == 1 and [r["fits"] for r in json.loads(out)["per_rank"]] == [True, False]


def test_table_has_one_column_per_rank():
    code, out, err = run_cli("estimate", "Qwen/Qwen3-30B-A3B", "--tokens", "4k", "--ranks", "2", "--parallel",
                             "tensor", "--weights", "60GB", "--budget", "64GiB")
    assert code == 0, err
    assert "rank 0" in out and "rank 1" in out and "fits on every rank" in out


@pytest.mark.parametrize("args, words", [
    (["Qwen/Qwen3-Next-80B-A3B-Instruct", "--ranks", "2", "--parallel", "tensor"], "has no Model.shard"),
    (["meta-llama/Llama-3.1-8B-Instruct", "--ranks", "2", "--parallel", "pipeline"], "has no model.model.pipeline"),
    (["meta-llama/Llama-3.1-8B-Instruct", "--ranks", "3", "--parallel", "tensor"], "does not divide by 3"),
    (["meta-llama/Llama-3.1-8B-Instruct", "--ranks", "2"], "--parallel"),
    (["meta-llama/Llama-3.1-8B-Instruct", "--parallel", "tensor"], "needs --ranks"),
    (["meta-llama/Llama-3.1-8B-Instruct", "--budget", "1GiB,2GiB"], "several budgets need --ranks"),
    (["Qwen/Qwen3-30B-A3B", "--ranks", "2", "--parallel", "pipeline", "--split", "20,20"], "sum to the model's 48"),
    (["Qwen/Qwen3-30B-A3B", "--ranks", "2", "--parallel", "tensor", "--split", "24,24"], "pipeline only"),
    (["Qwen/Qwen3-30B-A3B", "--ranks", "2", "--parallel", "pipeline", "--budget", "1GiB,2GiB,3GiB"], "3 sizes"),
])
def test_clear_errors(args, words):
    code, out, err = run_cli("estimate", *args, "--tokens", "1k")
    assert code in (1, 2), (out, err)  # 2: usage / input error; 1: unsupported (cli.main's mapping)
    assert words in err and "Traceback" not in err


def test_spec_rejects_bad_values():
    from omlx_profiles.errors import InputError

    for bad in (dict(ranks=0, parallel="tensor"), dict(ranks=2, parallel="data"),
                dict(ranks=2, parallel="pipeline", split=(1,))):
        with pytest.raises(InputError):
            ShardSpec(**bad)


def test_chart_one_panel_per_rank(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "ranks.png"
    code, text, err = run_cli("chart", "Qwen/Qwen3-30B-A3B", "--ranks", "2", "--parallel", "pipeline", "--weights",
                              "60GB", "--budget", "40GiB", "--max-tokens", "16k", "--points", "8", "-o", str(out))
    assert code == 0, err
    assert out.stat().st_size > 10_000
    assert "rank 0/2" in text and "rank 1/2" in text
    code, _, err = run_cli("chart", "Qwen/Qwen3-30B-A3B", "--ranks", "2", "--parallel", "pipeline", "--weights",
                           "60GB", "--budget", "40GiB,30GiB", "-o", str(tmp_path / "other.png"))
    assert code == 2 and "one budget line" in err
