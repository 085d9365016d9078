"""What the monotone envelope (peak/envelope.py) costs follow-up requests: reported / exact, for the TOTAL
(weights + the prefix's KV + the prefill peak) and for the prefill transient alone (the peak over the prefix),
API (``Estimator.prefill_peak``) and the oMLX facade (``estimate_prefill_peak_bytes``), cached x new tokens.

Run: ``PYTHONPATH=. python benchmarks/envelope_cost.py [--bits 4]`` (estimates only, no device; ~1-3 min).
``--summary``: per model x backend, the max and median of reported / exact (total with weights, and the peak
alone) over calibration shapes (no prefix, ``k S + 1`` new tokens), lengths inside a block (no prefix) and
follow-ups (prefixes x new tokens) -- session 8's table (benchmarks/notes/session8/s8-mono.md).
"""
from __future__ import annotations

import argparse

from omlx_profiles import Estimator, load_registry
from omlx_profiles.compat import MemoryMonitor
from omlx_profiles.estimate.weights import estimate_weights
from omlx_profiles.peak.prefill import Request, prefill_peak

MODELS = ("llama-3.1-8b", "deepseek-v3", "qwen3.5-35b-a3b")
CACHED = (4000, 4096, 32100, 32768, 100_000)
NEW = (1, 16, 200, 2000)


SUMMARY_MODELS = ("llama-3.1-8b", "gpt-oss-20b", "gemma-3-4b-it", "deepseek-v2-lite", "qwen3.5-35b-a3b")


def summary(a) -> None:
    """Max / median of reported / exact per model x backend and request kind (``--summary``)."""
    reg = load_registry([])
    S = a.chunk
    kinds = {
        "calibration (k S + 1, no prefix)": [(k * S + 1, 0) for k in (1, 2, 4, 8, 16)],
        "inside a block (no prefix)": [(k * S + 1 + r, 0) for k in (0, 1, 4) for r in (1, 15, 100, 700, S // 2, S - 1)],
        "after a prefix": [(n, c) for c in (4000, 4096, 32100) for n in (1, 16, 200, 2000)],
    }
    print("| model | backend | requests | n | total x max | total x median | peak x max | peak x median |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.models.split(","):
        res = reg.resolve(name)
        p = res.profile
        w = estimate_weights(res, bits=a.bits).bytes or 0
        for backend in a.backends.split(","):
            e = Estimator(p)
            for kind, reqs in kinds.items():
                tot, pk = [], []
                for n, c in reqs:
                    r = Request(c + n, cached=c, chunk=S)
                    try:
                        ex = prefill_peak(p, r, backend=backend)
                    except Exception:  # noqa: BLE001 - a peak reported unknown there
                        continue
                    rep = e.prefill_peak(r, backend)
                    te = w + ex.held_before_bytes + ex.peak_bytes
                    tr = w + rep.held_before_bytes + rep.peak_bytes
                    tot.append(tr / te)
                    pk.append(rep.peak_bytes / max(1, ex.peak_bytes))
                if not tot:
                    continue
                tot.sort()
                pk.sort()
                print(f"| {name} | {backend} | {kind} | {len(tot)} | {tot[-1]:.3f} | {tot[len(tot) // 2]:.3f} | "
                      f"{pk[-1]:.2f} | {pk[len(pk) // 2]:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--backends", default="metal,cuda")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--models", default=",".join(SUMMARY_MODELS))
    a = ap.parse_args()
    if a.summary:
        return summary(a)
    reg = load_registry([])
    print("| model | backend | cached | new | exact total | reported total | total x | transient exact | "
          "transient reported | transient x | facade transient x |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in MODELS:
        res = reg.resolve(name)
        p = res.profile
        w = estimate_weights(res, bits=a.bits).bytes or 0
        e = Estimator(p)
        for backend in a.backends.split(","):
            m = MemoryMonitor(None, eviction_enabled=False, backend=backend, max_memory=2**40)
            m.set_profile(p)
            for c in CACHED:
                for n in NEW:
                    r = Request(c + n, cached=c, chunk=a.chunk)
                    ex = prefill_peak(p, r, backend=backend)
                    rep = e.prefill_peak(r, backend)
                    f = m.estimate_prefill_peak_bytes(n, a.chunk, cached_tokens=c)
                    te = w + ex.held_before_bytes + ex.peak_bytes
                    tr = w + rep.held_before_bytes + rep.peak_bytes
                    print(f"| {name} | {backend} | {c} | {n} | {te / 2**30:.2f} GiB | {tr / 2**30:.2f} GiB | "
                          f"{tr / te:.3f} | {ex.peak_bytes / 2**20:.0f} MiB | {rep.peak_bytes / 2**20:.0f} MiB | "
                          f"{rep.peak_bytes / ex.peak_bytes:.2f} | {f / ex.peak_bytes:.2f} |", flush=True)


if __name__ == "__main__":
    main()
