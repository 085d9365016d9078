#!/usr/bin/env python3
"""The estimator's per-rank numbers for the two-GPU tensor-sharded points, written BEFORE the device run.

``python benchmarks/cuda/predict_sharded.py > benchmarks/cuda/results/twogpu_predictions_before_run.json``

Why a file: the points are a check of the estimator, so what it said has to be on record (committed) before
anything was measured. Per rank it keeps what ``omlx-profiles estimate --config C --tokens T --chunk 2048
--dtype bf16 --backend cuda --mlx-version 0.32.4 --ranks 2 --parallel tensor --json`` prints: resident KV,
the prefill peak over what the rank holds (with the peak basis applied, as users see it), the op model alone
(``apply_basis=False``, what the calibration tests compare), and the collective's output buffer; the measured
peak over the rank's weights is compared with ``peak_bytes + comm_bytes``.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = ["llama-3.1-8b", "qwen3-30b-a3b"]
TOKENS = [8192, 32768]


def main() -> int:
    points = []
    for m in MODELS:
        for t in TOKENS:
            cmd = [sys.executable, "-m", "omlx_profiles.cli.main", "estimate", "--config", f"benchmarks/cuda/configs/{m}.json",
                   "--tokens", str(t), "--chunk", "2048", "--dtype", "bf16", "--backend", "cuda",
                   "--mlx-version", "0.32.4", "--ranks", "2", "--parallel", "tensor", "--json"]
            d = json.loads(subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True).stdout)
            for r in d["per_rank"]:
                points.append({"model": m, "tokens": t, "chunk": 2048, "rank": r["rank"], "ranks": 2,
                               "parallel": "tensor", "kv_bytes": r["kv_bytes"], "peak_bytes": r["peak_bytes"],
                               "comm_bytes": r["comm_bytes"], "peak_plus_comm": r["peak_bytes"] + r["comm_bytes"],
                               "peak_basis": r["breakdown"]["peak_basis"], "weights_bytes": r["weights_bytes"]})
    json.dump({"command": "omlx-profiles estimate --config benchmarks/cuda/configs/<model>.json --tokens <T> --chunk 2048 "
                          "--dtype bf16 --backend cuda --mlx-version 0.32.4 --ranks 2 --parallel tensor --json",
               "points": points}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
