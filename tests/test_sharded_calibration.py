"""The per-rank estimate against points measured on one rank of a sharded model (calibration files' points
with ``ranks`` / ``rank`` / ``parallel``): two H200s over NCCL, tensor-sharded Llama-3.1-8B and
Qwen3-30B-A3B at 8k / 32k (benchmarks/cuda/measure_sharded.py, predictions committed before the run).

Why apart from tests/test_calibration.py: a rank holds a slice of the model (heads, KV heads and MLP widths
divided by N), so its point is checked against ``sharding.rank_estimate`` for that rank, never against the
whole model's estimate. Truth is the measurement: resident KV per rank must be byte-exact, the reported
peak (plus the collective's output buffer) never under the highest repeat.
"""
from __future__ import annotations

import pytest

from omlx_profiles.estimate.calibration import calibration_files, load_calibration, profile_for_point
from omlx_profiles.peak.prefill import Request, prefill_peak
from omlx_profiles.sharding import ShardedOptions, ShardSpec, rank_profiles, rank_weights
from omlx_profiles.sharding.report import rank_estimate

BAND = (1.00, 1.15)
# the op model's CUDA run-ahead window (graph cap) is a worst case; on one GPU it reaches 2.7x an idle
# GPU's peak (tests/test_calibration.py CUDA_SAFE_CAP); the NCCL ranks measured 1.17-1.81 (see
# benchmarks/cuda/README.md)
SAFE_CAP = 2.75


def _points():
    out = []
    for path in calibration_files():
        f = load_calibration(path)
        for pt in f.sharded_points:
            s = pt.shard
            out.append(pytest.param(f, pt, id=f"{path.stem}:{pt.model}:{s['parallel']}{s['ranks']}:r{s['rank']}:{pt.tokens}"))
    return out


POINTS = _points()


def test_two_gpu_points_are_committed():
    """The NCCL points exist, for a dense and an MoE model, both ranks, 8k and 32k."""
    got = {(pt.model, pt.tokens, pt.shard["rank"]) for p in POINTS for f, pt in [p.values] if f.backend == "cuda"}
    want = {(m, t, r) for m in ("llama-3.1-8b", "qwen3-30b-a3b") for t in (8192, 32768) for r in (0, 1)}
    assert want <= got


def _estimate(f, pt):
    prof = profile_for_point(pt)
    s = pt.shard
    spec = ShardSpec(s["ranks"], s["parallel"], s["split"])
    views = rank_profiles(prof, spec)
    v = views[s["rank"]]
    opts = ShardedOptions(spec, chunk=pt.chunk, backend=f.backend, mlx_version=f.mlx or None, dtype=pt.dtype)
    w = rank_weights(prof, spec, views)[s["rank"]]
    est = rank_estimate(v, opts, pt.tokens, w, prof.hidden_size)
    op = prefill_peak(v.profile, Request(pt.tokens, cached=pt.cached, chunk=pt.chunk), backend=f.backend,
                      mlx_version=f.mlx or None, dtype=pt.dtype, apply_basis=False).peak_bytes
    return est, op + est["comm_bytes"]


@pytest.mark.parametrize("f,pt", POINTS)
def test_rank_kv_exact_and_peak_never_under(f, pt):
    est, op = _estimate(f, pt)
    assert pt.kv_bytes is not None and est["kv_bytes"] == pt.kv_bytes, \
        f"{pt.model} {pt.tokens} rank {pt.shard['rank']}: KV {est['kv_bytes']} vs measured {pt.kv_bytes}"
    shown = est["peak_bytes"] + est["comm_bytes"]
    assert shown >= pt.peak, f"{pt.model} {pt.tokens} rank {pt.shard['rank']}: reported {shown} under {pt.peak}"
    assert BAND[0] <= op / pt.peak <= SAFE_CAP, f"{pt.model} {pt.tokens} rank {pt.shard['rank']}: {op / pt.peak:.3f}"


