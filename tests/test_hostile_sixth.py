"""Hostile suite, sixth pass (#18, session 10): session 9's four classes re-found, new generated inputs,
resource bounds at the CLI.

Session 9's hostile pass was lost with its machine; its classes were re-found and each is fixed at one
place (section headers name the mechanism):

* every table with a prefill total says what the total rests on (``peak basis``): fit, sharded estimate /
  fit and chart printed no basis (or only a word, without why);
* a sharded rank's total is the reported (enveloped) one: the raw replay was up to 10% under the
  single-machine total after a prefix (gpt-oss-20b on CUDA) and not monotone;
* the API's ``dtype`` / ``nax`` are checked once (an unknown dtype was a ``KeyError`` from ``fits``,
  ``""`` silently the profile's, ``nax="no"`` true);
* the oMLX facade's constructor and ``set_profile`` widths are ``ValueError``s (a NaN limit, a negative or
  infinite width gave NaN / negative bytes).
"""
from __future__ import annotations

import json
import random
import re

import pytest

import omlx_profiles as op
from omlx_profiles.peak.request import Request

from .hostile.harness import refusal_problems, run_main

MODEL = "qwen3-8b"


@pytest.fixture(scope="module")
def est():
    return op.Estimator(op.default_registry().resolve(MODEL).profile)


# --------------------------------------------------------------------------------------------------
# API dtype / nax (mechanism: units.check_dtype and units.check_flag, called by kv.bytes.kv_report,
# peak.call.activation_dtype, peak.prefill.prefill_peak and estimator._check_names)
# --------------------------------------------------------------------------------------------------
BAD_DTYPES = ["int4", "", "BF16", "bfloat16", " bf16", "fp8", [1], 2, b"bf16"]
BAD_NAX = ["no", "", 1, 0, None, [1], float("nan")]


def _api_calls(est):
    req = Request(1000)
    for d in BAD_DTYPES:
        yield f"fits(dtype={d!r})", lambda d=d: est.fits(req, 64 << 30, backend="cpu", dtype=d)
        yield f"prepare(dtype={d!r})", lambda d=d: est.prepare(512, backend="cpu", dtype=d)
        yield f"prefill_peak(dtype={d!r})", lambda d=d: est.prefill_peak(req, "cpu", dtype=d)
        yield f"kv_bytes(dtype={d!r})", lambda d=d: est.kv_bytes(1000, dtype=d)
        yield f"max_tokens(dtype={d!r})", lambda d=d: est.max_tokens(64 << 30, backend="cpu", dtype=d)
    for n in BAD_NAX:
        yield f"fits(nax={n!r})", lambda n=n: est.fits(req, 64 << 30, backend="cpu", nax=n)
        yield f"prefill_peak(nax={n!r})", lambda n=n: est.prefill_peak(req, "cpu", nax=n)
        yield f"total_bytes(nax={n!r})", lambda n=n: est.total_bytes(req, 0, "cpu", nax=n)
        yield f"max_tokens(nax={n!r})", lambda n=n: est.max_tokens(64 << 30, backend="cpu", nax=n)
        yield f"prepare(nax={n!r})", lambda n=n: est.prepare(512, backend="cpu", nax=n)


def test_api_dtype_and_nax_are_typed_errors(est):
    """``fits`` / ``prepare`` with an unknown dtype raised ``KeyError`` (the fast path indexed DTYPE_BYTES),
    ``""`` was the profile's dtype without a word, a list an unhashable-type ``TypeError``, and ``nax`` took
    anything truthy as true."""
    assert not refusal_problems(_api_calls(est))


def test_api_valid_dtype_and_nax_still_answer(est):
    req = Request(1000)
    fp32 = est.prefill_peak(req, "cpu", dtype="fp32").peak_bytes
    assert fp32 > est.prefill_peak(req, "cpu", dtype="bf16").peak_bytes  # the dtype is used, not ignored
    assert est.fits(req, 64 << 30, backend="metal", nax=True).fits in (True, False)
    assert est.kv_bytes(1000, dtype=None) == est.kv_bytes(1000, dtype="bf16")  # qwen3-8b is bf16


