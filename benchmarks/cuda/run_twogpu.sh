#!/usr/bin/env bash
# Issue 17, two H200s (nvidia-h200-x2): tensor-sharded Llama-3.1-8B and Qwen3-30B-A3B, 8k / 32k, chunk 2048,
# one GPU per rank over NCCL, launched by MLX's own launcher (mlx.launch --backend nccl -n 2).
# Predictions committed first: results/twogpu_predictions_before_run.json.
# Needs the MLX CUDA install of ../shared/tools/mlx-cuda-wheels (PYTHONPATH=~/mlxsite:$PWD).
set -u
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader
timeout 420 python3 -c 'from mlx._distributed_utils.launch import main; main()' --backend nccl -n 2 \
  --env NCCL_NVLS_ENABLE=0 -- \
  python3 benchmarks/cuda/measure_sharded.py --models llama-3.1-8b@8192+32768,qwen3-30b-a3b@8192+32768 \
  --step 2048 --repeats 2 --out "$OUT" > "$OUT/log_twogpu.txt" 2>&1
echo "rc=$?"
cut -c1-300 "$OUT/log_twogpu.txt" | tail -30