def _loaded_peaks() -> dict[tuple[str, int, int], int]:
    """The traced peaks of the session-6 runs with a ``gpu_hog.py`` on both GPUs (``twogpu_s6hog_rank*.json``),
    per (model, tokens, rank): the highest repeat, MiB to 0.1 (+0.05 MiB: the rounding, on the measured side)."""
    import json
    from pathlib import Path

    res = Path(__file__).resolve().parents[1] / "benchmarks" / "cuda" / "results"
    out: dict[tuple[str, int, int], int] = {}
    for f in sorted(res.glob("twogpu_s6hog_rank*.json")):
        d = json.loads(f.read_text())
        for name, rec in d["models"].items():
            for t in rec["traced"]:
                key = (name, t["tokens"], d["meta"]["rank"])
                peak = int((max(c["peak_over_baseline_mib"] for c in t["chunks"]) + 0.05) * 2**20)
                out[key] = max(out.get(key, 0), peak)
    return out


def _highest_measured(pt) -> int:
    """A rank shape's highest measured peak over every stored two-GPU run of it: the idle points of every
    calibration file (sessions 4 and 6) and the runs with both GPUs loaded. How far the host runs ahead of a GPU
    is timing (an idle GPU keeps up: 2-9 graphs in flight on the Llama ranks), so the band is held against the
    most a run of that shape has needed, as for one GPU's contention points; never-under holds for every run."""
    s = pt.shard
    key = (pt.model, pt.tokens, s["rank"])
    peaks = [q.peak for p in POINTS for _, q in [p.values]
             if (q.model, q.tokens, q.shard["rank"], q.shard["ranks"], q.shard["parallel"]) ==
             (pt.model, pt.tokens, s["rank"], s["ranks"], s["parallel"])]
    return max(peaks + [_loaded_peaks().get(key, 0)])


# rank shapes still outside the band of their highest measured peak, and why
OUT_OF_BAND: dict[str, str] = {}
# (empty since session 10: the Llama-3.1-8B ranks were 1.26 / 1.24 while CUDA charged their donated residual adds
# as a bound against graph placement; a rank's 2048-token chunk commits 9-10 graphs, all inside the graph window,
# so placement cannot move a byte and the margin is dropped there: donation.residual_add_whole_call)


def _band_points():
    out = []
    for p in POINTS:
        f, pt = p.values
        why = OUT_OF_BAND.get(pt.model)
        # strict: the points are committed data, so a change that brings one into the band must say so here
        out.append(pytest.param(f, pt, id=p.id, marks=[pytest.mark.xfail(reason=why, strict=True)] if why else []))
    return out


@pytest.mark.parametrize("f,pt", _band_points())
def test_rank_points_within_band(f, pt):
    """Every two-GPU rank shape in [1.00, 1.15] of its highest measured peak (every stored run of the shape:
    the idle points of sessions 4 and 6, the session-6 runs with both GPUs loaded). Llama-3.1-8B's ranks: in band
    once the residual adds are charged as measured (0 bytes) where the rank's chunk commits no more graphs than the
    window holds (1.07 / 1.11; 1.26 / 1.24 with them charged). Qwen3-30B-A3B's ranks: in
    band once the MoE items carry the kernels the trace shows (two multi-block argsorts, the flatten copy,
    three-node grouped gather_mm, the all_sums), so the rank's graphs end on nodes where the trace's do."""
    est, op = _estimate(f, pt)
    hi = _highest_measured(pt)
    r = op / hi
    assert BAND[0] <= r <= BAND[1], f"{pt.model} {pt.tokens} rank {pt.shard['rank']}: {r:.3f}"
    # what the rank's column reports (the monotone envelope, Estimator.prefill_peak, + the collective's buffer)
    shown = (est["peak_bytes"] + est["comm_bytes"]) / hi
    top = REPORTED_ABOVE_BAND.get(pt.model, (BAND[1], ""))[0]
    assert BAND[0] <= shown <= top, f"{pt.model} {pt.tokens} rank {pt.shard['rank']}: reported {shown:.3f}"


