#!/usr/bin/env bash
# Device run (session 3): Nemotron-H at prefill steps the Mamba2 model was not built on (predictions committed first:
# results/nemotron_steps_predictions_before_run.json).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 330 python3 benchmarks/cuda/probe_commits.py --tag nemotron_steps --warmup 64 --deadline 300 \
  --models nemotron-h-56b-base-8k@8193:4096:1:64,nemotron-h-56b-base-8k@8192+16384:1024:1 \
  --out "$OUT" > "$OUT/log_nemotron_steps.txt" 2>&1
cut -c1-220 "$OUT/log_nemotron_steps.txt" | grep -v "^Device" | tail -8
