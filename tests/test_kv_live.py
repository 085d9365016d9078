"""Resident KV of every registry variant, against the live mlx-lm model built from the profile itself.

For each variant ``omlx_profiles.mlxlm.to_config.config_for_profile`` writes an mlx-lm config from the
profile's own numbers (layer pattern, KV heads, key/value widths, windows, MLA ranks, state shapes;
everything else shrunk), ``build_model`` builds it with random weights, ``run_schedule`` replays
``generate_step`` (or one direct call), and every layer's ``nbytes`` must equal the estimate computed
from the same (cut) profile - byte for byte, per layer, per cache of a CacheList, and per state tensor
(shape and dtype). Nothing here is compared with numbers copied from our own output.

Speed (2 CPU cores): runs of ``LAZY_FROM`` tokens or more go through the same model and cache code
without ``mx.eval`` (``live.lazy_replay``): a cache's ``nbytes`` is its arrays' shapes x itemsize and MLX
knows every shape when an op is recorded; evaluating them was 60-90% of a group's CPU time (gemma-3-27b
17.6 of 19.4 s, phi-3 10.6 of 17.3 s: a 1000-3000-token call at a checkpoint's KV width on MLX's CPU). Each group's model licenses that itself: at
its longest evaluated length of each schedule, the lazy report equals the evaluated one. Variants whose
synth configs are identical up to cache-neutral keys share one model; models keep one layer of each kind (``layers="kinds"``), and each patterned variant is also
run once with its whole period (``layers="period"``) so mlx-lm's ``i % p`` rule is exercised with the
declared period. Families whose cache dims force a wide model (Mamba-2 / DeltaNet state, phi3's
3072 = 32 x 96 hidden, lfm2's 2048-wide conv) run a smaller set of prompt lengths; every variant runs
N = 1 and 1000 under generate_step with the default prefill step (2048), which is what
``omlx-profiles estimate ID --tokens N`` reports.

MoE families that have a dense switch (``mlp_only_layers``, ``first_k_dense_replace``,
``num_experts = 0``) are run dense, in bf16 (MLX's CPU ``gather_mm`` is float32-only), and once more
with their experts, in float32; mixtral and gpt-oss have no switch and run in float32.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from functools import lru_cache

import pytest

from omlx_profiles import load_registry
from omlx_profiles.errors import UnsupportedError
from omlx_profiles.kv.bytes import KVQuant, kv_report
from omlx_profiles.mlxlm.to_config import can_be_dense, config_for_profile, cut_profile, layer_roles
from omlx_profiles.schema.family import Layers

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from omlx_profiles.live.build import build_model  # noqa: E402
from omlx_profiles.live.lazy_replay import replay_lazily  # noqa: E402
from omlx_profiles.live.probe import cache_report, run_schedule  # noqa: E402

pytestmark = pytest.mark.live

REG = load_registry(include_env=False)
DTYPE_NAME = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
CLASS_OF = {"full": {"KVCache", "QuantizedKVCache"}, "sliding": {"RotatingKVCache"}, "chunked": {"ChunkedKVCache"},
            "latent": {"KVCache", "QuantizedKVCache"}, "indexer": {"KVCache"}, "state": {"ArraysCache"}}

# (schedule, prefill step, N). FULL for light models, SMALL where the cache dims force a heavy model.
_GEN_DEFAULT = [("generate", 2048, n) for n in (1, 1000)]
FULL = (_GEN_DEFAULT
        + [("generate", 256, n) for n in (1, 255, 256, 257, 1000, 3000)]
        + [("direct", 0, n) for n in (1, 255, 256, 257, 1000)]
        + [("generate", 300, 1000)])
SMALL = _GEN_DEFAULT + [("generate", 256, 257), ("direct", 0, 1), ("direct", 0, 256)]
#: a subset of groups also runs the long cases: two 2048-token chunks (a 1024 window then holds
#: window - 1 + chunk rows mid-prompt and is trimmed by the last token) and one 3000-token call
LONG = {"llama-3.1-8b": [("generate", 2048, 3000), ("direct", 0, 3000)],
        "gemma-3-4b-it": [("generate", 2048, 3000)],
        "gpt-oss-20b": [("generate", 2048, 3000)],
        "deepseek-v3.2": [("generate", 2048, 3000)]}
#: runs of this many tokens or more are replayed lazily (module docstring); every plan evaluates shorter ones
LAZY_FROM = 1000


def _key(cfg: dict) -> str:
    """Group key: the config minus keys that never reach the cache."""
    def strip(d):
        return {k: (strip(v) if isinstance(v, dict) else v) for k, v in d.items()
                if k not in ("tie_word_embeddings", "max_position_embeddings")}
    return json.dumps(strip(cfg), sort_keys=True)


def _heavy(profile) -> bool:
    cfg = config_for_profile(profile, layers="kinds", dense=True)
    hidden = cfg.get("hidden_size") or cfg.get("text_config", {}).get("hidden_size", 0)
    return "state" in layer_roles(profile) or hidden >= 1024


def _groups() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for p in sorted(REG, key=lambda p: p.name):
        groups.setdefault(_key(config_for_profile(p, layers="kinds", dense=can_be_dense(p))), []).append(p.name)
    return groups


GROUPS = _groups()
GROUP_IDS = {k: "+".join(v) for k, v in GROUPS.items()}
KEY_OF = {name: k for k, names in GROUPS.items() for name in names}


def _same_worker(key: str):
    """pytest-xdist (--dist loadgroup): the tests that reuse one group's live runs (``group_runs``, cached
    per process) go to one worker, so no group's models are built twice; different groups spread."""
    return pytest.mark.xdist_group(f"kv_live-{list(GROUPS).index(key)}")


