#!/usr/bin/env bash
# Device run 2 (session 4, issue 14): the model after run 1 checked on points it was not built on (predictions
# committed first: results/neverunder2_predictions_before_run.json): DeepSeek-V3 at steps 1024 / 4096 and with 12
# layers (the in-flight window over MoE layers only), Qwen3-Next at steps 1024 / 4096, Qwen3.5-27B (held out: the
# dense gated-DeltaNet hybrid) cut to 8 layers. The 12-layer 32k point is last in its own process (largest).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
T timeout 150 python3 benchmarks/cuda/probe_commits.py --tag dsv3b --warmup 64 --deadline 135 \
  --models deepseek-v3-8l-16e@16384+32768:1024:1,deepseek-v3-8l-16e@8192:4096:1,deepseek-v3-12l-16e@8192:2048:1 \
  --out "$OUT" > "$OUT/log_dsv3b.txt" 2>&1
T timeout 170 python3 benchmarks/cuda/probe_commits.py --tag gdnb --warmup 64 --deadline 155 \
  --models qwen3-next-80b-a3b-8l-64e@8192:1024:1,qwen3-next-80b-a3b-8l-64e@8192:4096:1,qwen3.5-27b-8l@8192+32768:2048:1 \
  --out "$OUT" > "$OUT/log_gdnb.txt" 2>&1
T timeout 120 python3 benchmarks/cuda/probe_commits.py --tag dsv3c --warmup 64 --deadline 100 \
  --models deepseek-v3-12l-16e@32768:2048:1 --out "$OUT" > "$OUT/log_dsv3c.txt" 2>&1
for f in "$OUT"/log_*.txt; do echo "== $f"; cut -c1-300 "$f" | grep -v "^Device" | tail -6; done
