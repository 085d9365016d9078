#!/usr/bin/env bash
# Device run 3 (session 4, issue 14): Kimi-K2 dims (64 heads, latent MLA) held out from the DeepSeek-V3 fit;
# predictions committed first: results/neverunder3_predictions_before_run.json.
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 200 python3 benchmarks/cuda/probe_commits.py --tag kimi --warmup 64 --deadline 180 \
  --models kimi-k2-8l-16e@8192+32768:2048:1,kimi-k2-8l-16e@65536:512:1,kimi-k2-8l-16e@32768:4096:1 \
  --out "$OUT" > "$OUT/log_kimi.txt" 2>&1
cut -c1-300 "$OUT/log_kimi.txt" | grep -v "^Device" | tail -6
