#!/usr/bin/env python3
"""How fast the admission path is, in one run, on this machine (no mlx needed).

Rows of the table:

* per-request estimate - the compat facade's ``MemoryMonitor.estimate_prefill_peak_bytes`` (issue 5)
  beside a plain-arithmetic baseline of the *same formula* written the way the seed wrote it (attribute
  reads, ``max``/``min``, a fused-kernel check, a few multiplications): the facade must be no slower
  (ratio <= 1.0). Until the facade exists, ``Estimator.kv_bytes`` (exact rows) is timed beside the seed's
  ``estimate_prompt_kv_bytes`` arithmetic instead, and the facade row says "not built yet".
* registry cold load - ``load_registry()`` of every built-in profile, in a fresh process, measured
  after ``import omlx_profiles`` (median of N processes); target <= 100 ms.
* warm resolve - ``Registry.resolve`` of an id already asked for (what an engine does per request);
  target <= 20 us. A first resolve (no memo) of an exact id and of a quantized repo name are shown too.
* CLI wall time - ``omlx-profiles estimate MODEL --tokens 32k`` as a subprocess, median of N runs
  (interpreter start-up and imports included).

Per-call times are the minimum over repeats of (elapsed / loops) with ``time.perf_counter_ns``; the
estimate and its baseline are interleaved so both see the same machine state.

Usage: ``python benchmarks/bench_estimator.py [--runs N] [--json] [--strict]`` (``make bench``).
``--strict`` exits 1 when a target is missed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
QUANT_REPO = "mlx-community/Llama-3.1-8B-Instruct-4bit"
# (new tokens, cached tokens): short chat turns to long-context prefills, with and without a prefix hit
REQUESTS = [(512, 0), (4096, 0), (32768, 0), (131072, 0), (2048, 30000), (100, 8000)]
CHUNK = 2048


# --------------------------------------------------------------------------------------------------
# The baseline: the seed's arithmetic (oMLX memory_monitor.py), same formula, plain Python.
# --------------------------------------------------------------------------------------------------
class SeedArithmetic:
    """``MemoryMonitor.estimate_prefill_peak_bytes`` as the seed computes it, for one model's dims."""

    _VEC_DIMS = frozenset({64, 96, 128, 256})
    _FULL_DIMS = frozenset({64, 80, 128})

    def __init__(self, num_layers, num_kv_heads, head_dim, num_attention_heads, dtype_size=2, score_size=2):
        self._num_layers = num_layers
        self._num_kv_heads = num_kv_heads
        self._head_dim = head_dim
        self._num_attention_heads = num_attention_heads
        self._num_kv_cache_layers = num_layers
        self._dtype_size = dtype_size
        self._score_dtype_size = score_size

    def estimate_prompt_kv_bytes(self, num_tokens):
        layers = self._num_kv_cache_layers or self._num_layers or 0
        kv_heads = self._num_kv_heads or 0
        dim = self._head_dim or 0
        if not (layers and kv_heads and dim):
            return 0
        return num_tokens * (layers * kv_heads * dim * self._dtype_size * 2)

    def _uses_fused_sdpa(self, q, kv):
        hd = self._head_dim or 0
        n_q = self._num_attention_heads or 0
        n_kv = self._num_kv_heads or n_q
        if n_q <= 0 or n_kv <= 0 or hd <= 0 or q <= 0 or kv < q:
            return False
        if q <= 8:
            return hd in self._VEC_DIMS and q * max(1, n_q // n_kv) <= 32
        return hd in self._FULL_DIMS

    def _sdpa(self, q, kv):
        hd = self._head_dim or 0
        n_q = self._num_attention_heads or 0
        if n_q == 0 or hd == 0 or q <= 0:
            return 0
        out = n_q * q * hd * 4
        if self._uses_fused_sdpa(q, kv):
            return out
        return int(n_q * q * kv * self._score_dtype_size + out)

    def estimate_prefill_peak_bytes(self, new_tokens, chunk_size, *, cached_tokens=0):
        if not (self._head_dim and self._num_attention_heads) or new_tokens <= 0:
            return 0
        eff = min(chunk_size, new_tokens)
        return self._sdpa(eff, new_tokens + max(cached_tokens, 0)) + self.estimate_prompt_kv_bytes(new_tokens)


# --------------------------------------------------------------------------------------------------
def per_call_ns(fn, args_list, *, loops: int, repeats: int) -> float:
    """Minimum over repeats of the mean time of one call (cycling through args_list)."""
    n = len(args_list)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for i in range(loops):
            fn(*args_list[i % n])
        best = min(best, (time.perf_counter_ns() - t0) / loops)
    return best


def interleaved(fa, fb, args_list, *, loops: int, repeats: int) -> tuple[float, float]:
    a = b = float("inf")
    for _ in range(repeats):
        a = min(a, per_call_ns(fa, args_list, loops=loops, repeats=1))
        b = min(b, per_call_ns(fb, args_list, loops=loops, repeats=1))
    return a, b


def child(code: str, runs: int) -> list[float]:
    """Run ``code`` in fresh interpreters; it prints one number (ms)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("OMLX_PROFILES_PATH", None)
    out = []
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
        out.append(float(p.stdout.strip().splitlines()[-1]))
    return out


def cli_wall(argv: list[str], runs: int) -> list[float]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("OMLX_PROFILES_PATH", None)
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "omlx_profiles.cli.main", *argv], capture_output=True, text=True,
                           env=env, cwd=REPO)
        out.append((time.perf_counter() - t0) * 1e3)
        if p.returncode not in (0, 1):
            raise SystemExit(f"CLI failed ({p.returncode}): {p.stderr[-500:]}")
    return out


COLD_LOAD = """
import time
import omlx_profiles
t0 = time.perf_counter()
reg = omlx_profiles.load_registry(include_env=False)
t1 = time.perf_counter()
assert len(reg) > 0
print((t1 - t0) * 1e3)
"""
IMPORT = """
import time
t0 = time.perf_counter()
import omlx_profiles
print((time.perf_counter() - t0) * 1e3)
"""


def fmt_ns(ns: float) -> str:
    return f"{ns / 1e3:.2f} us" if ns >= 1000 else f"{ns:.0f} ns"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="fresh processes for cold load / CLI (median)")
    ap.add_argument("--loops", type=int, default=20_000, help="calls per timing repeat")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()

    import omlx_profiles
    from omlx_profiles import Estimator, load_registry

    reg = load_registry(include_env=False)
    res = reg.resolve(MODEL)
    prof = res.profile
    seed = SeedArithmetic(prof.num_layers, prof.num_kv_heads, prof.head_dim, prof.num_heads)
    rows: list[dict] = []

    # -- per-request estimate: the facade (when built) vs the seed's arithmetic ---------------------
    facade_note = ""
    try:
        from omlx_profiles import compat  # noqa: F401
        MemoryMonitor = compat.MemoryMonitor
    except (ImportError, AttributeError) as e:
        MemoryMonitor = None
        facade_note = f"not built yet ({type(e).__name__})"
    peak_args = [(n, CHUNK, c) for n, c in REQUESTS]
    if MemoryMonitor is not None:
        try:
            mon = MemoryMonitor(max_kv_cache_memory=None, eviction_enabled=False)
        except TypeError:
            mon = MemoryMonitor(None)
        setup = getattr(compat, "set_model_info_from_profile", None)
        if setup is not None:
            setup(mon, prof)
        else:
            mon.set_model_info(num_layers=prof.num_layers, num_kv_heads=prof.num_kv_heads, head_dim=prof.head_dim,
                               num_attention_heads=prof.num_heads, compute_dtype_size=2)
        f = lambda n, ch, c: mon.estimate_prefill_peak_bytes(n, ch, cached_tokens=c)  # noqa: E731
        b = lambda n, ch, c: seed.estimate_prefill_peak_bytes(n, ch, cached_tokens=c)  # noqa: E731
        fa, fb = interleaved(f, b, peak_args, loops=args.loops, repeats=args.repeats)
        rows.append(dict(what="facade estimate_prefill_peak_bytes / call", value=fmt_ns(fa), ns=fa,
                         baseline=fmt_ns(fb), baseline_ns=fb, ratio=fa / fb, target="ratio <= 1.0",
                         ok=fa / fb <= 1.0))
    else:
        rows.append(dict(what="facade estimate_prefill_peak_bytes / call", value="n/a", ns=None,
                         baseline=fmt_ns(per_call_ns(lambda n, ch, c: seed.estimate_prefill_peak_bytes(
                             n, ch, cached_tokens=c), peak_args, loops=args.loops, repeats=args.repeats)),
                         baseline_ns=None, ratio=None, target=f"ratio <= 1.0; facade {facade_note}", ok=None))

    # the peak model itself (what the facade must answer from), when it exists
    try:
        from omlx_profiles.peak.prefill import Request, prefill_peak
    except ImportError:
        prefill_peak = None
    if prefill_peak is not None:
        reqs = [(Request(tokens=n + c, cached=c, chunk=CHUNK),) for n, c in REQUESTS]
        fa, fb = interleaved(lambda r: prefill_peak(prof, r).peak_bytes,
                             lambda r: seed.estimate_prefill_peak_bytes(r.new_tokens, r.chunk, cached_tokens=r.cached),
                             reqs, loops=max(200, args.loops // 100), repeats=max(3, args.repeats // 2))
        rows.append(dict(what="peak.prefill.prefill_peak (full model) / call", value=fmt_ns(fa), ns=fa,
                         baseline=fmt_ns(fb), baseline_ns=fb, ratio=fa / fb,
                         target="(what the facade answers from; precompute per profile)", ok=None))

    est = Estimator(prof)
    kv_args = [(n,) for n, _ in REQUESTS]
    fa, fb = interleaved(lambda n: est.kv_bytes(n), lambda n: seed.estimate_prompt_kv_bytes(n), kv_args,
                         loops=max(1000, args.loops // 10), repeats=args.repeats)
    rows.append(dict(what="Estimator.kv_bytes (exact rows) / call", value=fmt_ns(fa), ns=fa, baseline=fmt_ns(fb),
                     baseline_ns=fb, ratio=fa / fb, target="(interim: the facade row is the target)", ok=None))

    # -- registry -----------------------------------------------------------------------------------
    imp = child(IMPORT, args.runs)
    rows.append(dict(what="import omlx_profiles (fresh process)", value=f"{statistics.median(imp):.1f} ms",
                     ms=statistics.median(imp), target="", ok=None))
    cold = child(COLD_LOAD, args.runs)
    cold_ms = statistics.median(cold)
    rows.append(dict(what=f"registry cold load ({len(reg)} variants, {len(reg.files)} files)",
                     value=f"{cold_ms:.1f} ms", ms=cold_ms, spread=f"{min(cold):.1f}-{max(cold):.1f} ms",
                     target="<= 100 ms", ok=cold_ms <= 100))
    reg.resolve(MODEL)
    warm = per_call_ns(reg.resolve, [(MODEL,), (QUANT_REPO,)], loops=args.loops * 5, repeats=args.repeats)
    rows.append(dict(what="warm resolve (id asked before)", value=fmt_ns(warm), ns=warm, target="<= 20 us",
                     ok=warm <= 20_000))
    first_id = per_call_ns(reg._resolve, [(MODEL,)], loops=args.loops, repeats=args.repeats)
    first_q = per_call_ns(reg._resolve, [(QUANT_REPO,)], loops=args.loops, repeats=args.repeats)
    rows.append(dict(what="first resolve, exact HF id (no memo)", value=fmt_ns(first_id), ns=first_id, target="",
                     ok=None))
    rows.append(dict(what="first resolve, quantized repo name (no memo)", value=fmt_ns(first_q), ns=first_q,
                     target="", ok=None))

    # -- CLI ----------------------------------------------------------------------------------------
    argv = ["estimate", MODEL, "--tokens", "32k"]
    wall = cli_wall(argv, args.runs)
    rows.append(dict(what="CLI: omlx-profiles " + " ".join(argv), value=f"{statistics.median(wall):.0f} ms",
                     ms=statistics.median(wall), spread=f"{min(wall):.0f}-{max(wall):.0f} ms", target="", ok=None))
    wall_v = cli_wall(["--version"], args.runs)
    rows.append(dict(what="CLI: omlx-profiles --version (start-up floor)", value=f"{statistics.median(wall_v):.0f} ms",
                     ms=statistics.median(wall_v), target="", ok=None))

    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("mlx", "mlx_lm", "transformers"))
    machine = {
        "machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "platform": platform.platform(), "processor": platform.processor() or "", "omlx_profiles": omlx_profiles.__version__,
        "mlx_imported": bool(heavy),
    }
    if args.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=2))
    else:
        print(f"machine: {machine['machine']}, {machine['cpus']} CPUs, Python {machine['python']}, "
              f"{machine['platform']}; mlx imported: {'yes' if heavy else 'no'}")
        w = max(len(r["what"]) for r in rows)
        print(f"{'measure':<{w}}  {'value':>14}  {'baseline':>10}  {'ratio':>6}  target")
        for r in rows:
            ratio = f"{r['ratio']:.2f}" if r.get("ratio") is not None else ""
            mark = {True: "ok", False: "MISSED", None: ""}[r.get("ok")]
            print(f"{r['what']:<{w}}  {r['value']:>14}  {r.get('baseline', '') or '':>10}  {ratio:>6}  "
                  f"{r['target']} {mark}".rstrip())
    missed = [r for r in rows if r.get("ok") is False]
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
