"""Hostile suite, fifth pass (#18, session 8): new generated inputs for every class, and resource bounds.

The generators are ``tests/hostile/sweep_fifth.py`` (odd files in new places, option interplay, context
edges, output names, control characters in every echoed value, id spellings, environment variables,
every public API argument and the oMLX facade x hostile values) and ``tests/hostile/sweep_timing.py``
(every CLI command on every registry model x backend, defaults and extremes). One section per mechanism
found missing; ``test_fifth_sample_is_clean`` replays a seeded sample of every generated CLI group with
a spy on the catch-all (no case may reach "internal error"), and ``test_registry_timing_sample`` a
seeded sample of the timing sweep under a CPU bound.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

import omlx_profiles as op
from omlx_profiles.errors import OmlxProfilesError, UnknownModelError
from omlx_profiles.peak.request import Request

from .hostile.harness import REPO, assert_clean_failure, model_dir, refusal_problems, run_main

CONFIGS = REPO / "tests" / "configs"
QWEN = json.loads((CONFIGS / "qwen3-8b.json").read_text())
LLAMA = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
MODEL = "qwen3-8b"


@pytest.fixture(scope="module")
def est():
    return op.Estimator(op.default_registry().resolve(MODEL).profile)


# --------------------------------------------------------------------------------------------------
# API: typed errors (mechanism: registry.profile.require_profile, files.user_path's type check,
# estimator._check_names, MAX_TOKENS bounds on max_tokens(limit) and prepare(chunk))
# --------------------------------------------------------------------------------------------------
HOSTILE = [True, -1, 0, float("nan"), 2.5, "8", None, [8], b"8", 10**40, 1j, object()]
NAMES = [[8], {"a": 1}, 8, b"metal", 2.5, object()]


def _calls(est):
    req = Request(1024)
    for i, v in enumerate(HOSTILE):
        yield f"Estimator[{i}]", lambda v=v: op.Estimator(v)
        if v is not None:  # None: "not given", for both
            yield f"resolve(local_dir)[{i}]", lambda v=v: op.resolve(MODEL, local_dir=v)
            yield f"max_tokens(limit)[{i}]", lambda v=v: est.max_tokens(64 << 30, limit=v)
    for i, v in enumerate(NAMES):
        yield f"fits(backend)[{i}]", lambda v=v: est.fits(req, 64 << 30, backend=v)
        yield f"fits(mlx_version)[{i}]", lambda v=v: est.fits(req, 64 << 30, mlx_version=v)
        yield f"prefill_peak(dtype)[{i}]", lambda v=v: est.prefill_peak(req, dtype=v)
        yield f"max_tokens(backend)[{i}]", lambda v=v: est.max_tokens(64 << 30, backend=v)
        yield f"prepare(backend)[{i}]", lambda v=v: est.prepare(backend=v)
    yield "max_tokens(limit=2^30+1)", lambda: est.max_tokens(64 << 30, limit=(1 << 30) + 1)
    yield "prepare(chunk=2^30+1)", lambda: est.prepare((1 << 30) + 1)


def test_api_hostile_arguments_raise_typed_errors(est):
    """An AttributeError (Estimator(42)), TypeError (a list as backend: unhashable memo key; a path that
    is an int) or a hang (limit / chunk past 2^30) used to leave the API; each is now an
    ``OmlxProfilesError`` (``InputError`` is a ``ValueError`` too) within a second."""
    assert not refusal_problems(_calls(est), cpu=1.0)


def test_resolution_passed_as_a_profile_says_what_to_pass():
    res = op.resolve(MODEL, hub=False)
    with pytest.raises(OmlxProfilesError, match=r"resolution\.profile"):
        op.Estimator(res)


@pytest.mark.parametrize("obj", ["qwen3-8b", None, 42], ids=["str", "none", "int"])
def test_facade_set_profile_refuses_a_non_profile_and_keeps_its_model(obj):
    from omlx_profiles.compat import MemoryMonitor

    m = MemoryMonitor(64 << 30, backend="metal")
    m.set_model_info(36, 8, 128)
    before = m.estimate_block_memory(64)
    with pytest.raises(ValueError, match="Profile"):
        m.set_profile(obj)
    assert m.estimate_block_memory(64) == before  # nothing cleared by the refused call


# --------------------------------------------------------------------------------------------------
# fit: one search, windows growing from 64k (mechanism: Estimator.max_tokens; estimate/fit.search_limit
# for the single and the sharded fit). A 2^30-context config was "unsupported" sharded and refused by
# the work budget single, whatever the budget.
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [24 << 30, 64 << 30, 200 << 30])
def test_max_tokens_is_the_longest_prompt_whose_total_fits(est, budget):
    """The answer's definition, checked from the exact totals on both sides, for a limit far past it;
    and the limit does not change it."""
    from omlx_profiles.estimate.budget import resolve_reserve

    w = 16 << 30
    usable = budget - resolve_reserve(budget, None)
    mt = est.max_tokens(budget, weights_bytes=w, limit=1 << 30, backend="cpu")
    assert 0 < mt < 1 << 30
    assert est.total_bytes(Request(mt), w, "cpu") <= usable < est.total_bytes(Request(mt + 1), w, "cpu")
    assert est.max_tokens(budget, weights_bytes=w, limit=4 * mt, backend="cpu") == mt


def test_max_tokens_probes_follow_the_answer_not_the_limit(monkeypatch):
    est = op.Estimator(op.default_registry().resolve(MODEL).profile)  # a fresh one: the search's probes are memoized
    seen = []
    real = est.prefill_peak
    monkeypatch.setattr(est, "prefill_peak", lambda r, *a, **k: seen.append(r.tokens) or real(r, *a, **k))
    mt = est.max_tokens(24 << 30, weights_bytes=16 << 30, limit=1 << 30, backend="cpu")
    assert max(seen) <= 4 * max(mt, 1 << 16), (mt, max(seen))


@pytest.mark.parametrize("extra", [[], ["--ranks", "2", "--parallel", "tensor"]], ids=["single", "sharded"])
def test_fit_of_a_2_30_context_config_answers(extra, tmp_path, workdir):
    cfg = model_dir(tmp_path, "big", {**LLAMA, "num_hidden_layers": 32, "max_position_embeddings": 1 << 30,
                                        "rope_scaling": None})
    r = run_main("fit", "--config", str(cfg), "--budget", "200GiB", "--weights", "10GB", *extra, "--json",
                 seconds=20)
    assert r.code == 0, r.err
    fit = json.loads(r.out)
    assert 0 < fit["max_tokens"] < 1 << 30 and fit["max_context"] == 1 << 30


def test_search_limit_never_passes_the_token_limit():
    from omlx_profiles.estimate.fit import search_limit
    from omlx_profiles.units import MAX_TOKENS

    for ctx in (None, 1, 4096, 40960, 1 << 20, 1 << 28, (1 << 28) + 1, 1 << 30):
        for chunk in (1, 512, 2048, 1 << 20):
            lim = search_limit(ctx, chunk)
            assert (ctx or 0) <= lim <= MAX_TOKENS or lim == MAX_TOKENS, (ctx, chunk, lim)


# --------------------------------------------------------------------------------------------------
# chart: points within CHART_SECONDS, coarse to fine (mechanism: estimate/fit.sample_points, single and
# sharded). deepseek-v2-lite on cuda took 8.8 s of CPU for 160 points.
# --------------------------------------------------------------------------------------------------
def test_coarse_to_fine_prefixes_cover_the_axis():
    from omlx_profiles.estimate.fit import coarse_to_fine

    for n in range(1, 300, 7):
        xs = list(range(n))
        order = coarse_to_fine(xs)
        assert sorted(order) == xs
        assert set(order[:2]) == {0, n - 1} or n == 1
        for k in (3, 9, 24):  # any prefix spans the axis with gaps at most ~2n/k
            seen = sorted(order[:k])
            if len(seen) > 2:
                assert max(b - a for a, b in zip(seen, seen[1:])) <= max(2, 4 * n // len(seen))


def test_chart_out_of_time_keeps_the_whole_axis(monkeypatch):
    from omlx_profiles.estimate import fit

    calls = []
    xs = list(range(0, 160_000, 1000))
    got = fit.sample_points(xs, lambda x: calls.append(x) or x, seconds=0.0, minimum=24)
    assert len(got) == 24 == len(calls) and got[0][0] == 0 and got[-1][0] == xs[-1]
    assert [x for x, _ in got] == sorted(x for x, _ in got)


# --------------------------------------------------------------------------------------------------
# ids (mechanism: profiles/naming/ids.yaml refuse rule + the recipe's group in naming._quant)
# --------------------------------------------------------------------------------------------------
BASES = ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "mlx-community/gemma-3-27b-it"]


@pytest.mark.parametrize("suffix", ["-GPTQ-Int8", "-AWQ-8bit", "-8bit-AWQ", "_gptq_int3", "-int8-gptq", "-AWQ.6bit"])
def test_awq_gptq_other_than_4_bits_is_refused(suffix):
    """mlx-lm 0.32.2 repacks AutoAWQ / GPTQ at 4 bits only (``Only bits=N is supported``): these were
    read as MLX 8-bit checkpoints."""
    for base in BASES:
        with pytest.raises(UnknownModelError, match="4 bits only"):
            op.default_registry().resolve(base + suffix)


@pytest.mark.parametrize("suffix", ["-AWQ", "-AWQ-INT4", "-GPTQ-Int4", "-4bit-AWQ", "-gptq_int4", "-AWQ-4bit"])
def test_awq_gptq_4_bit_keeps_its_group_of_128(suffix):
    """AutoAWQ / GPTQ default to group 128 (mlx-lm reads quantization_config; 128 when absent): an id
    that also spelled the bits (``-AWQ-INT4``) fell back to MLX's group 64."""
    for base in BASES:
        q = op.default_registry().resolve(base + suffix).quant
        assert q is not None and [(p.bits, p.group_size) for p in q.parts] == [(4, 128)], (base + suffix, q)


