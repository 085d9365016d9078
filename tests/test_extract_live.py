"""Extraction against the live mlx-lm model: what ``estimate --config`` says is what mlx-lm allocates.

Two ways of running mlx-lm's own model and cache code:

* **lazy** (every config, full size): the model is built with ``build_model(lazy=True)`` (random weights
  never materialized) and the ``generate_step`` prompt loop is replayed without ``mx.eval``. ``nbytes``
  is shape x itemsize, and MLX infers every shape when an op is recorded, so the cache objects - mlx-lm's
  real ``KVCache``/``RotatingKVCache``/``ArraysCache``/``CacheList`` code driven by the real forward -
  report exactly what an evaluated run reports, for a 671B config in a second.
* **evaluated** (a cheap subset covering every cache class, shrunk with ``live.build.shrink_config``):
  ``live.probe.run_schedule`` evaluates each step like ``generate_step``; it must agree with the lazy
  replay of the same model *and* with the estimate, which is what licenses the lazy runs above.

Gated-DeltaNet families are replayed on their first 8 layers (two periods; the recurrence is a Python
loop per token); the estimate of that cut config must equal the live total, and the full config's
per-layer estimate must equal the live per-layer bytes.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util  # noqa: F401
import json
import warnings

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from mlx_lm.models.cache import make_prompt_cache  # noqa: E402

from omlx_profiles.extraction.from_config import profile_from_config  # noqa: E402
from omlx_profiles.live.from_model import profile_from_model  # noqa: E402
from omlx_profiles.mlxlm.facts import ARCHITECTURE_REMAPPING, MODEL_REMAPPING  # noqa: E402
from omlx_profiles.mlxlm.recipes import live_config, module_files, recipes  # noqa: E402
from omlx_profiles.kv.bytes import kv_report  # noqa: E402
from omlx_profiles.live.build import build_model, shrink_config  # noqa: E402
from omlx_profiles.live.probe import run_schedule  # noqa: E402

from .conftest import run_cli  # noqa: E402
from .test_extract import FORMULA, cfg_path  # noqa: E402

pytestmark = pytest.mark.live

_DT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
CUT = {"qwen3-next-80b-a3b-thinking": 8, "qwen3.5-27b": 8, "qwen3.5-9b": 8, "qwen3.5-35b-a3b": 8,
       "qwen3.6-35b-a3b": 8, "qwen3.5-122b-a10b": 8, "qwen3.5-397b-a17b": 8}
RUNS = ((1, 2048), (1000, 256), (1000, 2048))


def lazy_generate(model, tokens: int, step: int) -> list:
    """``mlx_lm.generate.generate_step``'s prompt loop (N-1 tokens in chunks of ``step``, then the last one
    alone) on mlx-lm's own model and caches, without evaluating anything."""
    cache = make_prompt_cache(model)
    prompt = (mx.arange(tokens, dtype=mx.int32) * 31 + 7) % 256
    while prompt.shape[0] > 1:
        n = min(step, prompt.shape[0] - 1)
        model(prompt[:n][None], cache=cache)
        prompt = prompt[n:]
    model(prompt[None], cache=cache)
    return cache


def _nbytes(c) -> int:
    if hasattr(c, "caches"):
        return sum(_nbytes(x) for x in c.caches)
    if hasattr(c, "cache") and isinstance(c.cache, list):
        return sum(a.nbytes for a in c.cache if a is not None)
    return 0 if getattr(c, "keys", None) is None else c.nbytes


def _estimate(path, n, chunk, dtype):
    code, out, err = run_cli("estimate", "--config", str(path), "--tokens", str(n), "--chunk", str(chunk),
                             "--dtype", dtype, "--json")
    assert code == 0, err
    est = json.loads(out)
    cached = [l["bytes"] for l in est["layers"] if any(c["kind"] != "none" for c in l["caches"])]
    return est["kv_bytes"], cached