# Rank shapes whose REPORTED column (not the op model, which is in band above) sits above the band, the ceiling it is
# held to, and why. Session 13: the CUDA envelope without a prefix carries UF(kS) across blocks (peak/envelope.py
# ``CudaEnvelope.full_upper``: monotone by construction; before, the report fell up to 7.6% from one block to a later
# one). UF comes from ``carry_cells``' coarse cells: on llama-3.1-8b it is 1.025 / 1.027 / 1.092 of the exact replay at
# 8k / 32k at chunk 2048 / 8k at chunk 512 (main 02fb675: 1.003 / 1.000 / 1.000), so these ranks' columns read
# 1.224 / 1.232 of their highest measured peak (1.11-1.12 before). Never under; tighter cells are the open lever.
REPORTED_ABOVE_BAND: dict[str, tuple[float, str]] = {
    "llama-3.1-8b": (1.25, "the CUDA carry's coarse cells (session 13): reported 1.224 / 1.232, op model in band"),
}


@pytest.mark.parametrize("f,pt", POINTS)
def test_rank_weights_never_under(f, pt):
    """Without safetensors headers a rank's weights are the whole model's split by parameter share; the
    tensors ``shard()`` leaves whole on every rank (norms, router) must not be averaged away (they were:
    Qwen3-30B-A3B ranks 12.8 MB under the measured parameters)."""
    from omlx_profiles.estimate.weights import estimate_weights

    prof = profile_for_point(pt)
    s = pt.shard
    spec = ShardSpec(s["ranks"], s["parallel"], s["split"])
    from omlx_profiles import load_registry

    # the run's random bf16 weights at the registry checkpoint's parameter count
    whole = estimate_weights(load_registry().resolve(pt.raw["hf_id"]), bits=16)
    w = rank_weights(prof, spec, rank_profiles(prof, spec), whole=whole)[s["rank"]]
    measured = pt.raw["weights_bytes"]
    assert measured and w.bytes is not None
    assert w.bytes >= measured, f"{pt.model} rank {s['rank']}: {w.bytes} under {measured}"
    assert w.bytes <= measured * 1.02


def _contention_runs():
    """Session 6: Llama-3.1-8B's ranks traced while a ``gpu_hog.py`` loaded each GPU (run_s6_twogpu.sh), two
    repeats per length: (meta, model, tokens, repeats' traced chunks)."""
    import json
    from pathlib import Path

    res = Path(__file__).resolve().parents[1] / "benchmarks" / "cuda" / "results"
    out = []
    for f in sorted(res.glob("twogpu_s6hog_rank*.json")):
        d = json.loads(f.read_text())
        for name, rec in d["models"].items():
            by_len: dict[int, list] = {}
            for t in rec["traced"]:
                by_len.setdefault(t["tokens"], []).append(t["chunks"])
            for tokens, reps in sorted(by_len.items()):
                out.append(pytest.param(d["meta"], name, tokens, reps, id=f"{name}:r{d['meta']['rank']}:{tokens}"))
    return out


def _idle_point(model, tokens, rank):
    for p in POINTS:
        f, pt = p.values
        if "sharded-s6" in str(f.path) and (pt.model, pt.tokens, pt.shard["rank"]) == (model, tokens, rank):
            return f, pt
    raise LookupError((model, tokens, rank))


CONTENTION = (1.00, 1.40)


@pytest.mark.parametrize("meta,model,tokens,reps", _contention_runs())
def test_llama_ranks_under_gpu_contention(meta, model, tokens, reps):
    """With both GPUs slowed the host gets further ahead (8-10 graphs in flight in the higher repeat) and a
    rank's peak rises toward the estimate: never under it, within ``CONTENTION``, and closer than the same
    point measured idle (the timing part of the idle over-estimate). Highest repeat, as the calibration
    points; the traced chunks' peaks are MiB to 0.1 (rounding added to the measurement)."""
    assert len(_contention_runs()) == 4
    f, pt = _idle_point(model, tokens, meta["rank"])
    est = _estimate(f, pt)[1]
    measured = max(c["peak_over_baseline_mib"] for chunks in reps for c in chunks) * 2**20
    assert max(c["most_in_flight_at_launch"] for chunks in reps for c in chunks) >= 9
    r = est / (measured + 0.05 * 2**20)
    assert CONTENTION[0] <= r <= CONTENTION[1], f"{model} {tokens} rank {meta['rank']}: {r:.3f}"
    assert r < est / pt.peak, f"idle {est / pt.peak:.3f} vs contended {r:.3f}"
