#!/usr/bin/env bash
# Device run 1 (session 13, s13-cuda; held-out check 3; predictions first: benchmarks/cuda/predictions-s13-cuda.md,
# results/s13cuda1_predictions_before_run.json). Traced, 64-token warm-up per model.
# A (idle): four models never measured on CUDA (two whole, Qwen2.5-72B cut to its first 16 layers) and LFM2.5-VL's
#   text model; plain prompts 8k / 32k at steps 2048 / 512, and requests AFTER A CACHED PREFIX (8k / 32k) of new-token
#   counts inside one chunk block; gated DeltaNet (Qwen3.5-27B 8 layers, Qwen3-Next 8 layers) after an 8k prefix.
# B (stalled, session 8's condition: 10 ms before every block norm, 2 ms every 8th DeltaNet step): the after-prefix
#   requests again (dense and GDN), plus Qwen2.5-72B-16l 8k at 2048.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
SO=$PWD/.trace/commit_trace.so
mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl || SO=""
T() { if [ -n "$SO" ]; then LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; else "$@"; fi; }
P=benchmarks/cuda/probe_prefix_s13.py
Q72=qwen2.5-72b-16l
T timeout 300 python3 $P --tag s13idle --warmup 64 --deadline 270 --conditions idle --models \
"llama-3.2-1b-instruct@0/8192+0/32768:2048:2,llama-3.2-1b-instruct@0/8192+0/32768:512:1,\
qwen3-0.6b@0/8192+0/32768:2048:2,qwen3-0.6b@0/32768:512:1,\
$Q72@0/8192+0/32768+8192/700+8192/1500+8192/2047+32768/1000+32768/3000:2048:2,$Q72@0/8192+8192/300:512:1,\
devstral-small-2-24b-instruct@0/8192+0/32768+32768/1200:2048:2,devstral-small-2-24b-instruct@0/32768:512:1,\
qwen3.5-27b-8l@8192/600+8192/1300+8192/2000:2048:1,qwen3-next-80b-a3b-8l-64e@8192/200+8192/450:512:1,\
lfm2.5-vl-1.6b-text@0/8192+0/32768+8192/900:2048:1" --out "$OUT" > "$OUT/log_s13idle.txt" 2>&1
echo "A rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s13idle.txt"
LEFT=$(( 530 - ($(date +%s) - T0) ))
T timeout $LEFT python3 $P --tag s13stall --warmup 64 --deadline $((LEFT - 40)) --conditions stalled --models \
"qwen3.5-27b-8l@8192/2000+8192/1300+8192/600:2048:1,qwen3-next-80b-a3b-8l-64e@8192/450+8192/200:512:1,\
$Q72@8192/2047+8192/1500+32768/1000+0/8192:2048:1,devstral-small-2-24b-instruct@32768/1200:2048:1" \
 --out "$OUT" > "$OUT/log_s13stall.txt" 2>&1
echo "B rc $? at $(( $(date +%s) - T0 )) s" >> "$OUT/log_s13stall.txt"
for f in "$OUT"/log_s13*.txt; do echo "== $f"; cut -c1-230 "$f" | grep -v "^Device" | tail -40; done
