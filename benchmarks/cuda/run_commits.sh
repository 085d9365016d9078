#!/usr/bin/env bash
# Device run (session 3): single-op donation checks, then prefill chunks with every CUDA graph launch and GPU
# completion traced (commit_trace.so, LD_PRELOADed; carried prebuilt in .trace/, or built here if gcc exists).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
timeout 60 python3 benchmarks/cuda/probe_commits.py --donation --tag donation --out "$OUT" > "$OUT/log_donation.txt" 2>&1
tail -8 "$OUT/log_donation.txt"
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 420 python3 benchmarks/cuda/probe_commits.py --tag trace --deadline 400 --out "$OUT" \
  --models gpt-oss-20b@8192:2048:2,deepseek-v2-lite@8192:4096:2,gemma-3-4b-it@65536:2048:2,gemma-3-4b-it@32768:4096:1,gemma-3-27b-it@8192:2048:2,gemma-3-27b-it@65536:4096:1,llama-3.1-8b@8192:2048:3,qwen3-30b-a3b@8192:2048:1 \
  > "$OUT/log_trace.txt" 2>&1
cut -c1-400 "$OUT/log_trace.txt" | tail -20
