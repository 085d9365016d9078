"""Which stalled points are still above 1.15 of the estimate (the predictions file's est): prints their specs for
the second, stalled + gpu_hog pass of run_s8mla.sh (one spec per line: name@tokens:step:1:0:layer_ms)."""
import json
import sys
from pathlib import Path

res, pred = Path(sys.argv[1]), Path(sys.argv[2])
est = json.loads(pred.read_text())["points"]
best = {}
for p in json.loads(res.read_text()).get("points", []):
    k = f"{p['model']}@{p['tokens']}:{p['step']}"
    best[k] = max(best.get(k, 0.0), p["peak_over_baseline_mib"])
    ms = (p.get("stall") or {}).get("layer_ms", 10)
    best.setdefault("_ms", {})[k] = ms
for k, e in est.items():
    if k in best and e["est_mib"] / best[k] > 1.15:
        print(f"{k}:1:0:{best['_ms'][k]:g}")
    elif k not in best:
        print(f"# not measured: {k}", file=sys.stderr)
