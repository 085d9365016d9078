#!/usr/bin/env bash
# Device run (session 8, issue 14 item 1; predictions committed first: benchmarks/cuda/predictions-s8-mla.md and
# results/s8mla_predictions_before_run.json). One H200, traced (commit_trace.so), 64-token warm-up per model.
# A) "stalled" (stall.py): spin kernels on the measured stream before every RMSNorm of a layer (layer_ms, the 5th
#    spec field) and every 8th gated-DeltaNet token step (2 ms), so the host fills MLX's 11-graph window: the 11
#    DeepSeek-family / GDN shapes over the band at their highest measured peak, then in-band controls.
# B) the shapes still above 1.15 after A, stalled again with two gpu_hog.py processes loading the GPU.
# If the stall kernel does not build on the device, A runs loaded by three gpu_hog.py instead (no stalls).
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
PRED=benchmarks/cuda/results/s8mla_predictions_before_run.json
STALL="--stall-layer-ms 10 --stall-gdn-every 8 --stall-gdn-ms 2"
HOGS=""
if ! (cd benchmarks/cuda && timeout 60 python3 -c "import stall; print(stall.self_test('kernel'))") > "$OUT/log_selftest.txt" 2>&1; then
  echo "stall kernel failed: loaded x3 instead" >> "$OUT/log_selftest.txt"; STALL=""
  for i in 1 2 3; do python3 benchmarks/cuda/gpu_hog.py 320 > "$OUT/log_hogA$i.txt" 2>&1 & HOGS="$HOGS $!"; done; sleep 5
fi
cat "$OUT/log_selftest.txt"
A="kimi-k2-8l-16e@32768+65536:2048:1:0:10,kimi-k2-8l-16e@32768:4096:1:0:10,kimi-k2-8l-16e@8192:512:2:0:5"
A="$A,deepseek-v3-8l-16e@8192+8193:2048:2:0:10,deepseek-v3-8l-16e@16384:1024:1:0:8,deepseek-v3-8l-16e@8192:4096:2:0:10"
A="$A,deepseek-v3-12l-16e@8192:2048:2:0:10,deepseek-v3-12l-16e@32768:2048:1:0:10"
A="$A,qwen3-next-80b-a3b-8l-64e@8192:512:1:0:5,qwen3-next-80b-a3b-8l-64e@8192:1024:1:0:8"
A="$A,deepseek-v3.2-8l-16e@32768:2048:1:0:10,qwen3.5-27b-8l@8192:2048:1:0:10,qwen3-next-80b-a3b-8l-64e@8192:4096:1:0:10"
A="$A,kimi-k2-8l-16e@65536:512:1:0:5,deepseek-v3-8l-16e@32768:2048:1:0:10"
T timeout 340 python3 benchmarks/cuda/probe_commits.py --tag s8stall --warmup 64 --deadline 300 $STALL \
  --models "$A" --out "$OUT" > "$OUT/log_s8stall.txt" 2>&1
for h in $HOGS; do kill $h 2>/dev/null; done; wait
LEFT=$(( 545 - ($(date +%s) - T0) ))
B=$(python3 benchmarks/cuda/s8_still_over.py "$OUT/commits_s8stall.json" "$PRED" 2>>"$OUT/log_s8stall.txt" | paste -sd, -)
echo "B ($LEFT s left): $B"
if [ -n "$STALL" ] && [ -n "$B" ] && [ "$LEFT" -gt 60 ]; then
  python3 benchmarks/cuda/gpu_hog.py $LEFT > "$OUT/log_hogB1.txt" 2>&1 & H1=$!
  python3 benchmarks/cuda/gpu_hog.py $LEFT > "$OUT/log_hogB2.txt" 2>&1 & H2=$!
  sleep 4
  T timeout $((LEFT - 8)) python3 benchmarks/cuda/probe_commits.py --tag s8stallhog --warmup 64 --deadline $((LEFT - 40)) \
    $STALL --models "$B" --out "$OUT" > "$OUT/log_s8stallhog.txt" 2>&1
  kill $H1 $H2 2>/dev/null; wait
fi
for f in "$OUT"/log_s8*.txt; do echo "== $f"; cut -c1-260 "$f" | grep -v "^Device" | tail -30; done
