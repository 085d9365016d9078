#!/usr/bin/env bash
# Device run (session 3): trace the two points still 1-1.3% under the estimate (Phi-3-mini 64k, held out in
# session 2; DeepSeek-V2-Lite 64k at step 512) after a 64-token warm-up.
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 280 python3 benchmarks/cuda/probe_commits.py --tag unders --warmup 64 --deadline 260 \
  --models phi-3-mini-4k-instruct@65536:2048:2,deepseek-v2-lite@65536:512:1 --out "$OUT" > "$OUT/log_unders.txt" 2>&1
cut -c1-200 "$OUT/log_unders.txt" | grep -v "^Device" | tail -6