# --------------------------------------------------------------------------------------------------
# oMLX facade (mechanism: compat.monitor._check_construction; set_profile's widths through the same
# uniform._positive_number as set_model_info)
# --------------------------------------------------------------------------------------------------
NOT_SIZES = [float("nan"), float("inf"), -1, "2", [2], 1j, True, 10**40]
NOT_WIDTHS = [-2, -0.5, 0, float("inf"), float("-inf"), float("nan"), "2", [2], 1j, True, 1e308]


def test_facade_constructor_refuses_what_is_no_size():
    from omlx_profiles.compat import MemoryMonitor

    calls = []
    for v in NOT_SIZES:
        calls += [(f"max_kv_cache_memory={v!r}", lambda v=v: MemoryMonitor(v, backend="cpu")),
                  (f"max_memory={v!r}", lambda v=v: MemoryMonitor(1 << 30, backend="cpu", max_memory=v))]
        if v != 10**40:  # a long interval is a number of seconds, not a size
            calls.append((f"check_interval={v!r}", lambda v=v: MemoryMonitor(1 << 30, v, backend="cpu")))
    assert not refusal_problems(calls, ValueError)
    assert MemoryMonitor(None, 0.5, eviction_enabled=False, backend="cpu", max_memory=1 << 36).max_memory \
        == 1 << 36


def test_facade_set_profile_refuses_non_widths_and_keeps_its_model():
    from omlx_profiles.compat import MemoryMonitor

    p = op.default_registry().resolve(MODEL).profile
    m = MemoryMonitor(16 << 30, backend="cpu")
    m.set_profile(p)
    before = m.estimate_block_memory(64)
    bad = []
    for v in NOT_WIDTHS:
        for kw in ("dtype_size", "kv_bytes_per_token"):
            try:
                m.set_profile(p, **{kw: v})
                bad.append(f"{kw}={v!r}: accepted, a block is {m.estimate_block_memory(64)!r} bytes")
            except ValueError:
                assert m.estimate_block_memory(64) == before, kw
            except Exception as e:  # noqa: BLE001
                bad.append(f"{kw}={v!r}: {type(e).__name__}: {e}")
    assert not bad, bad
    m.set_profile(p, dtype_size=1)  # a narrower store (8-bit) is a width, and halves the blocks
    assert 0 < m.estimate_block_memory(64) < before


# --------------------------------------------------------------------------------------------------
# Sharded totals are the reported (enveloped) ones (mechanism: sharding.report.rank_estimate and the
# sharded chart through Estimator.prefill_peak, as the single-machine estimate, fit and chart)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cached,new", [(100, 769)])
def test_sharded_rank_total_is_the_reported_one(cached, new):
    """gpt-oss-20b on 2 tensor ranks on CUDA after a prefix: the rank's peak was the raw replay, 9.7% / 7.2%
    under ``Estimator.prefill_peak`` of the same rank profile (the number ``fit --ranks`` searched on). One
    point of the two session 10 found (both under, one code path: ``rank_estimate``): the other, (1000, 1892),
    cost 4.3 s of CI CPU and was cut in session 12 for test_hostile_eighth (3.2 s)."""
    from omlx_profiles.sharding import ShardedOptions, ShardSpec, rank_profiles, sharded_estimate
    from omlx_profiles.sharding.weights import RankWeights  # noqa: F401  (the type the report takes)

    res = op.default_registry().resolve("gpt-oss-20b")
    spec = ShardSpec(2, "tensor", None)
    opts = ShardedOptions(spec, chunk=2048, cached=cached, backend="cuda")
    views = rank_profiles(res.profile, spec)

    class W:
        bytes, reason, source, params = 1 << 30, None, "given", None

    from omlx_profiles.sharding import rank_weights

    ws = rank_weights(res.profile, spec, views, whole=W())
    r = sharded_estimate(res, opts, cached + new, ws, views)["per_rank"][0]
    e = op.Estimator(views[0].profile).prefill_peak(Request(cached + new, cached=cached), backend="cuda")
    assert r["held_before_bytes"] + r["peak_bytes"] == e.held_before_bytes + e.peak_bytes
    assert r["peak_basis"] == e.peak_basis


