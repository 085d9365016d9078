#!/usr/bin/env bash
# Device run 2 (session 12, s12-cuda; predictions first: benchmarks/cuda/predictions-s12-cuda.md "Run 2").
# Stalled (session 8's condition), traced: gated-DeltaNet after a prefix (every chunk after the first is a call
# after a cached prefix): Qwen3-Next 8 layers 24k / 512, Qwen3.5-27B 8 layers 16k / 2048; then the whole Qwen3.5-27B
# 4096 / 2048 (GDN stall every 32nd step: 48 layers).
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
SO=$PWD/.trace/commit_trace.so
mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl || SO=""
T() { if [ -n "$SO" ]; then LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; else "$@"; fi; }
Q=qwen3-next-80b-a3b-8l-64e
T timeout 330 python3 benchmarks/cuda/probe_commits.py --tag s12stall2 --warmup 64 --deadline 280 \
  --stall-layer-ms 10 --stall-gdn-every 8 --stall-gdn-ms 2 \
  --models "qwen3.5-27b-8l@16384:2048:1:0:10,$Q@24576:512:1:0:5" --out "$OUT" > "$OUT/log_s12stall2.txt" 2>&1
echo "A rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s12stall2.txt"
LEFT=$(( 540 - ($(date +%s) - T0) ))
T timeout $LEFT python3 benchmarks/cuda/probe_commits.py --tag s12stall3 --warmup 64 --deadline $((LEFT - 60)) \
  --stall-layer-ms 10 --stall-gdn-every 32 --stall-gdn-ms 2 \
  --models "qwen3.5-27b@4096:2048:1" --out "$OUT" > "$OUT/log_s12stall3.txt" 2>&1
echo "B rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s12stall3.txt"
for f in "$OUT"/log_s12*.txt; do echo "== $f"; cut -c1-300 "$f" | grep -v "^Device" | tail -8; done
