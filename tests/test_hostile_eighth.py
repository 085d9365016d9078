"""Hostile suite, eighth pass (#18, session 12): the CLI, the Python API and the oMLX facade take the same domain.

The generator is ``tests/hostile/sweep_eighth.py``: every option with an API counterpart, at its edges, asked of
both surfaces and judged as a pair (one refuses what the other answers, or they answer differently). What it
found, each held here at its root:

* the CLI refused ``--kv-start 0`` (the prompt-length rule) while ``KVQuant(start=0)`` and mlx-lm's
  ``--quantized-kv-start 0`` take it (session 11 found the same for ``--cached 0``: test_hostile_seventh);
* ``Request``, ``KVQuant`` and ``kv_report`` took token counts to 2^40 where the CLI and the facade stop at 2^30
  (``units.MAX_TOKENS``, docs/errors.md);
* one replay was bounded at 2^20 calls whatever the backend, but a CUDA call walks its graphs (~100x a CPU call):
  ``Estimator.prefill_peak(Request(2**30), backend="cuda")`` and the facade's ``estimate_prefill_peak_bytes(2**30,
  2048)`` ran ~50 minutes (524,289 calls); the CLI's work budget refused it, the API has none.
"""
from __future__ import annotations

import json
import logging
import random

import pytest

import omlx_profiles as op
from omlx_profiles.errors import InputError, UnsupportedError
from omlx_profiles.kv.bytes import KVQuant, kv_report
from omlx_profiles.peak.request import Request

from .hostile import sweep_eighth
from .hostile.harness import EXIT_USAGE, assert_clean_failure, run_main
from .hostile.sweep_common import Timeout, cpu_limit

MODEL = "qwen3-8b"
T30 = 1 << 30


@pytest.fixture(scope="module")
def profile():
    return op.default_registry().resolve(MODEL).profile


# --------------------------------------------------------------------------------------------------
# hangs: one API / facade replay on CUDA is priced as the CLI prices it, and refused up front past MAX_CALLS units
# --------------------------------------------------------------------------------------------------
def test_a_two_to_the_thirty_token_cuda_request_is_refused_up_front(profile, caplog):
    from omlx_profiles.compat.monitor import MemoryMonitor

    e = op.Estimator(profile)
    m = MemoryMonitor(64 << 30, backend="cuda")
    m.set_profile(profile)
    try:
        with cpu_limit(5.0):  # it ran ~50 minutes
            with pytest.raises(UnsupportedError, match="larger chunk"):
                e.prefill_peak(Request(T30), backend="cuda")
            with caplog.at_level(logging.WARNING):
                assert m.estimate_prefill_peak_bytes(T30, 2048) == 0  # the facade's "no number", said in the log
    except Timeout:
        pytest.fail("a 2^30-token CUDA request still replays (more than 5 s of CPU)")
    assert "larger chunk" in caplog.text
    # what the CLI refuses by its work budget is unchanged (exit 2, the budget's sentence)
    assert_clean_failure(run_main("estimate", MODEL, "--tokens", str(T30), "--backend", "cuda"), EXIT_USAGE,
                         "prefill calls", "--chunk")


# --------------------------------------------------------------------------------------------------
# one limit for a token count: 2^30 in the CLI, the API and the facade
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda p: Request(T30 + 1), lambda p: Request(4096, chunk=T30 + 1), lambda p: Request(T30 + 2, cached=T30 + 1),
    lambda p: KVQuant(4, 64, T30 + 1), lambda p: kv_report(p, T30 + 1),
], ids=["tokens", "chunk", "cached", "kv_start", "kv_report"])
def test_token_counts_stop_at_two_to_the_thirty_in_the_api(call, profile):
    with pytest.raises(InputError, match=str(T30)):
        call(profile)


def test_token_counts_at_two_to_the_thirty_are_taken(profile):
    assert Request(T30).tokens == T30 and Request(4096, chunk=T30).chunk == T30
    assert KVQuant(4, 64, T30).start == T30
    assert run_main("estimate", MODEL, "--tokens", "4k", "--kv-bits", "4", "--kv-start", str(T30)).code == 0
    assert_clean_failure(run_main("estimate", MODEL, "--tokens", "4k", "--kv-bits", "4", "--kv-start", str(T30 + 1)),
                         EXIT_USAGE, "--kv-start")