# --------------------------------------------------------------------------------------------------
# Every table with a prefill total says its basis (mechanism: cli.render.basis_notes for estimate, fit and
# the sharded tables; estimate.fit.basis_notes for the chart's lines)
# --------------------------------------------------------------------------------------------------
def _kinds(text: str) -> set[str]:
    return set(re.findall(r"prefill peak basis: (measured|derived|bound)", text))


def _cases():
    """Generated: a seeded sample of registry models x backends, each command with and without ranks."""
    reg = op.default_registry()
    rng = random.Random(10)
    names = [n for n in sorted(reg.profiles) if reg.profiles[n].num_layers <= 48]
    # CI seconds: on CUDA no recurrent-state (GDN) model, whose CUDA call windows cost ~20x (s10-gdn's lane)
    cheap = [n for n in names if not any(e.kind == "state" for lt in reg.profiles[n].layer_types.values()
                                         for e in lt.entries)]
    for name, backend in zip(rng.sample(names, 2) + rng.sample(cheap, 1), ("cpu", "metal", "cuda")):
        # CUDA fits far past the context cost tens of seconds on hybrid models (the resource section below)
        yield name, backend, ["fit", name, "--budget", "1PiB" if backend != "cuda" else "48GiB", "--backend", backend]
        yield name, backend, ["fit", name, "--budget", "1GiB", "--weights", "2GiB", "--backend", backend]
        yield name, backend, ["estimate", name, "--tokens", "4k", "--backend", backend, "--ranks", "2",
                              "--parallel", "pipeline", "--weights", "8GiB"]
        yield name, backend, ["fit", name, "--budget", "96GiB" if backend != "cuda" else "8GiB", "--backend", backend,
                              "--ranks", "2", "--parallel", "tensor", "--weights", "8GiB"]


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: f"{c[2][0]}-{c[0]}-{c[1]}-{len(c[2])}")
def test_tables_say_their_peak_basis(case, workdir):
    """Session 9 counted 95 fit / sharded / chart outputs whose total did not say what backs it; the basis
    line (with its reason) is now under every such table, matching the JSON's ``peak_basis``."""
    name, backend, argv = case
    r = run_main(*argv, seconds=30)
    if r.err.startswith(("unsupported", "error")):  # refused: no pipeline in the module, heads do not divide
        assert r.code in (1, 2) and "internal error" not in r.err, r.err
        return
    assert r.code in (0, 1), r.err
    j = run_main(*argv, "--json", seconds=30)
    data = json.loads(j.out)
    at = data.get("at_max", data)
    want = {rk.get("peak_basis") for rk in at["per_rank"]} if "per_rank" in at else {at.get("peak_basis")}
    want.discard(None)
    assert want, "no peak_basis in the JSON"
    assert _kinds(r.out) == want, r.out


def test_chart_lines_say_their_peak_basis(tmp_path, workdir):
    r = run_main("chart", "deepseek-v2-lite", MODEL, "--backend", "cpu", "--max-tokens", "8k",
                 "-o", str(tmp_path / "c.svg"), seconds=60)
    assert r.code == 0, r.err
    lines = [l for l in r.out.splitlines() if "prefill peak basis" in l]
    assert any(l.strip().startswith("deepseek-v2-lite: prefill peak basis: bound (") for l in lines), r.out
    assert any(l.strip().startswith(f"{MODEL}: prefill peak basis: measured (") for l in lines), r.out
    r = run_main("chart", MODEL, "--backend", "cuda", "--max-tokens", "8k", "--ranks", "2",
                 "--parallel", "tensor", "-o", str(tmp_path / "s.svg"), seconds=60)
    assert r.code == 0, r.err
    assert len([l for l in r.out.splitlines() if "prefill peak basis: measured" in l]) == 2, r.out


