#!/usr/bin/env bash
# Device run (session 5, issue 14; predictions committed first: benchmarks/cuda/predictions-s5.md).
# 0) probe_dsa.py: the indexer's ops one at a time (8k / 32k keys) and one attention module.
# 1) DeepSeek-V3.2 (DSA) with the indexer itemized op by op: the two session-4 points again + two new ones
#    (16k / step 1024, 8k / step 4096), traced, idle GPU.
# 2) Gated-DeltaNet hybrids (Qwen3-Next, Qwen3.5-27B cut to 8 layers) while gpu_hog.py loads the GPU from a
#    second process: does the host then hold the layer's per-token states and the next attention layer's
#    fallback scores in one window (what the op model charges), as it does not on an idle H200?
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
timeout 80 python3 benchmarks/cuda/probe_dsa.py --tag s5 --deadline 60 --out "$OUT" > "$OUT/log_dsa_probe.txt" 2>&1
T timeout 140 python3 benchmarks/cuda/probe_commits.py --tag dsv32s5 --warmup 64 --deadline 125 \
  --models deepseek-v3.2-8l-16e@8192+32768:2048:1,deepseek-v3.2-8l-16e@16384:1024:1,deepseek-v3.2-8l-16e@8192:4096:1 \
  --out "$OUT" > "$OUT/log_dsv32s5.txt" 2>&1
python3 benchmarks/cuda/gpu_hog.py 215 > "$OUT/log_hog_s5.txt" 2>&1 &
HOG=$!
sleep 5
T timeout 210 python3 benchmarks/cuda/probe_commits.py --tag gdnhog --warmup 64 --deadline 195 \
  --models qwen3-next-80b-a3b-8l-64e@32768:2048:1,qwen3.5-27b-8l@32768:2048:1,qwen3-next-80b-a3b-8l-64e@8192:2048:1 \
  --out "$OUT" > "$OUT/log_gdnhog.txt" 2>&1
kill $HOG 2>/dev/null; wait
for f in "$OUT"/log_*.txt; do echo "== $f"; cut -c1-400 "$f" | grep -v "^Device" | tail -6; done
