#!/usr/bin/env bash
# Device run: are the remaining over-estimates timing? The points where the estimate is most above the
# measured peak, re-measured while a second process loads the GPU (the host gets further ahead).
set -u
cd "$(dirname "$0")/../.."
python3 benchmarks/cuda/gpu_hog.py 150 > "$OUT/log_hog3.txt" 2>&1 &
sleep 5
timeout 60 python3 benchmarks/cuda/measure_peaks.py --tag contention3_step512 --step 512 \
  --models llama-3.1-8b@8192,gemma-3-4b-it@8192 --repeats 2 --deadline 55 --out "$OUT" > "$OUT/log_contention3a.txt" 2>&1
timeout 80 python3 benchmarks/cuda/measure_peaks.py --tag contention3_step2048 \
  --models gemma-3-4b-it@32768,qwen2.5-7b-instruct@8192,mistral-7b-v0.3@8192 --repeats 2 --deadline 75 --out "$OUT" \
  > "$OUT/log_contention3b.txt" 2>&1
wait
grep -v "^\[" "$OUT/log_contention3a.txt" | tail -4; grep -v "^\[" "$OUT/log_contention3b.txt" | tail -5; cat "$OUT/log_hog3.txt"