def _build(cfg: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fp32 promotion warning of MoE models on the CPU
        model = build_model(cfg, "bf16")
    return model, DTYPE_NAME[model.omlx_build_info.dtype]


def _run(model, n, schedule, step, **kw):
    return cache_report(run_schedule(model, n, schedule, prefill_step=step or 2048, **kw))


def _run_lazily(model, n, schedule, step):
    return cache_report(replay_lazily(model, n, schedule, prefill_step=step or 2048))


def _est_schedule(schedule: str, step: int) -> dict:
    return {"schedule": schedule, "chunk": step or 2048}


@lru_cache(maxsize=None)
def group_runs(key: str) -> tuple[str, dict, list[str]]:
    """Build the group's model once and run its matrix; returns (live dtype, {(sched, step, N): report},
    problems of the lazy licence: where the lazy replay differs from the evaluated one)."""
    names = GROUPS[key]
    p = REG.profiles[names[0]]
    model, dt = _build(config_for_profile(p, layers="kinds", dense=can_be_dense(p)))
    plan = list(SMALL if any(_heavy(REG.profiles[n]) for n in names) else FULL)
    for n in names:
        plan += LONG.get(n, [])
    runs = {(s, st, n): (_run_lazily if n >= LAZY_FROM else _run)(model, n, s, st) for s, st, n in plan}
    licence = []
    for sched in ("generate", "direct"):
        s, st, n = max((r for r in plan if r[0] == sched and r[2] < LAZY_FROM), key=lambda r: (r[2], r[1]))
        if _run_lazily(model, n, s, st) != runs[(s, st, n)]:
            licence.append(f"{GROUP_IDS[key]} N={n} {s}@{st}: the lazy replay's caches differ from the evaluated "
                           f"ones, so the runs of {LAZY_FROM}+ tokens cannot be replayed lazily")
    return dt, runs, licence


# --------------------------------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------------------------------

TALLY = {"runs": 0, "layers": 0}  # comparisons made; written to $OMLX_KV_TALLY at the end (for reports)


@pytest.fixture(scope="module", autouse=True)
def _write_tally():
    yield
    path = os.environ.get("OMLX_KV_TALLY")
    if path:
        with open(path, "w") as f:
            json.dump(TALLY, f)



def compare(profile, live: list[dict], dtype: str, n: int, schedule: str, step: int,
            quant: KVQuant | None = None) -> tuple[int, list[str]]:
    """Per-layer comparison of the estimate with a live ``cache_report``; returns (layers compared, problems)."""
    rep = kv_report(profile, n, dtype=dtype, quant=quant, **_est_schedule(schedule, step))
    where = f"{profile.name} N={n} {schedule}{'@' + str(step) if schedule == 'generate' else ''} {dtype}"
    layers = [l for l in rep.layers if any(e.kind != "none" for e in l.entries)]
    TALLY["runs"] += 1
    TALLY["layers"] += len(layers)
    if len(layers) != len(live):
        return 0, [f"{where}: live cache list has {len(live)} entries, the profile expects {len(layers)} "
                   f"(layers with a cache among {[l.kind for l in rep.layers]})"]
    bad = []
    for est, got in zip(layers, live):
        tag = f"{where} layer {est.index} ({est.kind})"
        if est.nbytes != got["nbytes"]:
            bad.append(f"{tag}: estimate {est.nbytes} != live {got['nbytes']} ({_shapes(got)})")
        entries = profile.layer_types[est.kind].entries
        children = got.get("children") if len(entries) > 1 else [got]
        if len(entries) > 1 and (got["class"] != "CacheList" or len(children) != len(entries)):
            bad.append(f"{tag}: expected a CacheList of {len(entries)}, live is {got['class']}")
            continue
        for e, eb, ch in zip(entries, est.entries, children):
            if ch["class"] not in CLASS_OF[e.kind]:
                bad.append(f"{tag}: {e.kind} cache should be {sorted(CLASS_OF[e.kind])}, live is {ch['class']}")
            if len(entries) > 1 and eb.nbytes != ch["nbytes"]:
                bad.append(f"{tag}: {e.kind} part estimate {eb.nbytes} != live {ch['nbytes']}")
            if e.kind == "sliding" and (ch.get("max_size"), ch.get("keep", 0)) != (e.window, e.keep):
                bad.append(f"{tag}: window/keep {e.window}/{e.keep} != live {ch.get('max_size')}/{ch.get('keep')}")
            if e.kind == "state":
                want = [(list(t.shape), dtype if t.dtype == "model" else t.dtype) for t in e.tensors]
                have = [(a["shape"][1:], DTYPE_NAME.get(a["dtype"], a["dtype"])) for a in ch["arrays"]]
                if want != have:
                    bad.append(f"{tag}: state tensors {want} != live {have}")
    return len(layers), bad


def _shapes(row: dict) -> str:
    if "children" in row:
        return "; ".join(_shapes(c) for c in row["children"])
    return ", ".join(f"{a['name']}{a['shape']}:{a['dtype']}" for a in row["arrays"])


# --------------------------------------------------------------------------------------------------
# every variant, every schedule of its plan
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [pytest.param(k, id=GROUP_IDS[k], marks=_same_worker(k)) for k in GROUPS])
def test_resident_kv_per_layer(key):
    dt, runs, licence = group_runs(key)
    assert not licence, "\n".join(licence)
    compared, bad = 0, []
    for name in GROUPS[key]:
        cut = cut_profile(REG.profiles[name], "kinds")
        for (schedule, step, n), live in runs.items():
            c, b = compare(cut, live, dt, n, schedule, step)
            compared += c
            bad += b
    assert compared > 0
    assert not bad, "\n".join(bad[:20])


