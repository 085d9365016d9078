"""Predictions for run s12c1 (this model): est GiB per point, per-chunk exact totals for the after-prefix chunks."""
import json, sys, time
from omlx_profiles.estimate.calibration import profile_for_config
from omlx_profiles.peak.prefill import Request, prefill_peak
def cfg(name, depth=0):
    c = json.load(open(f"benchmarks/cuda/configs/{name}.json"))
    if depth:
        t = c.get("text_config", c); t["num_hidden_layers"] = depth
        for k in ("hybrid_override_pattern", "layer_types"):
            if k in t and t[k]: t[k] = t[k][:depth]
    return c
pts = [("qwen3-next-80b-a3b-8l-64e", 0, 8192, 512), ("qwen3-next-80b-a3b-8l-64e", 0, 8192, 1024),
       ("qwen3-next-80b-a3b-8l-64e", 0, 8192, 4096), ("qwen3-next-80b-a3b-8l-64e", 16, 8192, 2048),
       ("qwen3.5-27b-8l", 0, 8192, 2048), ("qwen3.5-27b", 0, 8192, 2048), ("qwen3.5-27b", 0, 4096, 2048),
       ("qwen3-next-80b-a3b-8l-64e", 0, 32768, 512), ("qwen3.5-27b-8l", 0, 32768, 512)]
out = {}
for name, depth, N, step in pts:
    t0 = time.process_time()
    p = profile_for_config(cfg(name, depth), "bf16")
    bd = prefill_peak(p, Request(N, cached=0, chunk=step), backend="cuda", mlx_version="0.32.4", dtype="bf16", apply_basis=False)
    key = f"{name}{'-%dL' % depth if depth else ''}@{N}:{step}"
    rec = {"est_gib": round(bd.peak_bytes / 2**30, 4), "peak_call": bd.peak_call,
           "terms_mib": {k: round(v / 2**20, 1) for k, v in bd.terms.items()}}
    if N == 32768:  # after a prefix: the estimate of the remaining tokens with cached = c (API request)
        rec["after_prefix"] = {}
        for c in (8192, 16384, 24576):
            b2 = prefill_peak(p, Request(N, cached=c, chunk=step), backend="cuda", mlx_version="0.32.4",
                              dtype="bf16", apply_basis=False)
            rec["after_prefix"][c] = round(b2.peak_bytes / 2**30, 4)
    out[key] = rec
    print(key, rec, "cpu %.1fs" % (time.process_time() - t0), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
