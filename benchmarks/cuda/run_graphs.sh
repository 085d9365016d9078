#!/usr/bin/env bash
# Device run (MLX CUDA installed, PYTHONPATH set): the graph-commit probes of benchmarks/cuda/README.md
# "Graph commits". Writes to $OUT.
set -u
cd "$(dirname "$0")/../.."
M=llama-3.1-8b@8192+65536,gemma-3-4b-it@8192+65536,deepseek-v2-lite@8192+65536,gpt-oss-20b@8192+65536,qwen3-30b-a3b@8192+65536,gemma-3-27b-it@8192+65536
timeout 90 python3 benchmarks/cuda/probe_graphs.py --tag default --out "$OUT" > "$OUT/log_graphs.txt" 2>&1
MLX_MAX_OPS_PER_BUFFER=1 timeout 230 python3 benchmarks/cuda/measure_peaks.py --tag e_ops1 --models "$M" \
  --repeats 1 --deadline 220 --out "$OUT" > "$OUT/log_e_ops1.txt" 2>&1
MLX_MAX_MB_PER_BUFFER=100000 timeout 170 python3 benchmarks/cuda/measure_peaks.py --tag e_nodes \
  --models llama-3.1-8b@8192+65536,deepseek-v2-lite@8192+65536,gpt-oss-20b@8192,gemma-3-4b-it@65536 \
  --repeats 2 --deadline 160 --out "$OUT" > "$OUT/log_e_nodes.txt" 2>&1
tail -3 "$OUT"/log_*.txt
