#!/usr/bin/env bash
# Device run (session 3): does Nemotron-H's prefill peak grow with depth (arrays held across layers) or
# saturate (a window)? The first 8 / 16 / 32 / 64 layers (the first attention layer is the 8th) at real widths ("M-M-M-M*-..."), 8k, step 2048.
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 300 python3 benchmarks/cuda/probe_commits.py --tag nemotron_depth --warmup 64 --deadline 280 \
  --models nemotron-h-56b-base-8k@4097:2048:1:8,nemotron-h-56b-base-8k@4097:2048:1:16,nemotron-h-56b-base-8k@4097:2048:1:32,nemotron-h-56b-base-8k@4097:2048:1:64 \
  --out "$OUT" > "$OUT/log_nemotron_depth.txt" 2>&1
cut -c1-200 "$OUT/log_nemotron_depth.txt" | grep -v "^Device" | tail -12
