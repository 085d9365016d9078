#!/usr/bin/env bash
# Device run 1 (session 12, s12-cuda; predictions first: benchmarks/cuda/predictions-s12-cuda.md "Run 1").
# A) stalled (session 8's condition: stall.py spin kernels before each layer's norms and every 8th GDN token step),
#    traced: Qwen3-Next 8 layers at 8k / 512, 1024, 4096; a 16-layer cut at 8k / 2048; Qwen3.5-27B 8 layers 8k / 2048.
# B) idle, traced: Qwen3.5-27B whole (64 layers) 4096 / 2048; Qwen3-Next 8 layers 32k / 512 (after-prefix chunks).
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
SO=$PWD/.trace/commit_trace.so
mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl || SO=""
T() { if [ -n "$SO" ]; then LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; else "$@"; fi; }
STALL="--stall-layer-ms 10 --stall-gdn-every 8 --stall-gdn-ms 2"
Q=qwen3-next-80b-a3b-8l-64e
A="$Q@8192:512:1:0:5,$Q@8192:1024:1:0:8,$Q@8192:4096:1:0:10,$Q@8192:2048:1:16:10,qwen3.5-27b-8l@8192:2048:1:0:10"
T timeout 290 python3 benchmarks/cuda/probe_commits.py --tag s12stall --warmup 64 --deadline 240 $STALL \
  --models "$A" --out "$OUT" > "$OUT/log_s12stall.txt" 2>&1
echo "A rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s12stall.txt"
LEFT=$(( 520 - ($(date +%s) - T0) ))
B="qwen3.5-27b@4096:2048:1,$Q@32768:512:1"
T timeout $LEFT python3 benchmarks/cuda/probe_commits.py --tag s12idle --warmup 64 --deadline $((LEFT - 60)) \
  --models "$B" --out "$OUT" > "$OUT/log_s12idle.txt" 2>&1
echo "B rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s12idle.txt"
for f in "$OUT"/log_s12*.txt; do echo "== $f"; cut -c1-300 "$f" | grep -v "^Device" | tail -14; done
ls -la "$OUT"
