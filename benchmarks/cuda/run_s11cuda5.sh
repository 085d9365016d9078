#!/usr/bin/env bash
# Device run 5 (session 11, s11-cuda; predictions first: benchmarks/cuda/predictions-s11-cuda.md "Run 5").
# gemma-3-4b-it (24 layers) one-call prompts across the replay's graph-count steps: DOT dumps, then peaks without dumps.
set -u
cd "$(dirname "$0")/../.."
if [ -d .nu/s11-cuda ]; then cp .nu/s11-cuda/*.py benchmarks/cuda/ 2>/dev/null; fi
L=800:2048,1000:2048,1001:2048,1200:2048,1500:2048,2000:2048
mkdir -p "$OUT/dots/gemma-3-4b-it"
MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$OUT/dots/gemma-3-4b-it/g timeout 200 python3 benchmarks/cuda/probe_graph_dots_s11.py \
  --model gemma-3-4b-it --prompts $L > "$OUT/log_s11e_dots.txt" 2>&1
echo "rc $?" >> "$OUT/log_s11e_dots.txt"; tail -2 "$OUT/log_s11e_dots.txt"
mv "$OUT/dots_s11_gemma-3-4b-it.json" "$OUT/dots_s11e_gemma-3-4b-it.json"
(cd "$OUT/dots" && tar czf ../dots_s11e_gemma-3-4b-it.tgz gemma-3-4b-it && rm -rf gemma-3-4b-it)
timeout 200 python3 benchmarks/cuda/probe_graph_dots_s11.py --model gemma-3-4b-it \
  --prompts $L,$L > "$OUT/log_s11e_peaks.txt" 2>&1
echo "rc $?" >> "$OUT/log_s11e_peaks.txt"; tail -2 "$OUT/log_s11e_peaks.txt"
mv "$OUT/dots_s11_gemma-3-4b-it.json" "$OUT/peaks_s11e_gemma-3-4b-it.json"
ls -la "$OUT"
