#!/usr/bin/env bash
# Device run A (session 6, issue 14; predictions committed first: benchmarks/cuda/predictions-s6.md).
# Idle H200, traced (commit_trace.so), 64-token warm-up after load: the DeepSeek-V3 family at real attention widths
# (layers / routed experts cut to fit: configs/*-8l-16e.json) with the current op model, unchanged since session 5.
# 1) DeepSeek-V3: session 4's five points again (8k / 32k at step 2048; 8k / 32k / 64k at step 512).
# 2) Kimi-K2 (64 heads): 8k / 32k / 64k at steps 2048 and 512 (64k / 2048 last: ~95 GiB + weights).
# 3) DeepSeek-V3.2 (DSA): the two session-5 points over the band (32k / 2048, 16k / 1024) again.
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
T timeout 150 python3 benchmarks/cuda/probe_commits.py --tag dsv3s6 --warmup 64 --deadline 135 \
  --models deepseek-v3-8l-16e@8192+32768:2048:1,deepseek-v3-8l-16e@8192+32768+65536:512:1 \
  --out "$OUT" > "$OUT/log_dsv3s6.txt" 2>&1
T timeout 170 python3 benchmarks/cuda/probe_commits.py --tag kimis6 --warmup 64 --deadline 155 \
  --models kimi-k2-8l-16e@8192+32768+65536:512:1,kimi-k2-8l-16e@8192+32768+65536:2048:1 \
  --out "$OUT" > "$OUT/log_kimis6.txt" 2>&1
T timeout 110 python3 benchmarks/cuda/probe_commits.py --tag dsv32s6 --warmup 64 --deadline 95 \
  --models deepseek-v3.2-8l-16e@32768:2048:1,deepseek-v3.2-8l-16e@16384:1024:1 \
  --out "$OUT" > "$OUT/log_dsv32s6.txt" 2>&1
for f in "$OUT"/log_*.txt; do echo "== $f"; cut -c1-300 "$f" | grep -v "^Device" | tail -8; done
