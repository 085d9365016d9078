"""Per-graph replay vs traced launches. usage: diag.py TRACE MODEL TOKENS STEP REPEAT CHUNK [rank]"""
import json, sys
from pathlib import Path
sys.path.insert(0, "tests")
from omlx_profiles.estimate.calibration import profile_for_config
from omlx_profiles.peak.prefill import Request, call_items
from omlx_profiles.peak.executor import graph_ends, split_ops, _Live
from omlx_profiles.peak.kernels import KernelRoutes
R = Path("benchmarks/cuda/results")
CAP = KernelRoutes.for_backend("cuda", "0.32.4").executor.graph_commit
MiB = 2**20

def prof(model, rank=None):
    cfg = json.loads((R.parent / "configs" / f"{model}.json").read_text())
    p = profile_for_config(cfg, "bf16")
    if rank is not None:
        from omlx_profiles.sharding import ShardSpec, rank_profiles
        p = rank_profiles(p, ShardSpec(2, "tensor"))[rank].profile
    return p

def replay(p, tokens, step, ci):
    items = split_ops(call_items(p, Request(tokens, chunk=step), ci, backend="cuda", mlx_version="0.32.4"))
    ends = graph_ends(items, CAP.max_nodes, CAP.max_mega_elements, 2)
    return items, ends

def per_graph(items, ends):
    live = _Live(items, 1, 0)
    starts = [0.0] + ends[:-1]
    out = []
    for g,(a,b) in enumerate(zip(starts, ends)):
        terms = live.terms(a, b)
        out.append((live.upto(b) - live.upto(a), terms))
    return out, live, starts

def main():
    fn, model, tokens, step, rep, ci = sys.argv[1:7]
    rank = int(sys.argv[7]) if len(sys.argv) > 7 and sys.argv[7] != "-v" else None
    tokens, step, rep, ci = int(tokens), int(step), int(rep), int(ci)
    d = json.loads((R / fn).read_text())
    if "points" in d:
        pt = [p for p in d["points"] if p["model"] == model and p["tokens"] == tokens and p["step"] == step and p.get("repeat", 0) == rep][0]
        ch = pt["chunks"][ci]
    else:
        t = [t for t in d["models"][model]["traced"] if t["tokens"] == tokens][rep]
        ch = t["chunks"][ci]
    p = prof(model, rank)
    items, ends = replay(p, tokens, step, ci)
    pg, live, starts = per_graph(items, ends)
    L = ch["launches"]
    print(f"replay {len(ends)} graphs, traced {len(L)}; before {ch['before_over_baseline_mib']} peak {ch['peak_over_baseline_mib']}")
    cum = 0
    for g in range(max(len(L), len(ends))):
        tr = L[g] if g < len(L) else None
        rb = pg[g][0] / MiB if g < len(pg) else 0
        n = tr[2] if tr else 0
        model_at = live.sum(starts[max(0, g - n + 1)], ends[g]) / MiB if (tr and g < len(ends)) else 0
        print(f"g{g:2d} traced mem {tr[1] if tr else '-':>7} infl {n:2d} nodes {tr[3] if tr and len(tr)>3 else '-':>4} | replay graph {rb:7.1f} MiB, at-launch(same infl) {model_at:8.1f}")
    if "-v" in sys.argv:
        for g,(b,terms) in enumerate(pg):
            print(g, {k: round(v/MiB,1) for k,v in terms.items() if v > MiB})
main()

def dump(p, tokens, step, ci, upto=60):
    items, ends = replay(p, tokens, step, ci)
    pos = 0; g = 0
    for it in items[:upto]:
        n = max(1, it.ops)
        el = it.elems if isinstance(it.elems, int) else sum(it.elems)
        nodes = it.nodes if it.nodes >= 0 else it.ops
        print(f"{pos:5.0f} {it.term:22s} bytes {it.bytes/MiB:7.1f} out {(it.out if it.out>=0 else it.bytes)/MiB:6.1f} carry {it.carry/MiB:5.1f}x{it.carry_items} ops {it.ops} nodes {nodes} el {el/2**20:7.1f}Mi")
        pos += n
        while g < len(ends) and ends[g] <= pos:
            print(f"------ graph {g} ends at {ends[g]}"); g += 1