# --------------------------------------------------------------------------------------------------
# `--kv-start 0`: quantize from the first call, as KVQuant(start=0) and mlx-lm's --quantized-kv-start 0
# (mlx-lm quantizes after a call once the offset >= start: 0 and 1 are the same; tests/test_kv_live.py runs 0 live)
# --------------------------------------------------------------------------------------------------
def test_kv_start_zero_is_the_apis_start_zero(profile, workdir):
    r0 = run_main("estimate", MODEL, "--tokens", "8192", "--kv-bits", "4", "--kv-start", "0", "--json")
    r1 = run_main("estimate", MODEL, "--tokens", "8192", "--kv-bits", "4", "--kv-start", "1", "--json")
    assert r0.code == 0, r0.err
    kv0 = json.loads(r0.out)["kv_bytes"]
    assert kv0 == kv_report(profile, 8192, quant=KVQuant(4, 64, 0)).total == json.loads(r1.out)["kv_bytes"]
    assert kv0 < kv_report(profile, 8192).total  # quantized, not ignored
    assert_clean_failure(run_main("estimate", MODEL, "--tokens", "8192", "--kv-bits", "4", "--kv-start", "-1"),
                         EXIT_USAGE, "--kv-start")


# --------------------------------------------------------------------------------------------------
# the eighth sweep: a seeded sample of its CLI / API pairs under its judge (the whole sweep: see its docstring)
# --------------------------------------------------------------------------------------------------
def test_eighth_sample_is_clean(workdir):
    rng = random.Random(12)
    cases = list(sweep_eighth.kvquant_cases(MODEL))
    cases += list(sweep_eighth.estimate_cases(MODEL, "cpu"))
    bad = []
    for argv, api in rng.sample(cases, 16):
        keys = ("kv_bytes",) if "--kv-bits" in argv else sweep_eighth.EST_KEYS
        bad += [f"{' '.join(argv)}: {b}" for b in sweep_eighth.pair_problems(argv, api, keys)]
    bad += [f"facade {label}: {b}" for label, bs in sweep_eighth.facade_problems() for b in bs]
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------------------------------
# the harness's own limits (session 12): CPU time for the work (a loaded CI box failed cases on a 5 s wall alarm
# that did their work in time), a long wall-clock backstop for a case that waits and burns nothing
# --------------------------------------------------------------------------------------------------
def test_the_harness_stops_slow_work_and_a_blocked_wait():
    import time

    from .hostile.harness import CaseTimeout, deadline

    with pytest.raises(CaseTimeout, match="CPU"):
        with deadline(0.2):
            while True:
                pass
    with pytest.raises(CaseTimeout, match="wall"):
        with deadline(5.0, wall=0.3):
            time.sleep(5)  # a blocked read burns no CPU: only the wall clock sees it
    t0 = time.perf_counter()
    with deadline(0.5, wall=10.0):
        time.sleep(0.7)  # waiting past the CPU limit is not work
    assert time.perf_counter() - t0 >= 0.7


# --------------------------------------------------------------------------------------------------
# silently wrong: the sharded estimate's verdict read its reserve unchecked (usable = budget + 1 at reserve -1, a
# float at 1.5) while sharded_fit and Estimator.fits refuse both: one check (estimate.budget.resolve_reserve)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reserve", [-1, 1.5, (1 << 50) + 1])
@pytest.mark.parametrize("budgets", [(64 << 30,), ()], ids=["budget", "no-budget"])
def test_a_sharded_reserve_is_checked_as_the_single_one(reserve, budgets, profile):
    from omlx_profiles.sharding import ShardedOptions, ShardSpec, rank_profiles, rank_weights, sharded_estimate

    spec = ShardSpec(2, "tensor", None)
    views = rank_profiles(profile, spec)

    class W:
        bytes, reason, source, params = 1 << 30, None, "given", None

    ws = rank_weights(profile, spec, views, whole=W())
    res = op.default_registry().resolve(MODEL)
    with pytest.raises(InputError, match="reserve"):
        sharded_estimate(res, ShardedOptions(spec, backend="cpu", budgets=budgets, reserve=reserve), 4096, ws, views)
    with pytest.raises(InputError, match="reserve"):
        op.Estimator(profile).fits(Request(4096), 64 << 30, reserve=reserve, backend="cpu")
