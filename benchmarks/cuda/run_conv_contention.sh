#!/usr/bin/env bash
# Device run: the bool-mask conversion chains and the two sliding-window models with a second process keeping
# the GPU busy, so the measured process's host is far ahead of the GPU (the graph cap is reached).
set -u
cd "$(dirname "$0")/../.."
python3 benchmarks/cuda/gpu_hog.py 200 > "$OUT/log_hog2.txt" 2>&1 &
sleep 5
timeout 100 python3 benchmarks/cuda/probe_chains.py --set conv --tag conv_contention --out "$OUT" > "$OUT/log_chains_conv_contention.txt" 2>&1
timeout 90 python3 benchmarks/cuda/measure_peaks.py --tag contention2 \
  --models gpt-oss-20b@8192+32768,gemma-3-27b-it@8192+32768 --repeats 2 --deadline 85 --out "$OUT" \
  > "$OUT/log_contention2.txt" 2>&1
wait
grep -v "^\[" "$OUT/log_contention2.txt" | tail -6; cat "$OUT/log_hog2.txt"
