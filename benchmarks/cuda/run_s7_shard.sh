#!/usr/bin/env bash
# Issue 17 (session 7), one H200: which ops of a real mlx-lm layer allocate on CUDA (probe_donation_s7.py).
# Predictions committed first: benchmarks/cuda/predictions-s7-shard.md. Needs the MLX CUDA install of
# ../shared/tools/mlx-cuda-wheels (PYTHONPATH=~/mlxsite:$PWD).
# 1) race / workspaces / blocks with ONE CUDA graph per eval (nothing completes while encoding: peak = allocations);
# 2) the Llama-3.1-8B tensor-rank shapes as one process (32 layers), prefill 8k / 32k, step 2048, traced, idle;
# 3) the same with gpu_hog.py loading the GPU (the host reaches the graph cap: what the estimate bounds).
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
SO=$PWD/.trace/commit_trace.so
mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl
MLX_MAX_OPS_PER_BUFFER=1000000 MLX_MAX_MB_PER_BUFFER=100000000 timeout 170 python3 benchmarks/cuda/probe_donation_s7.py \
  --race --blocks llama-rank,llama,phi3,qwen3-rank --tag onegraph --out "$OUT" > "$OUT/log_s7_onegraph.txt" 2>&1
echo "onegraph rc=$?"
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 110 python3 benchmarks/cuda/probe_donation_s7.py --prefill 8192+32768 --repeats 2 \
  --tag prefill_idle --out "$OUT" > "$OUT/log_s7_prefill_idle.txt" 2>&1
echo "idle rc=$?"
python3 benchmarks/cuda/gpu_hog.py 100 > "$OUT/log_s7_hog.txt" 2>&1 &
HOG=$!
sleep 6
LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 110 python3 benchmarks/cuda/probe_donation_s7.py --prefill 8192+32768 --repeats 2 \
  --tag prefill_hog --out "$OUT" > "$OUT/log_s7_prefill_hog.txt" 2>&1
echo "hog rc=$?"
kill "$HOG" 2>/dev/null; wait
for f in "$OUT"/log_s7_*.txt; do echo "== $f"; cut -c1-260 "$f" | tail -70; done
