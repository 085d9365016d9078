#!/usr/bin/env bash
# Device run (session 3): does one short prefill right after loading remove the first-call effect (more,
# smaller CUDA graphs, more than 11 in flight)? Each case is a fresh process (the effect is once per process).
set -u
cd "$(dirname "$0")/../.."
SO=$PWD/.trace/commit_trace.so
if command -v gcc >/dev/null; then mkdir -p .trace && gcc -shared -fPIC -O2 -o "$SO" benchmarks/cuda/commit_trace.c -ldl; fi
run() {  # tag warmup models
  LD_PRELOAD=$SO COMMIT_TRACE=$SO timeout 120 python3 benchmarks/cuda/probe_commits.py --tag "$1" --warmup "$2" \
    --models "$3" --deadline 110 --out "$OUT" > "$OUT/log_$1.txt" 2>&1
  echo "== $1"; cut -c1-260 "$OUT/log_$1.txt" | grep -v "^Device" | tail -4
}
run warm64_gptoss 64 gpt-oss-20b@8192:2048:1
run warm2049_gptoss 2049 gpt-oss-20b@8192:2048:1
run warm64_deepseek 64 deepseek-v2-lite@8192:4096:1
run warm300_llama 300 llama-3.1-8b@8192:2048:2
run cold_qwen3 0 qwen3-30b-a3b@8192:2048:2