# --------------------------------------------------------------------------------------------------
# terminal / environment
# --------------------------------------------------------------------------------------------------
def test_written_path_with_a_newline_is_one_line(workdir):
    """``-o $'x\\nerror: y.svg'`` printed a second line the user did not write (files.shown_path)."""
    r = run_main("chart", MODEL, "--max-tokens", "4k", "--points", "8", "-o", "a\nerror: forged.svg")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == "wrote a\\nerror: forged.svg"


def test_mplbackend_bogus_is_ignored(tmp_path):
    """The chart draws with Agg; MPLBACKEND=bogus made importing matplotlib raise ValueError ("internal
    error"). A subprocess: the variable is read when matplotlib is first imported."""
    env = {**os.environ, "MPLBACKEND": "bogus", "PYTHONPATH": str(REPO)}
    env.pop("OMLX_PROFILES_DEBUG", None)
    out = tmp_path / "c.svg"
    p = subprocess.run([sys.executable, "-m", "omlx_profiles.cli.main", "chart", MODEL, "--max-tokens", "4k",
                        "--points", "8", "-o", str(out)], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and out.exists(), p.stderr


# --------------------------------------------------------------------------------------------------
# a seeded sample of every generated CLI group (tests/hostile/sweep_fifth.py), under the sweep's judge
# and a spy on the catch-all
# --------------------------------------------------------------------------------------------------
SAMPLE = {"files": 8, "interplay": 7, "context": 4, "outputs": 5, "terminal": 8, "ids": 6}


def test_fifth_sample_is_clean(tmp_path, workdir, monkeypatch):
    from tests.hostile import sweep_fifth
    from tests.hostile.sweep_fourth import judge, run

    makers = {"files": sweep_fifth.file_cases, "interplay": sweep_fifth.interplay_cases,
              "context": sweep_fifth.context_cases, "outputs": sweep_fifth.output_cases,
              "terminal": sweep_fifth.terminal_cases, "ids": lambda root: sweep_fifth.id_cases()}
    rng = random.Random(5)
    bad = []
    for group, k in SAMPLE.items():
        root = tmp_path / group
        root.mkdir()
        cases = [c for c in makers[group](root) if c[0][0] != "chart" or "-o" in c[0]]
        cheap = [c for c in cases if c[0][0] != "chart"]
        picked = rng.sample(cheap, min(k, len(cheap)))
        for argv, expect in picked:
            res = run(argv, cpu=5.0)
            why = [b for b in judge(argv, res, expect) if not b.startswith("SLOW")]
            if why:
                bad.append((group, argv, why))
    assert not bad, bad


def test_registry_timing_sample(tmp_path, workdir):
    """A seeded sample of tests/hostile/sweep_timing.py: any registry model x backend, default and
    extreme options, finishes or refuses within the sweep's bound (3 s of CPU answered)."""
    from tests.hostile.sweep_fourth import judge, run
    from tests.hostile.sweep_timing import model_cases

    reg = op.default_registry()
    rng = random.Random(8)
    names = rng.sample(sorted(reg.profiles), 3)
    bad = []
    for name, backend in zip(names, ("cpu", "metal", "cuda")):
        cases = [c for c in model_cases(name, backend, reg.profiles[name].max_context, tmp_path, heavy=True)
                 if c[0] != "chart"]
        for argv in rng.sample(cases, 2):
            res = run(argv, cpu=8.0)
            why = [b for b in judge(argv, res) if not b.startswith("SLOW")]
            if res[3] > 3.0 and res[0] == 0:
                why.append(f"{res[3]:.1f} s CPU")
            if why:
                bad.append((argv, why))
    assert not bad, bad


# --------------------------------------------------------------------------------------------------
# config.json: a Hugging Face quantization_config mlx-lm does not load (mechanism: the naming table's
# hf_quant_methods, checked by registry.naming.check_hf_quantization where mlxlm.config reads it)
# --------------------------------------------------------------------------------------------------
REFUSED_QC = [{"quant_method": "awq", "bits": 8, "group_size": 128}, {"quant_method": "gptq", "bits": 3},
              {"quant_method": "bitsandbytes", "load_in_4bit": True}, {"quant_method": "hqq", "nbits": 4},
              {"quant_method": "quanto"}, {"quant_method": "aqlm"}, {"quant_method": "\x1b[2J"},
              {"quant_method": ["awq"]}, {"quant_method": "AWQ "}]
LOADED_QC = [{"quant_method": "awq", "bits": 4, "group_size": 128}, {"quant_method": "gptq"},
             {"quant_method": "fp8", "weight_block_size": [128, 128]}, {"quant_method": "mxfp4"},
             {"quant_method": "compressed-tensors"}]


@pytest.mark.parametrize("qc", REFUSED_QC, ids=range(len(REFUSED_QC)))
def test_hf_quantization_mlx_lm_cannot_load_is_refused(qc, tmp_path, workdir):
    """They were noted as "weight bits not taken from it" and estimated as if mlx-lm could run them."""
    d = model_dir(tmp_path, "m", {**QWEN, "quantization_config": qc})
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert_clean_failure(r, 2, "not an MLX checkpoint", "quantization_config")


@pytest.mark.parametrize("qc", LOADED_QC, ids=range(len(LOADED_QC)))
def test_hf_quantization_mlx_lm_loads_is_estimated(qc, tmp_path, workdir):
    d = model_dir(tmp_path, "m", {**QWEN, "quantization_config": qc})
    r = run_main("estimate", str(d), "--tokens", "1k")
    assert r.code == 0, r.err
