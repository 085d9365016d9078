"""Every CPU point the op model's band is held to, measured once and stored, so an op-model change is checked in
seconds (s13-band): the two-rank ring ranks (tests/test_sharded_live.py), test_peak_live's 8 architectures
(phases 0-9 or the test's own), and the CPU calibration points (their stored ``peak_over_baseline_max``).

    python benchmarks/cpu_replay/band_points.py measure-live [--phases 0,1,...] [ARCH ...]
    python benchmarks/cpu_replay/band_points.py measure-ring [--launches N]
    python benchmarks/cpu_replay/band_points.py eval          # est / measured of every point, today's op model

Measurements go to benchmarks/cpu_replay/band_measured.json (merged: a re-measure keeps the max per call).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, ".")
sys.path.insert(0, "tests")
STORE = Path("benchmarks/cpu_replay/band_measured.json")


def _load() -> dict:
    return json.loads(STORE.read_text()) if STORE.exists() else {"live": {}, "ring": {}}


def _save(d: dict) -> None:
    STORE.write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")


def measure_live(archs: list[str], phases: list[int] | None) -> None:
    import gc

    import test_peak_live as T
    from omlx_profiles.live.build import build_model
    from omlx_profiles.live.measure import measure_prefill_peak

    d = _load()
    for arch in archs or list(T.ARCHS):
        dtype, cfg = T.ARCHS[arch]
        model = build_model(cfg, dtype, allow_fp32_promotion=False)
        measure_prefill_peak(model, T.CHUNK + 1, T.CHUNK, phase=0)
        n = T.KS[-1] * T.CHUNK + 1
        rec = d["live"].setdefault(arch, {})
        for ph in phases if phases is not None else T.PHASES_FOR.get(arch, T.PHASES):
            r = measure_prefill_peak(model, n, T.CHUNK, phase=ph)
            rec[str(ph)] = [row["peak_over_baseline"] for row in r["rows"]]
            print(arch, ph, max(rec[str(ph)]), flush=True)
            _save(d)
        del model
        gc.collect()


def measure_ring(launches: int) -> None:
    import test_sharded_live as T
    from omlx_profiles.live.build import build_model, save_local
    from omlx_profiles.live.sharded import launch_ring

    d = _load()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        dirs = {}
        for name, (dtype, cfg) in T.MODELS.items():
            m = build_model(cfg, dtype, allow_fp32_promotion=False)
            dirs[name] = str(save_local(m, cfg, tmp / name))
            del m
        spec = {"cases": [{"name": c, "path": dirs[m], "parallel": par, "split": list(sp) if sp else None,
                           "tokens": T.TOKENS, "chunk": T.CHUNK, "repeats": 1} for c, m, par, sp in T.CASES]}
        (tmp / "spec.json").write_text(json.dumps(spec))
        for i in range(launches):
            got = launch_ring(tmp / "spec.json", tmp, timeout_s=600)
            for rank, cases in got.items():
                for case, x in cases.items():
                    key = f"{case}/{rank}"
                    d["ring"][key] = max(d["ring"].get(key, 0), x["peak_over_baseline"])
            _save(d)
            print("launch", i, "done", flush=True)


def rows() -> list[tuple[str, int, int]]:
    """(point, op-model estimate, measured) of every stored point and every CPU calibration point."""
    import mlx.core as mx

    import test_peak_live as TL
    import test_sharded_live as TS
    from omlx_profiles.estimate.basis_survey import survey
    from omlx_profiles.estimate.calibration import profile_for_config
    from omlx_profiles.peak.prefill import Request, prefill_peak
    from omlx_profiles.sharding import ShardedOptions, ShardSpec, rank_profiles, rank_weights
    from omlx_profiles.sharding.report import rank_estimate

    d = _load()
    out = []
    for arch, phases in sorted(d["live"].items()):
        dtype, cfg = TL.ARCHS[arch]
        prof = profile_for_config(cfg, dtype)
        calls = None
        for v in phases.values():
            calls = v if calls is None else [max(a, b) for a, b in zip(calls, v)]
        for k in TL.KS:
            t = k * TL.CHUNK + 1
            est = prefill_peak(prof, Request(t, chunk=TL.CHUNK), backend="cpu", mlx_version=mx.__version__,
                               dtype=dtype, all_calls=True, apply_basis=False).peak_bytes
            out.append((f"live {arch} {t}", est, max(calls[:k])))
    for case, model, par, split in TS.CASES:
        dtype, cfg = TS.MODELS[model]
        prof = profile_for_config(cfg, dtype)
        spec = ShardSpec(2, par, split)
        opts = ShardedOptions(spec, chunk=TS.CHUNK, backend="cpu", mlx_version=mx.__version__, dtype=dtype)
        views = rank_profiles(prof, spec)
        for v, w in zip(views, rank_weights(prof, spec, views)):
            meas = d["ring"].get(f"{case}/{v.rank}")
            if meas is None:
                continue
            est = rank_estimate(v, opts, TS.TOKENS, w, prof.hidden_size)
            op = prefill_peak(v.profile, Request(TS.TOKENS, chunk=TS.CHUNK), backend="cpu",
                              mlx_version=mx.__version__, dtype=dtype, apply_basis=False).peak_bytes
            tag = " (bound)" if est["breakdown"]["peak_basis"] == "bound" else ""
            out.append((f"ring {case} r{v.rank}{tag}", op + est["comm_bytes"], meas))
    for r in survey():
        if r.backend == "cpu" and r.op_model is not None:
            out.append((f"cal {r.model} {r.tokens}", r.op_model, r.measured))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["measure-live", "measure-ring", "eval"])
    ap.add_argument("archs", nargs="*")
    ap.add_argument("--phases", default=None)
    ap.add_argument("--launches", type=int, default=1)
    a = ap.parse_args()
    if a.cmd == "measure-live":
        measure_live(a.archs, [int(x) for x in a.phases.split(",")] if a.phases else None)
    elif a.cmd == "measure-ring":
        measure_ring(a.launches)
    else:
        for name, est, meas in rows():
            q = est / meas
            flag = "UNDER" if q < 1 else ("over" if q > 1.15 else "")
            print(f"{name:45s} {est:12d} {meas:12d} {q:7.3f} {flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
