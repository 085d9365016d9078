#!/usr/bin/env bash
# Device run 2 (session 8, s8-mla). Run 1 (run_s8mla.sh) pinned the host at the 11-graph cap everywhere EXCEPT the
# first graphs of each long-kL chunk: the host needs ~80 ms to encode layer 0's score graph (a 16-32 GiB buffer, a
# cuDNN plan for the new kL) and the GPU finishes graphs 1-2 meanwhile, so the estimate's worst window (graph 12:
# graphs 2-12 in flight) was never reached. Here the chunk's first stall (layer 0's input norm) spins 500 ms (200 ms
# at step 512): an engine whose GPU is busy with another request when the chunk is enqueued. Kimi-K2 32k / 64k at
# 2048 and 32k at 4096, the DeepSeek-V3 32k / 2048 control (1.013: an under would show here), Kimi-K2 64k / 512.
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
A="kimi-k2-8l-16e@32768+65536:2048:1:0:10:500,deepseek-v3-8l-16e@32768:2048:1:0:10:500,kimi-k2-8l-16e@32768:4096:1:0:10:500"
A="$A,kimi-k2-8l-16e@65536:512:1:0:5:200"
T timeout 235 python3 benchmarks/cuda/probe_commits.py --tag s8stall2 --warmup 64 --deadline 190 \
  --stall-layer-ms 10 --stall-gdn-every 8 --stall-gdn-ms 2 --models "$A" --out "$OUT" > "$OUT/log_s8stall2.txt" 2>&1
cut -c1-400 "$OUT/log_s8stall2.txt" | grep -v "^Device" | tail -30
