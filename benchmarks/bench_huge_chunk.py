"""CPU seconds of a request with a huge prefill chunk through the Python API, the oMLX facade and the CLI (issue 18:
every command finishes or refuses within seconds). A chunk past the prompt keys its tables at a smaller chunk that
makes the same calls (``peak.request.table_chunk``); past a cap no table is built (``MAX_TABLE_CHUNK``).

    PYTHONPATH=. python benchmarks/bench_huge_chunk.py [--models a,b] [--backends cpu,metal,cuda] [--chunk N]

One line per case: model backend path new cached chunk CPU-seconds answer. Each case in a fresh ``Estimator`` /
``MemoryMonitor`` (cold tables: the worst case an engine's first request pays)."""
from __future__ import annotations

import argparse
import contextlib
import io
import time

from omlx_profiles import Estimator, default_registry
from omlx_profiles.cli.main import main as cli_main
from omlx_profiles.compat.monitor import MemoryMonitor
from omlx_profiles.peak.request import Request

CASES = ((3000, 0), (3000, 1000), (200_000, 100_000))


def run(model: str, backend: str, path: str, new: int, cached: int, chunk: int):
    prof = default_registry().resolve(model).profile
    req = Request(cached + new, cached=cached, chunk=chunk)
    if path == "api":
        bd = Estimator(prof).prefill_peak(req, backend=backend)
        return bd.held_before_bytes + bd.peak_bytes
    if path == "fits":
        return Estimator(prof).fits(req, 1 << 40, backend=backend).fits
    if path == "facade":
        m = MemoryMonitor(None, eviction_enabled=False, backend=backend, mlx_version="0.32.4")
        m.set_profile(prof)
        return int(m.estimate_prefill_peak_bytes(new, chunk, cached_tokens=cached))
    argv = ["estimate", model, "--tokens", str(cached + new), "--chunk", str(chunk), "--backend", backend]
    if cached:
        argv += ["--cached", str(cached)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(argv)
    return f"exit {rc} {err.getvalue().strip()[:160]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="qwen3-8b,qwen3.5-9b,deepseek-v2-lite,gpt-oss-20b,llama-4-scout-17b-16e")
    ap.add_argument("--backends", default="cpu,metal,cuda")
    ap.add_argument("--paths", default="api,fits,facade,cli")
    ap.add_argument("--chunk", type=int, default=1 << 30)
    a = ap.parse_args()
    for model in a.models.split(","):
        for backend in a.backends.split(","):
            for path in a.paths.split(","):
                for new, cached in CASES:
                    t = time.process_time()
                    try:
                        ans = run(model, backend, path, new, cached, a.chunk)
                    except Exception as e:  # noqa: BLE001 -- a benchmark reports what it got
                        ans = f"{type(e).__name__}: {str(e)[:160]}"
                    print(f"{model} {backend} {path} {new} {cached} {a.chunk} {time.process_time() - t:.2f} {ans}",
                          flush=True)


if __name__ == "__main__":
    main()
