#!/usr/bin/env bash
# Device run (session 10, s10-mla; issue 14 item 1; predictions committed first: benchmarks/cuda/predictions-s10-mla.md
# and results/s10mla_predictions_before_run.json). One H200, traced (commit_trace.so). The "plans warm" condition
# (probe_plans_warm.py): each prompt is run once (its chunk shapes' cuDNN plans built), then measured again idle,
# stalled (stall.py, plans warm) and stalled with a spin before every SDPA. The six shapes above the band after
# session 8 (Kimi-K2 32k / 64k at 2048, 32k at 4096, 32k / 64k at 512; Qwen3-Next 8k at 512), layer / expert cuts as
# in sessions 4-8 (benchmarks/cuda/configs/), then a DeepSeek-V3 8k / 2048 control (1.016 stalled: an under would show).
# Scripts newer than the checkout's come from .nu/s10-mla/ (the run tool sends the session's main checkout).
set -u
cd "$(dirname "$0")/../.."
if [ -d .nu/s10-mla ]; then cp .nu/s10-mla/*.py benchmarks/cuda/ 2>/dev/null; fi
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
T() { LD_PRELOAD=$SO COMMIT_TRACE=$SO "$@"; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$OUT/log_s10_gpu.txt" 2>&1
T timeout ${S10_TIMEOUT:-560} python3 benchmarks/cuda/probe_plans_warm.py --plan ${S10_PLAN:-s10} --tag ${S10_TAG:-s10warm} --deadline ${S10_DEADLINE:-500} \
  --out "$OUT" > "$OUT/log_${S10_TAG:-s10warm}.txt" 2>&1
echo "rc $?" >> "$OUT/log_${S10_TAG:-s10warm}.txt"
cut -c1-300 "$OUT/log_${S10_TAG:-s10warm}.txt" | grep -v "^Device" | tail -40