PATTERNED = sorted(p.name for p in REG
                   if p.period is not None and len(set(p.layer_names)) > 1)


@pytest.mark.parametrize("name", PATTERNED)
def test_whole_period(name):
    """One whole period of the declared pattern (gemma3: 5 sliding + 1 global; qwen3-next: 3 DeltaNet + 1 full).
    The 100-token call is replayed lazily (module docstring; evaluated, nemotron-3-super's 82-layer period
    cost ~10 s of CPU), licensed by lazy == evaluated for a 2-token call of the same model."""
    p = REG.profiles[name]
    cut = cut_profile(p, "period")
    model, dt = _build(config_for_profile(p, layers="period", dense=can_be_dense(p)))
    bad = []
    for schedule, step, n in (("generate", 256, 1), ("direct", 0, 2)):
        live = _run(model, n, schedule, step)
        assert _run_lazily(model, n, schedule, step) == live, f"{name} N={n} {schedule}: lazy != evaluated"
        bad += compare(cut, live, dt, n, schedule, step)[1]
    bad += compare(cut, _run_lazily(model, 100, "direct", 0), dt, 100, "direct", 0)[1]
    assert not bad, "\n".join(bad)


MOE_DENSIFIED = sorted(p.name for p in REG if p.moe is not None and can_be_dense(p))


@pytest.mark.parametrize("name", MOE_DENSIFIED)
def test_with_experts(name):
    """The densified MoE variants once more with their (shrunk) experts: float32 on the CPU, same layout."""
    p = REG.profiles[name]
    model, dt = _build(config_for_profile(p, layers="kinds"))
    cut = cut_profile(p, "kinds")
    bad = []
    for schedule, step, n in (("generate", 256, 1), ("generate", 256, 257)):
        bad += compare(cut, _run(model, n, schedule, step), dt, n, schedule, step)[1]
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------------------------------
# what `omlx-profiles estimate ID --tokens N --json` says, for the whole (uncut) checkpoint
# --------------------------------------------------------------------------------------------------


