#!/usr/bin/env bash
# Device run (session 11, s11-cuda; issue 14 item 1; predictions committed first: benchmarks/cuda/predictions-s11-cuda.md).
# One H200. Graph DOT dumps (MLX_SAVE_CUDA_GRAPHS_DOT_FILE) of gpt-oss-20b (24 layers, real dims) around the S-1
# graph-split artifact (2048 / 2049-token prompts, twice each, then 8192 at step 2048), and of two other MoE models
# (8 layers) whose commit boundaries any MoE element-count change moves. Scripts newer than the checkout's come
# from .nu/s11-cuda/ (the run tool sends the session's main checkout).
set -u
cd "$(dirname "$0")/../.."
if [ -d .nu/s11-cuda ]; then cp .nu/s11-cuda/*.py benchmarks/cuda/ 2>/dev/null; fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$OUT/log_s11_gpu.txt" 2>&1
D() {  # model layers prompts
  mkdir -p "$OUT/dots/$1"
  MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$OUT/dots/$1/g timeout ${S11_TIMEOUT:-240} python3 benchmarks/cuda/probe_graph_dots_s11.py \
    --model "$1" --layers "$2" --prompts "$3" > "$OUT/log_s11_$1.txt" 2>&1
  echo "rc $?" >> "$OUT/log_s11_$1.txt"
  tail -3 "$OUT/log_s11_$1.txt"
  (cd "$OUT/dots" && tar czf "../dots_s11_$1.tgz" "$1" && rm -rf "$1")
}
D gpt-oss-20b 0 2048:2048,2049:2048,2048:2048,2049:2048,8192:2048
D qwen3-30b-a3b 8 4097:2048,2048:2048
D deepseek-v2-lite 8 4097:2048,2048:2048
ls -la "$OUT"
