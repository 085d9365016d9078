#!/usr/bin/env bash
# Issue 17 (session 5), two H200s (nvidia-h200-x2): the session-4 tensor-sharded points again, after a 64-token
# warm-up, with every CUDA graph launch traced per rank (commit_trace.so), to see how far each rank's host runs
# ahead of its GPU. Predictions committed first: benchmarks/cuda/predictions-s5.md (addendum).
# Needs the MLX CUDA install of ../shared/tools/mlx-cuda-wheels (PYTHONPATH=~/mlxsite:$PWD).
set -u
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
SO=$PWD/.trace/commit_trace.so
mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl
timeout 300 python3 -c 'from mlx._distributed_utils.launch import main; main()' --backend nccl -n 2 \
  --env NCCL_NVLS_ENABLE=0 --env LD_PRELOAD=$SO --env COMMIT_TRACE=$SO -- \
  python3 benchmarks/cuda/measure_sharded.py --models llama-3.1-8b@8192+32768,qwen3-30b-a3b@8192+32768 \
  --step 2048 --repeats 2 --warmup 64 --out "$OUT" > "$OUT/log_twogpu_s5.txt" 2>&1
echo "rc=$?"
for r in 0 1; do mv "$OUT/sharded_rank$r.json" "$OUT/twogpu_s5_rank$r.json" 2>/dev/null; done
cut -c1-400 "$OUT/log_twogpu_s5.txt" | tail -30
