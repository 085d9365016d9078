"""Predictions for s13-cuda's device run(s) (held-out check 3), written BEFORE the run: the estimate (basis
applied, as reported) for every point of the run, from this branch's main. Usage: predict_s13cuda.py OUT.json"""
import json
import sys
import time

from omlx_profiles.errors import UnsupportedError
from omlx_profiles.estimate.calibration import profile_for_config
from omlx_profiles.peak.prefill import Request, prefill_peak

# (model, [(cached, new)], step): the device run's specs (run_s13cuda1.sh)
POINTS = [
    ("llama-3.2-1b-instruct", [(0, 8192), (0, 32768)], 2048), ("llama-3.2-1b-instruct", [(0, 8192), (0, 32768)], 512),
    ("qwen3-0.6b", [(0, 8192), (0, 32768)], 2048), ("qwen3-0.6b", [(0, 32768)], 512),
    ("lfm2.5-vl-1.6b-text", [(0, 8192), (0, 32768), (8192, 900), (32768, 1500)], 2048), ("lfm2.5-vl-1.6b-text", [(0, 8192)], 512),
    ("devstral-small-2-24b-instruct", [(0, 8192), (0, 32768), (32768, 1200)], 2048),
    ("devstral-small-2-24b-instruct", [(0, 32768)], 512),
    ("qwen2.5-72b-16l", [(0, 8192), (0, 32768), (8192, 700), (8192, 1500), (8192, 2047), (32768, 1000), (32768, 3000)], 2048),
    ("qwen2.5-72b-16l", [(0, 8192), (8192, 300)], 512),
    ("qwen3.5-27b-8l", [(8192, 600), (8192, 1300), (8192, 2000)], 2048),
    ("qwen3-next-80b-a3b-8l-64e", [(8192, 200), (8192, 450)], 512),
]


def main(path):
    out = {}
    for name, reqs, step in POINTS:
        p = profile_for_config(json.load(open(f"benchmarks/cuda/configs/{name}.json")), "bf16")
        for c, n in reqs:
            t0 = time.process_time()
            key = f"{name}@{c}/{n}:{step}"
            try:
                bd = prefill_peak(p, Request(c + n, cached=c, chunk=step), backend="cuda", mlx_version="0.32.4",
                                  dtype="bf16")
            except UnsupportedError as e:  # refused with a reason: measured anyway, reported as such
                out[key] = {"refused": str(e)}
                print(key, out[key], flush=True)
                continue
            out[key] = {"est_gib": round(bd.peak_bytes / 2**30, 4), "basis": bd.peak_basis,
                        "band": bd.basis.get("band"), "held_before_gib": round(bd.held_before_bytes / 2**30, 4)}
            print(key, out[key], "cpu %.1fs" % (time.process_time() - t0), flush=True)
    json.dump(out, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
