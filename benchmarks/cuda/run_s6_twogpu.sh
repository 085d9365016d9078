#!/usr/bin/env bash
# Issue 17 (session 6), two H200s (nvidia-h200-x2). Predictions committed first: benchmarks/cuda/predictions-s6-shard.md,
# results/twogpu_s6_predictions_before_run.json. Needs the MLX CUDA install of ../shared/tools/mlx-cuda-wheels
# (PYTHONPATH=~/mlxsite:$PWD).
# 1) idle: both models at 8k / 32k, 64-token warm-up, 3 repeats, untraced (the calibration points of session 6);
# 2) contention: a gpu_hog.py on EACH GPU while Llama-3.1-8B's ranks are measured, traced: if the Llama ranks'
#    over-estimate is timing (the GPU keeping up), a slowed GPU lets the host reach the graph cap and the measured
#    peak rises toward the estimate (which it must never pass).
set -u
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
L() { python3 -c 'from mlx._distributed_utils.launch import main; main()' --backend nccl -n 2 --env NCCL_NVLS_ENABLE=0 "$@"; }
mkdir -p "$OUT/idle" "$OUT/hog"
timeout 200 bash -c "$(declare -f L); L -- python3 benchmarks/cuda/measure_sharded.py \
  --models llama-3.1-8b@8192+32768,qwen3-30b-a3b@8192+32768 --step 2048 --repeats 3 --warmup 64 --out $OUT/idle" \
  > "$OUT/log_twogpu_s6idle.txt" 2>&1
echo "idle rc=$?"
SO=$PWD/.trace/commit_trace.so
mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/cuda/gpu_hog.py 75 > "$OUT/log_hog_s6_0.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=1 python3 benchmarks/cuda/gpu_hog.py 75 > "$OUT/log_hog_s6_1.txt" 2>&1 &
sleep 8
timeout 100 bash -c "$(declare -f L); L --env LD_PRELOAD=$SO --env COMMIT_TRACE=$SO -- python3 benchmarks/cuda/measure_sharded.py \
  --models llama-3.1-8b@8192+32768 --step 2048 --repeats 2 --warmup 64 --out $OUT/hog" > "$OUT/log_twogpu_s6hog.txt" 2>&1
echo "hog rc=$?"
wait
for r in 0 1; do mv "$OUT/idle/sharded_rank$r.json" "$OUT/twogpu_s6idle_rank$r.json" 2>/dev/null
                 mv "$OUT/hog/sharded_rank$r.json" "$OUT/twogpu_s6hog_rank$r.json" 2>/dev/null; done
for f in "$OUT"/log_twogpu_s6*.txt "$OUT"/log_hog_s6_*.txt; do echo "== $f"; cut -c1-330 "$f" | grep -v "^Device" | tail -14; done
