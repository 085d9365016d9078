#!/usr/bin/env bash
# Device run (session 3): held-out models, traced, after a 64-token warm-up each (the predictions were
# committed first: results/heldout2_predictions_before_run.json).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 400 python3 benchmarks/cuda/probe_commits.py --tag heldout2 --warmup 64 --deadline 380 \
  --models qwen3-8b@8192+32768+65536:2048:2,llama-3.2-3b-instruct@8192+32768+65536:2048:2,smollm3-3b@8192+32768+65536:2048:2,gemma-2-9b-it@8192+32768+65536:2048:2 \
  --out "$OUT" > "$OUT/log_heldout2.txt" 2>&1
cut -c1-220 "$OUT/log_heldout2.txt" | grep -v "^Device" | tail -30