# --------------------------------------------------------------------------------------------------
# Resource bounds at the CLI (mechanism: kv/work.deadline, a CPU deadline per command in cli/main; a CUDA
# replay call priced at kv/work.GRAPH_CALL_COST in the replay budget; a nested work budget for fit's search
# past the context, estimate/fit.memory_beyond)
# --------------------------------------------------------------------------------------------------
def _busy(seconds: float) -> None:
    import time

    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_nested_deadlines_each_stop_their_own_block():
    from omlx_profiles.kv.work import OutOfTime, deadline

    with deadline(5.0) as outer:
        with pytest.raises(OutOfTime) as e:
            with deadline(0.05) as inner:
                _busy(2.0)
        assert e.value.owner is inner and not outer.expired
    with pytest.raises(OutOfTime) as e:  # the outer one ends inside the inner block: it is the outer's
        with deadline(0.05) as outer:
            try:
                with deadline(5.0):
                    _busy(2.0)
            except OutOfTime as inner_e:
                assert inner_e.owner is outer
                raise
    assert e.value.owner is outer
    _busy(0.1)  # no timer is left armed


def test_a_command_past_its_cpu_seconds_stops_with_a_sentence(monkeypatch, workdir):
    """``fit`` of gemma-3-27b on CUDA took 54 s of CPU (s9: 13 s); every command now has a CPU bound."""
    import time

    monkeypatch.setenv("OMLX_PROFILES_CPU_SECONDS", "0.3")
    t0 = time.process_time()
    r = run_main("fit", "gemma-3-27b-it", "--budget", "192GiB", "--backend", "cuda", seconds=30)
    assert r.code == 2 and "s of CPU and was stopped" in r.err and "OMLX_PROFILES_CPU_SECONDS=0" in r.err, r.err
    assert "internal error" not in r.err and time.process_time() - t0 < 2.0
    monkeypatch.setenv("OMLX_PROFILES_CPU_SECONDS", "soon")
    r = run_main("estimate", MODEL, "--tokens", "1k")
    assert r.code == 2 and "OMLX_PROFILES_CPU_SECONDS must be a number" in r.err, r.err


def test_cuda_chunk_1_is_refused_up_front(workdir):
    """``--chunk 1`` on CUDA was killed at 30 s in 47 of 66 of session 9's cases: a CUDA call costs ~2.6 ms
    (its graph commits), ~300x a CPU-backend call, and the replay budget counted it as one."""
    import time

    t0 = time.process_time()
    r = run_main("estimate", "llama-3.1-8b-instruct", "--tokens", "8192", "--chunk", "1", "--backend", "cuda")
    assert r.code == 2 and "use a larger --chunk" in r.err and "CUDA call counts as" in r.err, r.err
    assert time.process_time() - t0 < 1.0
    r = run_main("estimate", "llama-3.1-8b-instruct", "--tokens", "8192", "--chunk", "1", "--backend", "cpu")
    assert r.code == 0, r.err  # the same request on the CPU model is cheap, and answered


def test_fit_search_past_the_context_is_bounded_and_says_so(monkeypatch, workdir):
    """The headline is searched within the context; "memory alone would allow N" past it within
    ``PAST_CONTEXT_CALLS`` of replay work, and "at least" / "not searched" when cut (was: a search to 4 x the
    context, 54 s of CPU for gemma-3-27b on CUDA, or the replay budget's refusal for a sharded CUDA fit)."""
    from omlx_profiles.estimate import fit as fit_module

    monkeypatch.setattr(fit_module, "PAST_CONTEXT_CALLS", 1)
    r = run_main("fit", MODEL, "--budget", "200GB", "--backend", "cuda", "--json", seconds=30)
    fit = json.loads(r.out)
    assert r.code == 0 and fit["max_tokens"] == 40960 and fit["memory_max_tokens_exact"] is False, r.err
    assert fit["memory_max_tokens"] >= 40960
    r = run_main("fit", MODEL, "--budget", "200GB", "--backend", "cuda", "--ranks", "2", "--parallel", "tensor",
                 seconds=30)
    assert r.code == 0 and "40,960 tokens (the model's max_context; how far memory alone would go was not " \
        "searched" in r.out, r.out


