#!/usr/bin/env bash
# Device run 2 (session 13, s13-cuda; predictions first: predictions-s13-cuda.md "Run 2"). Traced, 64-token warm-up.
# Run 1 found Devstral-Small-2-24B 32k at step 512 UNDER (0.976, idle). B (stalled) first: that shape stalled and a
# control with its text dims as a plain llama (no llama-4 query scaling, no yarn); then the idle shapes of run 1
# that sat above the band (small models, Qwen2.5-72B-16l at 512), stalled. A (idle): the control and a repeat.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
SO=$PWD/.trace/commit_trace.so
mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl || SO=""
T() { if [ -n "$SO" ]; then LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; else "$@"; fi; }
P=benchmarks/cuda/probe_prefix_s13.py
T timeout 330 python3 $P --tag s13stall2 --warmup 64 --deadline 290 --conditions stalled --models \
"devstral-small-2-24b-instruct@0/32768+0/8192:512:1,devstral-shape-llama-control@0/32768:512:1,\
qwen3-0.6b@0/8192+0/32768:2048:1,llama-3.2-1b-instruct@0/8192:2048:1,llama-3.2-1b-instruct@0/8192:512:1,\
qwen2.5-72b-16l@0/8192+8192/300:512:1,qwen3-0.6b@0/32768:512:1" --out "$OUT" > "$OUT/log_s13stall2.txt" 2>&1
echo "B rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s13stall2.txt"
LEFT=$(( 520 - ($(date +%s) - T0) ))
T timeout $LEFT python3 $P --tag s13idle2 --warmup 64 --deadline $((LEFT - 40)) --conditions idle --models \
"devstral-shape-llama-control@0/32768+0/8192:512:1,devstral-small-2-24b-instruct@0/32768:512:1" \
 --out "$OUT" > "$OUT/log_s13idle2.txt" 2>&1
echo "A rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s13idle2.txt"
for f in "$OUT"/log_s13*.txt; do echo "== $f"; cut -c1-200 "$f" | grep -v "^Device" | tail -14; done
