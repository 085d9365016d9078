#!/usr/bin/env bash
# Device run 4 (session 11, s11-cuda; predictions first: benchmarks/cuda/predictions-s11-cuda.md "Run 4").
# Qwen3-Next-80B-A3B (8 layers, 64 experts) graph DOT dumps of two 512-token calls: kernels per gated-DeltaNet step.
set -u
cd "$(dirname "$0")/../.."
if [ -d .nu/s11-cuda ]; then cp .nu/s11-cuda/*.py benchmarks/cuda/ 2>/dev/null; fi
M=qwen3-next-80b-a3b-8l-64e
mkdir -p "$OUT/dots/$M"
MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$OUT/dots/$M/g timeout 300 python3 benchmarks/cuda/probe_graph_dots_s11.py \
  --model $M --prompts 1025:512 > "$OUT/log_s11d_dots.txt" 2>&1
echo "rc $?" >> "$OUT/log_s11d_dots.txt"; tail -3 "$OUT/log_s11d_dots.txt"
mv "$OUT/dots_s11_$M.json" "$OUT/dots_s11d_$M.json"
(cd "$OUT/dots" && tar czf ../dots_s11d_$M.tgz $M && rm -rf $M)
ls -la "$OUT"