def _formula_entry(e, n: int, act: int) -> int:
    """generate_step with a 2048 prefill step, written out in closed form (independent of rows.py).

    KVCache-backed kinds: 256 * ceil(N / 256) rows (2048 is a multiple of 256, so slicing never
    happens). RotatingKVCache(W): the first chunk keeps all its rows, each later chunk keeps W - 1
    old rows plus its own, and the last token either trims an oversized buffer to W or, while the
    buffer is smaller than W, grows it by min(256, W - offset). State: its declared bytes.
    """
    if e.kind == "none" or n == 0:
        return 0
    if e.kind == "state":
        return e.state_bytes(act)
    row = e.n_kv * (e.k_width + e.v_width) * act
    if e.kind in ("full", "latent", "indexer"):
        return 256 * math.ceil(n / 256) * row
    assert e.kind == "sliding" and e.keep == 0, e.kind
    w, head = e.window, n - 1
    chunks = [2048] * (head // 2048) + ([head % 2048] if head % 2048 else [])
    rows = 0
    for i, c in enumerate(chunks):
        rows = c if i == 0 else min(rows, w - 1) + c
    rows = w if rows >= w else rows + min(256, w - head)
    return rows * row


def formula(profile, n: int, dtype: str) -> int:
    act = {"bf16": 2, "fp16": 2, "fp32": 4}[dtype]
    return sum(_formula_entry(e, n, act) for name in profile.layer_names for e in profile.layer_types[name].entries)


def _live_full_model(name: str, n: int) -> tuple[int, str]:
    """Resident bytes of the whole checkpoint from the live per-kind bytes of the group's model.

    Every layer of a kind holds the same bytes (the per-layer test shows the live model agrees with
    that), so the whole stack is the sum over the uncut layer list of the live bytes of its kind.
    """
    dt, runs, _ = group_runs(KEY_OF[name])
    p = REG.profiles[name]
    cut = cut_profile(p, "kinds")
    live = iter(runs[("generate", 2048, n)])
    per_kind = {}
    for kind in cut.layer_names:
        has_cache = any(e.kind != "none" for e in cut.layer_types[kind].entries)
        per_kind[kind] = next(live)["nbytes"] if has_cache else 0
    return sum(per_kind[k] for k in p.layer_names), dt


@pytest.mark.parametrize("name", [pytest.param(n, marks=_same_worker(KEY_OF[n])) for n in sorted(REG.profiles)])
def test_cli_estimate_equals_live_model(name, cli):
    p = REG.profiles[name]
    fixed_dtype = any(t.dtype != "model" for lt in p.layer_types.values() for e in lt.entries for t in e.tensors)
    for n in (1, 1000):
        live, dt = _live_full_model(name, n)
        code, out, err = cli("estimate", name, "--tokens", str(n), "--json")
        assert code == 0, err
        est = json.loads(out)
        # the default is the profile's dtype (fp32 for a checkpoint stored in float32, e.g. TinyLlama v0.4)
        assert est["kv_bytes"] == formula(p, n, p.dtype), (name, n)
        if dt == "bf16" and p.dtype != "bf16":
            code, out16, err = cli("estimate", name, "--tokens", str(n), "--json", "--dtype", "bf16")
            assert code == 0, err
            assert json.loads(out16)["kv_bytes"] == live, (name, n)
        elif dt == "bf16":
            assert est["kv_bytes"] == live, (name, n)
        else:
            # gather_mm forced float32 (mixtral, gpt-oss): the fp32 estimate must match the live model,
            # and with no fixed-dtype state tensor the bf16 figure is exactly half of it.
            code, out32, err = cli("estimate", name, "--tokens", str(n), "--json", "--dtype", "fp32")
            assert code == 0, err
            assert json.loads(out32)["kv_bytes"] == live, (name, n)
            assert not fixed_dtype and 2 * est["kv_bytes"] == live, (name, n)
        assert formula(p, n, dt) == live, (name, n)
    code, out, err = cli("estimate", name, "--tokens", "32768", "--json")
    assert code == 0 or (code == 1 and json.loads(out).get("past_context")), err  # past a 2k-8k context: exit 1
    assert json.loads(out)["kv_bytes"] == formula(p, 32768, p.dtype)


# --------------------------------------------------------------------------------------------------
# kv quantization (generate_step(kv_bits=...)) and what must be refused
# --------------------------------------------------------------------------------------------------

QUANT_CASES = [("llama-3.1-8b", bits, g, start) for bits in (4, 8) for g in (32, 64) for start in (0, None)]
# a hybrid: its DeltaNet state stays unquantized (ArraysCache has no to_quantized), its full layers convert
QUANT_CASES += [("qwen3-next-80b-a3b-thinking", 4, 32, 0), ("qwen3-next-80b-a3b-thinking", 8, 64, 0),
                ("qwen3-next-80b-a3b-thinking", 8, 64, None)]


@lru_cache(maxsize=None)
def _model(name: str, layers: str = "kinds"):
    p = REG.profiles[name]
    return _build(config_for_profile(p, layers=layers, dense=can_be_dense(p)))


def _same_model(name: str):
    """pytest-xdist: the tests that reuse ``_model(name)`` (cached per process) run on one worker."""
    return pytest.mark.xdist_group(f"kv_live-model-{name}")


@pytest.mark.parametrize("name,bits,group,start", [pytest.param(*c, marks=_same_model(c[0])) for c in QUANT_CASES],
                         ids=lambda x: str(x))
def test_kv_quantized(name, bits, group, start):
    model, dt = _model(name)
    cut = cut_profile(REG.profiles[name], "kinds")
    q = KVQuant(bits, group) if start is None else KVQuant(bits, group, start)
    bad = []
    for n in ((257, 1000) if name.startswith("llama") else (257,)):
        live = cache_report(run_schedule(model, n, "generate", prefill_step=256, kv_bits=bits,
                                         kv_group_size=group, quantized_kv_start=q.start))
        bad += compare(cut, live, dt, n, "generate", 256, quant=q)[1]
        classes = {r["class"] for r in live}
        assert ("QuantizedKVCache" in classes) == (q.start <= n), classes
    assert not bad, "\n".join(bad)


@_same_model("llama-3.1-8b")
def test_quantized_kv_start_boundary():
    """mlx-lm converts after the call that brings the offset to >= quantized_kv_start, capacity kept."""
    model, dt = _model("llama-3.1-8b")
    cut = cut_profile(REG.profiles["llama-3.1-8b"], "kinds")
    for start, n in ((300, 300), (300, 299), (256, 257)):
        q = KVQuant(8, 64, start)
        live = cache_report(run_schedule(model, n, "generate", prefill_step=256, kv_bits=8,
                                         kv_group_size=64, quantized_kv_start=start))
        c, bad = compare(cut, live, dt, n, "generate", 256, quant=q)
        assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name,exc", [("gemma-3-4b-it", NotImplementedError),
                                      ("gpt-oss-20b", NotImplementedError),
                                      ("deepseek-v3", AttributeError)])
