#!/usr/bin/env bash
# Device run (session 3): element meter (chains of identical blocks, node rule lifted: launches count what
# the kernels read) and traced prefill with each graph's node count (cuGraphInstantiate / ExecUpdate).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
MLX_MAX_OPS_PER_BUFFER=100000 LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 150 python3 benchmarks/cuda/probe_commits.py --meter \
  --tag meter --out "$OUT" > "$OUT/log_meter.txt" 2>&1
cut -c1-300 "$OUT/log_meter.txt" | tail -14
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 240 python3 benchmarks/cuda/probe_commits.py --tag trace2 --deadline 220 --out "$OUT" \
  --models gpt-oss-20b@8192:2048:2,gemma-3-27b-it@8192:2048:1,gemma-3-4b-it@8192:2048:1,llama-3.1-8b@8192:2048:2 \
  > "$OUT/log_trace2.txt" 2>&1
cut -c1-300 "$OUT/log_trace2.txt" | tail -8
