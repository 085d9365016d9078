#!/usr/bin/env bash
# Device run B (session 6, issue 14; predictions committed first: benchmarks/cuda/predictions-s6.md), right after A
# on the warm machine. Gated-DeltaNet hybrids with the new items (peak/ops/recurrent.deltanet_recurrence_items:
# the state chain first, then the readouts), traced, 64-token warm-up:
# 1) idle: Qwen3-Next and Qwen3.5-27B (first 8 layers) at 8k / 32k, step 2048 (repeats of session 4);
# 2) gpu_hog.py loading the GPU from a second process: Qwen3-Next 8k at steps 2048 / 512 / 4096, Qwen3.5-27B 8k / 2048
#    (the host then runs up to 11 graphs ahead, the case the op model bounds), and DeepSeek-V3 8k at 2048 / 512
#    (is its idle over-estimate at short prompts the same timing case?).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
T timeout 150 python3 benchmarks/cuda/probe_commits.py --tag gdns6 --warmup 64 --deadline 135 \
  --models qwen3-next-80b-a3b-8l-64e@8192+32768:2048:1,qwen3.5-27b-8l@8192+32768:2048:1 \
  --out "$OUT" > "$OUT/log_gdns6.txt" 2>&1
python3 benchmarks/cuda/gpu_hog.py 250 > "$OUT/log_hog_s6.txt" 2>&1 &
HOG=$!
sleep 5
T timeout 170 python3 benchmarks/cuda/probe_commits.py --tag gdnhogs6 --warmup 64 --deadline 155 \
  --models qwen3-next-80b-a3b-8l-64e@8192:2048:1,qwen3-next-80b-a3b-8l-64e@8192:512:1,qwen3-next-80b-a3b-8l-64e@8192:4096:1,qwen3.5-27b-8l@8192:2048:1 \
  --out "$OUT" > "$OUT/log_gdnhogs6.txt" 2>&1
T timeout 75 python3 benchmarks/cuda/probe_commits.py --tag dsv3hogs6 --warmup 64 --deadline 65 \
  --models deepseek-v3-8l-16e@8192:2048:1,deepseek-v3-8l-16e@8192:512:1 \
  --out "$OUT" > "$OUT/log_dsv3hogs6.txt" 2>&1
kill $HOG 2>/dev/null; wait
for f in "$OUT"/log_*.txt; do echo "== $f"; cut -c1-300 "$f" | grep -v "^Device" | tail -8; done