def test_unsupported_quantization_crashes_live(name, exc):
    """Sliding windows and MLA latents with kv_bits: the estimate refuses, because mlx-lm really crashes."""
    model, _ = _model(name)
    cut = cut_profile(REG.profiles[name], "kinds")
    with pytest.raises(UnsupportedError):
        kv_report(cut, 4, schedule="generate", chunk=2, quant=KVQuant(8, 64, 0))
    with pytest.raises(exc):
        run_schedule(model, 4, "generate", prefill_step=2, kv_bits=8, kv_group_size=64, quantized_kv_start=0)


def test_indexer_cachelist_stays_unquantized():
    """deepseek_v32's CacheList has no to_quantized: kv_bits changes nothing, and nothing crashes."""
    model, dt = _model("deepseek-v3.2")
    cut = cut_profile(REG.profiles["deepseek-v3.2"], "kinds")
    q = KVQuant(8, 64, 0)
    live = cache_report(run_schedule(model, 300, "generate", prefill_step=256, kv_bits=8,
                                     kv_group_size=64, quantized_kv_start=0))
    c, bad = compare(cut, live, dt, 300, "generate", 256, quant=q)
    assert c and not bad, "\n".join(bad)


def test_group_size_must_divide_head_width():
    """phi3's 96-wide heads cannot be quantized in groups of 64: estimate refuses, mx.quantize raises."""
    model, _ = _model("phi-3-mini-4k-instruct")
    cut = cut_profile(REG.profiles["phi-3-mini-4k-instruct"], "kinds")
    with pytest.raises(UnsupportedError):
        kv_report(cut, 2, schedule="generate", chunk=1, quant=KVQuant(4, 64, 0))
    with pytest.raises(ValueError):
        run_schedule(model, 2, "generate", prefill_step=1, kv_bits=4, kv_group_size=64, quantized_kv_start=0)


