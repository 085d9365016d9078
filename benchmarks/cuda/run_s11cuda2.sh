#!/usr/bin/env bash
# Device run 2 (session 11, s11-cuda; predictions first: benchmarks/cuda/predictions-s11-cuda.md "Run 2").
# gpt-oss-20b (24 layers) one-call prompts across the replay's graph-count steps: DOT dumps, then peaks without dumps.
set -u
cd "$(dirname "$0")/../.."
if [ -d .nu/s11-cuda ]; then cp .nu/s11-cuda/*.py benchmarks/cuda/ 2>/dev/null; fi
L=1161:2048,1201:2048,1250:2048,1290:2048,1601:2048,1700:2048,1901:2048,1951:2048,1981:2048,2001:2048,2011:2048,2021:2048,2026:2048,2031:2048
mkdir -p "$OUT/dots/gpt-oss-20b"
MLX_SAVE_CUDA_GRAPHS_DOT_FILE=$OUT/dots/gpt-oss-20b/g timeout 200 python3 benchmarks/cuda/probe_graph_dots_s11.py \
  --model gpt-oss-20b --prompts $L > "$OUT/log_s11b_dots.txt" 2>&1
echo "rc $?" >> "$OUT/log_s11b_dots.txt"; tail -2 "$OUT/log_s11b_dots.txt"
mv "$OUT/dots_s11_gpt-oss-20b.json" "$OUT/dots_s11b_gpt-oss-20b.json"
(cd "$OUT/dots" && tar czf ../dots_s11b_gpt-oss-20b.tgz gpt-oss-20b && rm -rf gpt-oss-20b)
timeout 200 python3 benchmarks/cuda/probe_graph_dots_s11.py --model gpt-oss-20b \
  --prompts $L,2048:2048,2049:2048,$L,2048:2048,2049:2048 > "$OUT/log_s11b_peaks.txt" 2>&1
echo "rc $?" >> "$OUT/log_s11b_peaks.txt"; tail -2 "$OUT/log_s11b_peaks.txt"
mv "$OUT/dots_s11_gpt-oss-20b.json" "$OUT/peaks_s11b_gpt-oss-20b.json"
ls -la "$OUT"
