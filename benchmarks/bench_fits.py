"""``Estimator.fits`` per request against the oMLX facade's repeated-length path, in the same run.

An engine calls ``fits`` once per request. The target (#18) is <= 50 us warm for any prompt length:
"warm" = the Estimator has seen the profile once (its per-profile bound is built), not this length.
The baseline is ``compat.MemoryMonitor.estimate_prefill_peak_bytes`` called again with a length it has
already answered (its memoized path), so the ratio does not depend on how busy the machine is.

    .venv/bin/python benchmarks/bench_fits.py [--calls 2000]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

from omlx_profiles import Estimator, default_registry
from omlx_profiles.compat import MemoryMonitor
from omlx_profiles.peak.prefill import Request

MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "google/gemma-3-27b-it", "Qwen/Qwen3-30B-A3B")
BUDGET, WEIGHTS = 64 << 30, 16 << 30


def per_call(fn, args_list) -> float:
    t = time.perf_counter()
    for a in args_list:
        fn(a)
    return (time.perf_counter() - t) / len(args_list)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    rng = random.Random(0)
    print(f"{'model':36} {'fits new lengths':>17} {'fits same length':>17} {'facade repeated':>16} {'new/fac':>8} "
          f"{'same/fac':>8} {'replays':>8}")
    for mid in MODELS:
        p = default_registry().resolve(mid).profile
        e = Estimator(p)
        e.fits(Request(1000), BUDGET, weights_bytes=WEIGHTS, backend="metal")  # per-profile precompute
        lengths = [rng.randint(1, 131072) for _ in range(a.calls)]  # mostly lengths never seen before
        new = per_call(lambda n: e.fits(Request(n), BUDGET, weights_bytes=WEIGHTS, backend="metal"), lengths)
        e.fits(Request(32768), BUDGET, weights_bytes=WEIGHTS, backend="metal")  # this length seen once
        same = per_call(lambda n: e.fits(Request(n), BUDGET, weights_bytes=WEIGHTS, backend="metal"), [32768] * a.calls)
        mon = MemoryMonitor(BUDGET, backend="metal")
        mon.set_profile(p)
        mon.estimate_prefill_peak_bytes(32767, 2048)
        base = per_call(lambda n: mon.estimate_prefill_peak_bytes(n, 2048), [32767] * a.calls)
        replays = len(e._memo)  # requests whose budget fell between the bounds: replayed (memoized)
        print(f"{mid:36} {new * 1e6:14.1f} us {same * 1e6:14.1f} us {base * 1e6:13.1f} us {new / base:8.2f} "
              f"{same / base:8.2f} {replays:8d}")
    print("fits: Estimator.fits(Request(n), 64 GiB, weights 16 GiB, metal); ratios against the facade's repeated "
          "length in the same run; replays: lengths decided by the exact replay (between the bounds)")


if __name__ == "__main__":
    main()
