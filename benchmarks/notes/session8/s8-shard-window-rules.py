# s8-shard: window rules tried on every CUDA point and the two-GPU ranks: K ops of the next graph after the
# 11-graph window (race), --res = residual adds donated. usage: python3 s8-shard-window-rules.py K [--res]
"""monkeypatch variants, then run survey + sharded ratios. usage: rule.py K (ops after the window end)"""
import sys, json, dataclasses
import omlx_profiles.peak.executor as E
import omlx_profiles.peak.call as C
K = float(sys.argv[1])
orig = E.graph_window_max
def gwm(items, max_nodes, max_mega_elements, inflight, act):
    if not items: return 0, {}
    items = E.split_ops(items)
    live = E._Live(items, 1, 0)
    ends = E.graph_ends(items, max_nodes, max_mega_elements, act)
    starts = [0.0] + ends[:-1]
    best, bw = -1.0, (0.0, 0.0)
    tot = live.total
    for g, hi in enumerate(ends):
        lo = starts[max(0, g - inflight)]
        hi2 = min(tot, hi + K) if g >= inflight else hi
        v = live.sum(lo, hi2)
        if v > best: best, bw = v, (lo, hi2)
    out = live.terms(*bw)
    return sum(out.values()), out
C.graph_window_max = gwm
from omlx_profiles.peak import kernels as KR
orig_fb = KR.KernelRoutes.for_backend.__func__
def fb(cls, backend, mlx_version=None, directory=None):
    kr = orig_fb(cls, backend, mlx_version, directory)
    if backend == "cuda" and "--res" in sys.argv:
        t = kr.table
        t2 = t.model_copy(update={"donation": t.donation.model_copy(update={"residual_add": True})})
        kr = dataclasses.replace(kr, table=t2)
    return kr
KR.KernelRoutes.for_backend = classmethod(fb)
from omlx_profiles.estimate import basis_survey as S
rows = [r for r in S.survey() if r.backend == "cuda" and r.ratio is not None and not r.cold]
rs = sorted(rows, key=lambda r: r.ratio)
print("points", len(rows), "min", round(rs[0].ratio, 4), "max", round(rs[-1].ratio, 4), "unders", sum(r.ratio < 1 for r in rows))
for r in rs[:8]: print(f"  {r.ratio:.4f} {r.file} {r.model} {r.tokens} s{r.chunk}")
sys.path.insert(0, "tests")
import test_sharded_calibration as T
for p in T.POINTS:
    f, pt = p.values
    est, op = T._estimate(f, pt)
    print(f"  rank {p.id}: {op/pt.peak:.3f}")
for prm in T._contention_runs():
    meta, model, tokens, reps = prm.values
    f, pt = T._idle_point(model, tokens, meta["rank"])
    est = T._estimate(f, pt)[1]
    measured = max(c["peak_over_baseline_mib"] for chunks in reps for c in chunks) * 2**20
    print(f"  loaded {model} {tokens} r{meta['rank']}: {est/measured:.3f}")