def _build(cfg, dtype="bf16", lazy=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the CPU GatherMM fp32 promotion warning
        m = build_model(cfg, dtype=dtype, lazy=lazy)
    return m, _DT[m.omlx_build_info.dtype]


# --------------------------------------------------------------------------------------------------
# the data copied from mlx-lm has not drifted
# --------------------------------------------------------------------------------------------------


def test_remapping_tables_match_mlx_lm():
    import mlx_lm.utils as u

    assert MODEL_REMAPPING == u.MODEL_REMAPPING
    assert ARCHITECTURE_REMAPPING == u.MODEL_ARCHITECTURE_REMAPPING


@pytest.mark.parametrize("mt,arch", sorted(ARCHITECTURE_REMAPPING))
def test_architecture_remapping_picks_mlx_lms_module(mt, arch):
    """index.yaml's architecture_remapping, as extraction applies it, picks the module mlx-lm imports."""
    from mlx_lm.utils import _get_classes

    from omlx_profiles.mlxlm.config import module_for

    cfg = {"model_type": mt, "architectures": ["SomethingElse", arch]}
    model_cls, _ = _get_classes(cfg)
    assert module_for(cfg, "config.json") == (mt, model_cls.__module__.rsplit(".", 1)[-1])
    assert module_for({"model_type": mt}, "config.json")[1] != module_for(cfg, "config.json")[1]


def test_rope_table_matches_mlx_lms_initialize_rope():
    """index.yaml's ``rope_types`` is what mlx-lm's ``initialize_rope`` builds: every listed type builds (given
    the keys its class reads), an unlisted one raises ValueError there, a type the table says needs a factor
    raises KeyError without one while the others build without one, and the types that extend the context
    are exactly those built as YaRN."""
    from mlx_lm.models.rope_utils import YarnRoPE, initialize_rope

    from omlx_profiles.mlxlm.model_types import ROPE_TYPES

    keys = {"factor": 4.0, "original_max_position_embeddings": 16, "short_factor": 1.0, "long_factor": 1.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0, "mrope_section": [1, 1, 2]}
    no_factor = {k: v for k, v in keys.items() if k != "factor"}
    assert len(ROPE_TYPES) >= 10 and "default" in ROPE_TYPES
    for name, t in ROPE_TYPES.items():
        rope = initialize_rope(8, 10000.0, False, {"rope_type": name, **keys}, 64)
        assert isinstance(rope, YarnRoPE) == t.extends_context, name
        if t.factor == "required":
            with pytest.raises(KeyError):
                initialize_rope(8, 10000.0, False, {"rope_type": name, **no_factor}, 64)
        else:
            initialize_rope(8, 10000.0, False, {"rope_type": name, **no_factor}, 64)
    for name in ("su", "yarn2", "Linear"):
        assert name not in ROPE_TYPES
        with pytest.raises(ValueError, match="Unsupported RoPE type"):
            initialize_rope(8, 10000.0, False, {"rope_type": name, **keys}, 64)


TEXT_BY = sorted(m for m, f in module_files().items() if f.text_by is not None)


@pytest.mark.parametrize("module", TEXT_BY)
def test_text_by_args_match_mlx_lm(module):
    """A ``text_by`` wrapper's args class requires what the file says and its ``__post_init__`` fills exactly
    ``defaults`` into an empty text config (mistral3: tie_word_embeddings False)."""
    tb = module_files()[module].text_by
    mod_name, _, cls = tb.args_class.rpartition(".")
    args = getattr(importlib.import_module(f"mlx_lm.models.{mod_name}"), cls)
    required = {f.name for f in dataclasses.fields(args)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert required == set(tb.wrapper_required)
    assert getattr(args.from_dict({"model_type": module, tb.key: {}}), tb.key) == tb.defaults


def _text_by_cases() -> list[tuple[str, str, str, str]]:
    """(wrapper module, top-level model_type, text model_type, the module text_by picks): every listed text
    type, and one it does not list (the default); the remapped alias (llava) for the default case."""
    out = []
    for m in TEXT_BY:
        tb = module_files()[m].text_by
        alias = sorted(t for t, x in MODEL_REMAPPING.items() if x == m)
        out += [(m, m, t, inner) for t, inner in sorted(tb.modules.items())]
        out.append((m, alias[0] if alias else m, "a-type-it-does-not-list", tb.default))
    return out


@pytest.mark.parametrize("wrapper,top_type,text_type,inner", _text_by_cases())
def test_text_by_wrapper_equals_live(wrapper, top_type, text_type, inner):
    """The wrapper's language model, extracted through ``text_by`` (profiles/mlx_lm/<wrapper>.yaml), holds what
    the live mlx-lm wrapper holds, per layer. The inner recipes' live configs have sliding layers (window 128):
    a wrong ``make_cache`` or a wrong module for the text type is a wrong byte count at 300 tokens."""
    tb = module_files()[wrapper].text_by
    cfg = {"model_type": top_type, tb.key: dict(live_config(recipes()[inner]), model_type=text_type)}
    model, dt = _build(cfg)
    assert type(model.layers[0]).__module__ == f"mlx_lm.models.{inner}"
    prof = profile_from_config(cfg, dtype=dt)
    for n, chunk in ((1, 256), (300, 128)):
        cache = lazy_generate(model, n, chunk)
        if not tb.make_cache:
            assert {type(c).__name__ for c in cache} == {"KVCache"}
        assert [l.nbytes for l in kv_report(prof, n, chunk=chunk).layers] == [_nbytes(c) for c in cache], (n, chunk)


@pytest.mark.parametrize("module", sorted(m for m, r in recipes().items() if r.text is None))
def test_recipe_args_match_mlx_lm(module):
    """A module recipe's ``args`` (required fields, copied defaults) is what its mlx-lm args class says: the
    extraction of a recipe-covered module reads configs by these lists alone. (Wrappers name the inner
    class loosely - their text config is read through the outer module's own conversion - so they are
    checked by the live recipe test only.)"""
    a = recipes()[module].args
    mod_name, _, cls = a.cls.rpartition(".")
    args = getattr(importlib.import_module(f"mlx_lm.models.{mod_name}"), cls)
    fields = {f.name: f for f in dataclasses.fields(args)}
    required = {n for n, f in fields.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert set(a.required) == required, module
    for k, v in a.defaults.items():
        f = fields.get(k)
        d = None if f is None else (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
        assert k in fields and (list(d) if isinstance(d, tuple) else d) == v, \
            f"{module}.{k}: mlx-lm default {d!r}, copied {v!r}"


# --------------------------------------------------------------------------------------------------
# estimate --config == live, every config (lazy, full size)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", sorted(FORMULA))
def test_estimate_config_equals_live(stem, tmp_path):
    cfg = json.loads(cfg_path(stem).read_text())
    path = cfg_path(stem)
    full = profile_from_config(cfg)
    if stem in CUT:
        cfg = shrink_config(cfg, layers=CUT[stem])
        path = tmp_path / "config.json"
        path.write_text(json.dumps(cfg))
    model, dt = _build(cfg, full.dtype)
    for n, chunk in RUNS:
        live = [_nbytes(c) for c in lazy_generate(model, n, chunk)]
        total, per_layer = _estimate(path, n, chunk, dt)
        assert total == sum(live), (n, chunk)
        assert per_layer == live, (n, chunk)
        if stem in CUT:  # the full config's first layers are these layers
            _, full_layers = _estimate(cfg_path(stem), n, chunk, dt)
            assert full_layers[: len(live)] == live


# --------------------------------------------------------------------------------------------------
# evaluated runs agree with the lazy replay and with the estimate
# --------------------------------------------------------------------------------------------------

EVALUATED = {  # stem -> shrink_config arguments (+ config edits), one per cache class
    "llama-3.2-1b-instruct": dict(layers=2, q_heads=8),
    "gemma-3-4b-it": dict(layers=6, q_heads=4),  # RotatingKVCache + KVCache
    "gpt-oss-20b": dict(layers=2, q_heads=8),  # sliding + sinks, MoE (fp32 on CPU)
    "deepseek-v3.2": dict(layers=2, q_heads=4),  # CacheList(MLA latent, DSA indexer)
    "qwen3.5-27b": dict(layers=2, edit={"full_attention_interval": 2}),  # gated-DeltaNet state, bf16 conv + fp32 ssm
}


@pytest.mark.parametrize("stem", sorted(EVALUATED))
def test_evaluated_equals_lazy_equals_estimate(stem):
    kw = dict(EVALUATED[stem])
    edit = kw.pop("edit", {})
    cfg = json.loads(cfg_path(stem).read_text())
    cfg.get("text_config", cfg).update(edit)
    small = shrink_config(cfg, hidden=64, **kw)
    model, dt = _build(small, "bf16", lazy=False)
    prof = profile_from_config(small, dtype=dt)
    for n, chunk in ((1, 256), (1000, 256)):
        evaluated = [_nbytes(c) for c in run_schedule(model, n, "generate", prefill_step=chunk)]
        lazy = [_nbytes(c) for c in lazy_generate(model, n, chunk)]
        assert evaluated == lazy
        rep = kv_report(prof, n, chunk=chunk, dtype=dt)
        assert [l.nbytes for l in rep.layers] == evaluated and rep.total == sum(evaluated)
    # the seed's entry point goes through profile_from_model(model): same numbers, from model.args
    pm = profile_from_model(model)
    assert "verified" in pm.provenance
    assert kv_report(pm, 1000, chunk=256).total == sum(evaluated)


# --------------------------------------------------------------------------------------------------
# plain KVCache families and a family this package has no rule for (probe fills the gap)
# --------------------------------------------------------------------------------------------------

_BASE = dict(hidden_size=128, num_hidden_layers=2, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, rms_norm_eps=1e-5, vocab_size=256, max_position_embeddings=4096, rope_theta=10000.0,
             tie_word_embeddings=False, num_experts=4, num_local_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, shared_expert_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[],
             n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=0, n_group=1, topk_group=1,
             routed_scaling_factor=1.0, norm_topk_prob=True, attention_bias=False, mlp_bias=False, use_qk_norm=False,
             partial_rotary_factor=1.0, rope_scaling=None, intermediate_size_mlp=64, no_rope_layers=[1, 1],
             layer_norm_eps=1e-5, norm_eps=1e-5, use_qkv_bias=False, hidden_act="silu")


def synthetic(module: str) -> dict:
    """A tiny config for ``module``: head_dim 16 while hidden/heads is 32, so the head-dim rule shows."""
    mod = importlib.import_module(f"mlx_lm.models.{module}")
    cfg = dict(_BASE, model_type=module)
    for f in dataclasses.fields(mod.ModelArgs):
        if f.name in cfg or f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        t = str(f.type)
        cfg[f.name] = 1.0 if "float" in t else (False if "bool" in t else (2 if "int" in t else None))
    if module == "mistral4":
        cfg.update(kv_lora_rank=32, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "llama_4_scaling_beta": 0.1,
                                    "original_max_position_embeddings": 4096})
    return cfg


@pytest.mark.parametrize("module", ["mistral4"])
def test_synthetic_family_equals_live(module):
    cfg = synthetic(module)
    model, dt = _build(cfg)
    prof = profile_from_config(cfg, dtype=dt)
    for n, chunk in ((1, 256), (300, 128)):
        live = [_nbytes(c) for c in lazy_generate(model, n, chunk)]
        assert [l.nbytes for l in kv_report(prof, n, chunk=chunk).layers] == live, module


def test_unmodelled_family_from_the_probe(monkeypatch):
    # A type extraction does not know (no rule, no module recipe) still gets a profile from the live model.
    # exaone_moe stands in for it with its module recipe hidden (it has one since session 5): its
    # layer_types give RotatingKVCache(window) to the sliding layers and KVCache to the others
    import omlx_profiles.extraction.from_config as fc

    monkeypatch.setattr(fc, "recipe", lambda module: None)
    cfg = synthetic("exaone_moe")
    cfg.update(num_hidden_layers=4, sliding_window=64,
               layer_types=["sliding_attention"] * 3 + ["full_attention"], is_moe_layer=[False] * 4)
    with pytest.raises(Exception, match="^unsupported: config.json: model_type 'exaone_moe'"):
        profile_from_config(cfg)
    model, dt = _build(cfg)
    prof = profile_from_model(model)
    assert {e.kind for lt in prof.layer_types.values() for e in lt.entries} == {"sliding", "full"}
    assert "not usable" in prof.provenance["notes"]
    for n, chunk in ((1, 256), (1000, 256)):
        live = [_nbytes(c) for c in lazy_generate(model, n, chunk)]
        assert [l.nbytes for l in kv_report(prof, n, chunk=chunk, dtype=dt).layers] == live


def test_seed_entry_point_set_model_info_from_model():
    """oMLX's ``set_model_info_from_model(monitor, model)`` reaches the profile through ``profile_from_model``."""
    from omlx_profiles.compat import MemoryMonitor, set_model_info_from_model

    small = shrink_config(json.loads(cfg_path("gemma-3-4b-it").read_text()), layers=6, q_heads=4)
    model, dt = _build(small)
    monitor = MemoryMonitor(None, eviction_enabled=False, backend="cpu", max_memory=1 << 34)
    set_model_info_from_model(monitor, model)
    prof = monitor.profile
    assert prof is not None and "verified" in prof.provenance
    live = [_nbytes(c) for c in lazy_generate(model, 1000, 256)]
    assert [l.nbytes for l in kv_report(prof, 1000, chunk=256, dtype=dt).layers] == live


def test_mlx_lm_load_of_a_local_directory(tmp_path):
    """``mlx_lm``'s own loader (``live.build.load_local``: config.json + safetensors, no hub) -> same profile as
    the directory's config.json, verified by the probe."""
    from omlx_profiles.extraction.from_config import resolve_path
    from omlx_profiles.live.build import load_local, save_local

    small = shrink_config(json.loads(cfg_path("gemma-3-4b-it").read_text()), layers=6, q_heads=4)
    model, dt = _build(small, lazy=False)
    save_local(model, small, tmp_path / "m")
    loaded, _ = load_local(tmp_path / "m")
    prof = profile_from_model(loaded)
    assert "verified" in prof.provenance
    from_dir = resolve_path(tmp_path / "m").profile
    live = [_nbytes(c) for c in lazy_generate(loaded, 1000, 256)]
    for p in (prof, from_dir):
        assert [l.nbytes for l in kv_report(p, 1000, chunk=256, dtype=dt).layers] == live
