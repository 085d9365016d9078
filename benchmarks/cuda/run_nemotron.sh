#!/usr/bin/env bash
# Device run (session 3): Nemotron-H-56B (Mamba2 hybrid, real dims, 112 GB of bf16 weights) traced after a 64-token
# warm-up; predictions committed first (results/nemotron_predictions_before_run.json).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 420 python3 benchmarks/cuda/probe_commits.py --tag nemotron --warmup 64 --deadline 380 \
  --models nemotron-h-56b-base-8k@8192+32768:2048:2 --out "$OUT" > "$OUT/log_nemotron.txt" 2>&1
cut -c1-300 "$OUT/log_nemotron.txt" | grep -v "^Device" | tail -8
