#!/usr/bin/env bash
# Device run: five models that were not used to build the CUDA model, at step 2048 (the predictions were
# written to results/heldout_predictions_before_run.json before this ran).
set -u
cd "$(dirname "$0")/../.."
timeout 330 python3 benchmarks/cuda/measure_peaks.py --tag heldout \
  --models qwen3-32b,mixtral-8x7b-v0.1,phi-3-mini-4k-instruct,qwen2.5-7b-instruct,mistral-7b-v0.3 \
  --repeats 2 --deadline 320 --out "$OUT" > "$OUT/log_heldout.txt" 2>&1
grep -v "^\[" "$OUT/log_heldout.txt" | tail -18
