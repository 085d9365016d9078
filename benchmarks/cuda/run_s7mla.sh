#!/usr/bin/env bash
# Device run (session 7, issue 14 item 1; predictions committed first: benchmarks/cuda/predictions-s7-mla.md).
# One H200, traced (commit_trace.so), 64-token warm-up after each model load. Two repeats where the first sees a
# shape for the first time (the last chunk of 8192 tokens is 2047 tokens: the first MoE layer's compiled router
# retraces and the GPU drains while the host waits), so the second repeat is the warm server's case.
# 1) idle: DeepSeek-V3 8k (+ 8193: the last chunk a full 2048) at steps 2048 / 512, Kimi-K2 8k / 512, and Kimi-K2
#    4097 / 2048 (a prompt that ends at the chunk that came out 0.857 before the fp32 MoE combine was itemized).
# 2) gpu_hog.py loading the GPU from a second process (the host then reaches MLX's 11-graph cap): Kimi-K2 32k / 64k
#    at step 2048 and 8k / 512, DeepSeek-V3 8k / 8193 at 2048 and 8k at 512, DeepSeek-V3.2 32k / 2048, Qwen3-Next 8k / 512.
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
T timeout 150 python3 benchmarks/cuda/probe_commits.py --tag s7idle --warmup 64 --deadline 135 \
  --models deepseek-v3-8l-16e@8192+8193:2048:2,deepseek-v3-8l-16e@8192:512:2,kimi-k2-8l-16e@8192:512:2,kimi-k2-8l-16e@4097:2048:1 \
  --out "$OUT" > "$OUT/log_s7idle.txt" 2>&1
python3 benchmarks/cuda/gpu_hog.py 280 > "$OUT/log_hog_s7.txt" 2>&1 &
HOG=$!
sleep 5
T timeout 260 python3 benchmarks/cuda/probe_commits.py --tag s7hog --warmup 64 --deadline 240 \
  --models kimi-k2-8l-16e@32768+65536:2048:1,kimi-k2-8l-16e@8192:512:2,deepseek-v3-8l-16e@8192+8193:2048:2,deepseek-v3-8l-16e@8192:512:2,deepseek-v3.2-8l-16e@32768:2048:1,qwen3-next-80b-a3b-8l-64e@8192:512:2 \
  --out "$OUT" > "$OUT/log_s7hog.txt" 2>&1
kill $HOG 2>/dev/null; wait
for f in "$OUT"/log_s7*.txt; do echo "== $f"; cut -c1-300 "$f" | grep -v "^Device" | tail -14; done
