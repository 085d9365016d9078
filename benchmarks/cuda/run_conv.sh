#!/usr/bin/env bash
# Device run: the bool -> additive mask conversion of cuDNN SDPA, with and without sinks, S 2048 / 4096.
set -u
cd "$(dirname "$0")/../.."
timeout 200 python3 benchmarks/cuda/probe_chains.py --set conv --tag conv --out "$OUT" > "$OUT/log_chains_conv.txt" 2>&1
tail -n 9 "$OUT/log_chains_conv.txt" | cut -c1-260
