"""How many committed CUDA graphs MLX lets the host run ahead of the GPU, and what ends a graph.

Chains of ops whose outputs cannot be donated (matmuls, dtype casts): every op's output stays allocated
until the graph holding its consumer has completed on the GPU, so the peak over the inputs, divided by
one output's size, is the number of ops whose outputs are live at once. The graph-commit model
(``omlx_profiles.peak.executor.graph_window_max``, profiles/kernels/cuda.yaml ``graph_commit``) predicts
it from the commit rules: a graph ends after the op that takes it past ``max_nodes`` nodes or past
``max_mega_elements`` Mi-elements of kernel inputs, and at most ``max_inflight_graphs`` committed graphs
are in flight while the host encodes the next one.

Run on the device (MLX CUDA); prints one JSON line per case and writes ``$OUT/graphs_<tag>.json``.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import time

import mlx.core as mx


def active() -> int:
    return int(mx.get_active_memory())


def settle() -> None:
    gc.collect()
    mx.synchronize()
    mx.clear_cache()


def timed_peak(build) -> dict:
    """Peak over what was allocated before ``build()`` builds its lazy graph and the graph runs: bytes, the
    host time until ``async_eval`` returns (encoding, plus waits once graphs are in flight) and the wall."""
    settle()
    base = active()
    mx.reset_peak_memory()
    y = build()
    t0 = time.perf_counter()
    mx.async_eval(y)
    t_host = time.perf_counter() - t0
    mx.eval(y)
    wall = time.perf_counter() - t0
    return {"peak": int(mx.get_peak_memory()) - base, "host_s": round(t_host, 4), "wall_s": round(wall, 4)}


def matmul_chain(M: int, K: int, n_ops: int) -> dict:
    """y <- y @ W, n_ops times: outputs (M, K) bf16; kernel inputs per op M*K + K*K elements."""
    W = mx.random.normal((K, K)).astype(mx.bfloat16) * (K ** -0.5)
    x = mx.random.normal((M, K)).astype(mx.bfloat16)
    mx.eval(W, x)
    out = {"case": "matmul", "M": M, "K": K, "n_ops": n_ops, "out_bytes": M * K * 2,
           "elems_per_op": M * K + K * K}

    def build():
        y = x
        for _ in range(n_ops):
            y = y @ W
        return y

    for rep in range(2):
        r = timed_peak(build)
        out[f"rep{rep}"] = {"peak": r["peak"], "live_outputs": round(r["peak"] / out["out_bytes"], 2),
                            "host_s": r["host_s"], "wall_s": r["wall_s"]}
    return out


def cast_chain(N: int, n_ops: int) -> dict:
    """y <- y.astype(fp32 / bf16 alternately): one input of N elements per op, outputs 4N / 2N bytes."""
    x = mx.random.normal((N,)).astype(mx.bfloat16)
    mx.eval(x)
    out = {"case": "cast", "N": N, "n_ops": n_ops, "pair_bytes": 6 * N, "elems_per_op": N}

    def build():
        y = x
        for i in range(n_ops):
            y = y.astype(mx.float32 if i % 2 == 0 else mx.bfloat16)
        return y

    for rep in range(2):
        r = timed_peak(build)
        out[f"rep{rep}"] = {"peak": r["peak"], "live_ops": round(2 * r["peak"] / out["pair_bytes"], 2),
                            "host_s": r["host_s"], "wall_s": r["wall_s"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--tag", default="default")
    ap.add_argument("--quick", action="store_true", help="small shapes (CPU smoke test)")
    args = ap.parse_args()
    env = {k: os.environ.get(k) for k in ("MLX_MAX_OPS_PER_BUFFER", "MLX_MAX_MB_PER_BUFFER")}
    results = {"tag": args.tag, "env": env, "device": str(mx.default_device()), "mlx": mx.__version__, "cases": []}
    if args.quick:
        cases = [("matmul", 256, 256, 50), ("cast", 1 << 20, 10)]
    else:
        cases = [
            ("matmul", 8192, 8192, 160),   # 134M input elements per op: 8 ops per graph by elements
            ("matmul", 2048, 8192, 260),   # 84M: 13 per graph
            ("matmul", 16384, 4096, 260),  # 84M, 128 MiB outputs
            ("matmul", 3072, 2048, 1500),  # 10.5M: 101 per graph (nodes and elements together)
            ("matmul", 512, 1024, 3000),   # tiny: the GPU keeps up with the host?
            ("cast", 1_100_000_000, 40),   # 1.1G elements: one op per graph
            ("cast", 600_000_000, 60),     # two ops per graph
        ]
    run_cases(cases, {"matmul": matmul_chain, "cast": cast_chain}, results, os.path.join(args.out, f"graphs_{args.tag}.json"))


def run_cases(cases: list[tuple], runners: dict, results: dict, path: str) -> None:
    """Run each case (its first field names the runner, the rest are its arguments), print its JSON line,
    and write ``results`` (cases appended) to ``path``."""
    for c in cases:
        t0 = time.time()
        r = runners[c[0]](*c[1:])
        r["case_s"] = round(time.time() - t0, 2)
        results["cases"].append(r)
        print(json.dumps(r), flush=True)
        settle()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