# --------------------------------------------------------------------------------------------------
# mlx-lm facts the profiles rely on
# --------------------------------------------------------------------------------------------------


def _with_layout(profile, kinds: dict, types: list[str], mlx_model_type: str | None = None):
    """A copy of ``profile`` with another layer layout (for the wrapper/direct contrasts below)."""
    return profile.relaid(Layers(kinds=kinds, types=types), name=profile.name + "-relaid",
                          **({"mlx_model_type": mlx_model_type} if mlx_model_type else {}))


def test_mistral3_wrapper_ignores_sliding_layers_but_ministral3_does_not():
    devstral = REG.profiles["devstral-small-2-24b-instruct"]
    kinds = {"sliding": {"kind": "sliding", "window": 128}, "full": {"kind": "full"}}
    types = ["sliding", "full"]
    direct = _with_layout(devstral, kinds, types, mlx_model_type="ministral3")
    wrapped_sliding = _with_layout(devstral, kinds, types)
    wrapped_full = _with_layout(devstral, {"full": {"kind": "full"}}, ["full", "full"])
    cfg = config_for_profile(wrapped_sliding)
    assert cfg["text_config"]["layer_types"] == ["sliding_attention", "full_attention"]
    wrapper, dt = _build(cfg)
    solo, dt2 = _build(config_for_profile(direct))
    for n, sched, step in ((1000, "generate", 256), (300, "direct", 0)):
        w_live, d_live = _run(wrapper, n, sched, step), _run(solo, n, sched, step)
        assert [r["class"] for r in w_live] == ["KVCache", "KVCache"]
        assert [r["class"] for r in d_live] == ["RotatingKVCache", "KVCache"]
        assert not compare(wrapped_full, w_live, dt, n, sched, step)[1]
        assert not compare(direct, d_live, dt2, n, sched, step)[1]
        # the sliding declaration is wrong for the wrapper: the live model says so
        if sched == "generate":
            assert compare(wrapped_sliding, w_live, dt, n, sched, step)[1]


def test_gemma3_text_and_vlm_wrapper_build_the_same_caches():
    p = REG.profiles["gemma-3-4b-it"]
    text = dataclasses.replace(cut_profile(p, "kinds"), mlx_model_type="gemma3_text")
    cfg = config_for_profile(text)
    assert cfg["model_type"] == "gemma3_text"
    model, dt = _build(cfg)
    bad = compare(text, _run(model, 1000, "generate", 256), dt, 1000, "generate", 256)[1]
    assert not bad, "\n".join(bad)


def test_lfm2_vl_wrapper_delegates_to_lfm2():
    """LFM2-VL's wrapper hands make_cache to lfm2; mlx_lm.load cannot import it as 'lfm2_vl' (file lfm2-vl.py)."""
    from mlx_lm.utils import _get_classes

    with pytest.raises(ValueError, match="lfm2_vl not supported"):
        _get_classes({"model_type": "lfm2_vl"})
    p = REG.profiles["lfm2.5-vl-1.6b"]
    cut = cut_profile(p, "kinds")
    model, dt = _build({"model_type": "lfm2_vl", "text_config": config_for_profile(p, layers="kinds")})
    assert model.omlx_build_info.module == "lfm2-vl"
    bad = compare(cut, _run(model, 257, "generate", 256), dt, 257, "generate", 256)[1]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", ["gemma-2-9b-it", "phi-3-mini-4k-instruct", "qwen2.5-7b-instruct"])
def test_families_that_ignore_sliding_window(name):
    """A sliding declaration for gemma2 / phi3 / qwen2 is wrong: mlx-lm builds KVCache for every layer."""
    p = REG.profiles[name]
    wrong = _with_layout(p, {"sliding": {"kind": "sliding", "window": 64}, "full": {"kind": "full"}},
                         ["sliding", "full"])
    model, dt = _build(config_for_profile(wrong))
    live = _run(model, 100, "generate", 256)  # a window of 64 would hold 64 rows; KVCache holds 256
    assert [r["class"] for r in live] == ["KVCache", "KVCache"]
    assert compare(wrong, live, dt, 100, "generate", 256)[1]
