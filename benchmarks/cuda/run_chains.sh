#!/usr/bin/env bash
# Device run: SDPA / MoE chain probes, then prefill points with another process keeping the GPU busy
# (the host of the measured process runs further ahead: the peak moves toward the graph cap). Writes to $OUT.
set -u
cd "$(dirname "$0")/../.."
timeout 150 python3 benchmarks/cuda/probe_chains.py --tag default --out "$OUT" > "$OUT/log_chains.txt" 2>&1
python3 benchmarks/cuda/gpu_hog.py 170 > "$OUT/log_hog.txt" 2>&1 &
sleep 5
timeout 165 python3 benchmarks/cuda/measure_peaks.py --tag contention \
  --models llama-3.1-8b@8192+32768,qwen3-30b-a3b@8192,gemma-3-4b-it@8192,gemma-3-27b-it@8192 \
  --repeats 2 --deadline 155 --out "$OUT" > "$OUT/log_contention.txt" 2>&1
wait
tail -n 12 "$OUT/log_contention.txt"; cat "$OUT/log_hog.txt"
