#!/usr/bin/env bash
# Device run (session 4, issue 14): DeepSeek-V3-family latent MLA (128 heads, kv_lora 512 / rope 64) and the
# Qwen3-Next gated-DeltaNet hybrid at real attention widths, layers and routed experts cut to fit (configs
# *-8l-*e.json, see measure_peaks.MODELS). Predictions committed first: results/neverunder_predictions_before_run.json.
# Traced prefill after a 64-token warm-up; then the op probe (probe_mla.py) and one-op graphs for per-op bytes.
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
T timeout 190 python3 benchmarks/cuda/probe_commits.py --tag dsv3 --warmup 64 --deadline 170 \
  --models deepseek-v3-8l-16e@8192+32768:2048:1,deepseek-v3-8l-16e@8192+32768+65536:512:1 \
  --out "$OUT" > "$OUT/log_dsv3.txt" 2>&1
T timeout 110 python3 benchmarks/cuda/probe_commits.py --tag gdn --warmup 64 --deadline 95 \
  --models qwen3-next-80b-a3b-8l-64e@8192+32768:2048:1,qwen3-next-80b-a3b-8l-64e@8192:512:1 \
  --out "$OUT" > "$OUT/log_gdn.txt" 2>&1
timeout 70 python3 benchmarks/cuda/probe_mla.py --tag ops --deadline 55 --out "$OUT" > "$OUT/log_mla.txt" 2>&1
T timeout 80 python3 benchmarks/cuda/probe_commits.py --tag dsv32 --warmup 64 --deadline 65 \
  --models deepseek-v3.2-8l-16e@8192+32768:2048:1 --out "$OUT" > "$OUT/log_dsv32.txt" 2>&1
MLX_MAX_OPS_PER_BUFFER=1 T timeout 50 python3 benchmarks/cuda/probe_commits.py --tag dsv3_ops1 --warmup 64 --deadline 40 \
  --models deepseek-v3-8l-16e@8192:2048:1 --out "$OUT" > "$OUT/log_dsv3_ops1.txt" 2>&1
for f in "$OUT"/log_*.txt; do echo "== $f"; cut -c1-240 "$f" | grep -v "^Device" | tail -8; done