def test_gemma_cuda_fit_answers_within_seconds(workdir):
    """The lead's case: 13.0 s of CPU in session 9, 54 s on main before this pass; now ~4.5 s."""
    import time

    t0 = time.process_time()
    r = run_main("fit", "gemma-3-27b-it", "--budget", "192GiB", "--backend", "cuda", "--json", seconds=60)
    cpu = time.process_time() - t0
    fit = json.loads(r.out)
    assert r.code == 0 and fit["max_tokens"] == fit["max_context"] == 131072, r.err
    assert cpu < 8.0, f"{cpu:.1f} s of CPU"


def test_an_outer_profiling_timer_keeps_its_end():
    """A harness's own CPU limit (ITIMER_PROF, as tests/hostile/sweep_fourth.run sets) still fires inside a
    command's deadline, with its own handler, and is re-armed after it."""
    import signal

    from omlx_profiles.kv.work import deadline

    class Outer(BaseException):
        pass

    def on_prof(signum, frame):
        raise Outer()

    old = signal.signal(signal.SIGPROF, on_prof)
    try:
        signal.setitimer(signal.ITIMER_PROF, 0.2)
        with pytest.raises(Outer):
            with deadline(10.0):
                _busy(2.0)
        signal.setitimer(signal.ITIMER_PROF, 0.3)
        with deadline(10.0):
            _busy(0.05)
        assert 0 < signal.getitimer(signal.ITIMER_PROF)[0] <= 0.3  # re-armed with what was left
        with pytest.raises(Outer):
            _busy(2.0)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


# --------------------------------------------------------------------------------------------------
# Sixth generated pass (tests/hostile/sweep_sixth.py): numbers an engine passes without thinking (numpy
# scalars, int subclasses, IntEnum, Decimal), CUDA odd chunks, config.json number spellings, the new
# OMLX_PROFILES_CPU_SECONDS. Mechanism found missing: a checked count is the value used (check_count's
# return: Request, KVQuant, kv_report, Estimator, budget, the facade), np.uint8 overflowed in the arithmetic
# --------------------------------------------------------------------------------------------------
def test_numeric_spellings_answer_as_the_plain_int_or_are_typed():
    """A seeded sample of the sweep's numeric group: ``Request(np.uint8(255))`` raised numpy's OverflowError
    (``Python integer 2048 out of bounds for uint8``) from the chunk arithmetic; ``prepare(np.uint8(255))``
    answered False where 255 answers True."""
    from tests.hostile import sweep_sixth

    calls = sweep_sixth.numeric_calls()
    sample = [c for c in calls if "np.uint8" in c[0]] + random.Random(6).sample(calls, 30)
    bad = [f"{label}: {b}" for label, fn, ref in sample for b in sweep_sixth.numeric_problems(label, fn, ref)]
    assert not bad, bad


@pytest.mark.parametrize("value", ["", " ", "-1", "nan", "inf", "1e999", "0x10", "\u0661", "3.5", "0", "\x1b[2J"])
def test_cpu_seconds_variable_is_read_or_refused(value, monkeypatch, workdir):
    monkeypatch.setenv("OMLX_PROFILES_CPU_SECONDS", value)
    r = run_main("estimate", MODEL, "--tokens", "1k")
    assert r.code in (0, 2) and "internal error" not in r.err and "\x1b" not in r.err, r.err
    if r.code == 2:
        assert "OMLX_PROFILES_CPU_SECONDS" in r.err, r.err
