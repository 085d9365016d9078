#!/usr/bin/env bash
# Device run: one-op graphs (MLX_MAX_OPS_PER_BUFFER=1) at 32k for the models whose default peaks exceed the
# graph cap, to check their per-op bytes at long kL. Writes to $OUT.
set -u
cd "$(dirname "$0")/../.."
MLX_MAX_OPS_PER_BUFFER=1 timeout 400 python3 benchmarks/cuda/measure_peaks.py --tag e_ops1_long \
  --models deepseek-v2-lite@32768,gpt-oss-20b@32768,gemma-3-4b-it@32768 --repeats 1 --deadline 380 \
  --out "$OUT" > "$OUT/log_e_ops1_long.txt" 2>&1
tail -n 8 "$OUT/log_e_ops1_long.txt"
