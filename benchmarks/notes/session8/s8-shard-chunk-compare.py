# s8-shard: per-chunk model (residual adds charged / donated) vs a traced point. usage (repo root, PYTHONPATH=.):
#   python3 s8-shard-chunk-compare.py commits_heldout2.json qwen3-8b 65536 2048
"""per-chunk model total vs traced chunk peak. usage: chunks.py TRACE MODEL TOKENS STEP [REPEAT]"""
import json, sys, dataclasses
from pathlib import Path
from omlx_profiles.estimate.calibration import profile_for_config
from omlx_profiles.peak.prefill import Request
from omlx_profiles.peak import prefill as P
from omlx_profiles.peak.call import call_peak, held_bytes, growth_bytes
from omlx_profiles.peak.replay import EntryState, calls_of, fill_prefix
from omlx_profiles.peak.kernels import KernelRoutes, tiled_state
R = Path("benchmarks/cuda/results"); MiB = 2**20

def routes(res):
    kr = KernelRoutes.for_backend("cuda", "0.32.4")
    t = kr.table
    t2 = t.model_copy(update={"donation": t.donation.model_copy(update={"residual_add": res})})
    return dataclasses.replace(kr, table=t2)

def per_chunk(p, tokens, step, kr, act=2, dt="bf16"):
    _, tiled = tiled_state()
    req = Request(tokens, chunk=step)
    prefix_calls, calls = calls_of(req)
    states = {n: [EntryState(e) for e in lt.entries] for n, lt in p.layer_types.items()}
    counts = {}
    for n in p.layer_names: counts[n] = counts.get(n, 0) + 1
    offset = fill_prefix(states, prefix_calls)
    out = []; q_prev = 0
    for ci, s in enumerate(calls):
        kvb, snap = held_bytes(p, states, counts, act, q_prev, 1.0)
        steps = {n: tuple(st.step(s) for st in sts) for n, sts in states.items()}
        g = growth_bytes(states, steps, counts, act, 1.0)
        cp = call_peak(p, ci, s, offset, steps, kr, tiled, dt, act, False, 600, last=ci == len(calls) - 1,
                       kv_before=kvb, snap_before=snap, growth=g, direct=False)
        out.append((cp.total, kvb, g, cp.window, sum(cp.pinned.values()), cp.window_terms))
        offset += s; q_prev = s
    return out

if __name__ == "__main__":
    fn, model, tokens, step = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    d = json.loads((R / fn).read_text())
    pts = [q for q in d["points"] if q["model"] == model and q["tokens"] == tokens and q["step"] == step]
    cfg = json.loads((R.parent / "configs" / f"{model}.json").read_text())
    p = profile_for_config(cfg, "bf16")
    A = per_chunk(p, tokens, step, routes(False)); B = per_chunk(p, tokens, step, routes(True))
    for ci in range(min(len(A), len(pts[0]["chunks"]))):
        tr = [q["chunks"][ci] for q in pts]
        tp = max(c["peak_over_baseline_mib"] for c in tr)
        bef = tr[0]["before_over_baseline_mib"]
        print(f"c{ci:3d} traced {tp:9.1f} (before {bef:8.1f} infl {max(c['most_in_flight_at_launch'] for c in tr):2d}) | model {A[ci][0]/MiB:9.1f} ({A[ci][0]/MiB/tp:.3f}) donated {B[ci][0]/MiB:9.1f} ({B[ci][0]/MiB/tp:.3f}) kvb {B[ci][1]/MiB:8.1f} growth {B[ci][2]/MiB:6.1f} win {B[ci][3]/MiB:7.1f}")
