import json
from omlx_profiles.estimate.calibration import profile_for_config
from omlx_profiles.peak.prefill import Request, prefill_peak
out = {}
for name, N, step, cs in [("qwen3-next-80b-a3b-8l-64e", 24576, 512, (8192, 16384)),
                          ("qwen3.5-27b-8l", 16384, 2048, (4096, 8192, 12288)), ("qwen3.5-27b", 4096, 2048, (2048,))]:
    p = profile_for_config(json.load(open(f"benchmarks/cuda/configs/{name}.json")), "bf16")
    r = {"est_gib": round(prefill_peak(p, Request(N, chunk=step), backend="cuda", mlx_version="0.32.4", dtype="bf16", apply_basis=False).peak_bytes / 2**30, 4)}
    r["after_prefix"] = {c: round(prefill_peak(p, Request(N, cached=c, chunk=step), backend="cuda", mlx_version="0.32.4", dtype="bf16").peak_bytes / 2**30, 4) for c in cs}
    out[f"{name}@{N}:{step}"] = r
    print(name, N, step, r, flush=True)
json.dump(out, open("benchmarks/cuda/results/s12cuda2_predictions_before_run.json", "w"), indent=1)
