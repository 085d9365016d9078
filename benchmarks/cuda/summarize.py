#!/usr/bin/env python3
"""Turn the raw device JSON in results/ into the calibration YAML and the README tables.

    python3 benchmarks/cuda/summarize.py            # writes profiles/calibration/cuda/h200-mlx-0.32.4.yaml
    python3 benchmarks/cuda/summarize.py --tables   # also prints the markdown tables used in README.md
    python3 benchmarks/cuda/summarize.py --heldout  # writes .../h200-mlx-0.32.4-heldout.yaml (peaks_heldout.json)
    python3 benchmarks/cuda/summarize.py --s5          # .../h200-mlx-0.32.4-dsa-s5.yaml + -gdn-contention.yaml
    python3 benchmarks/cuda/summarize.py --s6          # .../h200-mlx-0.32.4-s6.yaml + -s6-contention.yaml
    python3 benchmarks/cuda/summarize.py --s7          # .../h200-mlx-0.32.4-s7.yaml + -s7-contention.yaml
    python3 benchmarks/cuda/summarize.py --s8          # .../h200-mlx-0.32.4-s8-stalled.yaml + -s8-stalled-contention.yaml
    python3 benchmarks/cuda/summarize.py --s10         # .../h200-mlx-0.32.4-s10-plans-warm.yaml + -s10-plans-warm-stalled.yaml
    python3 benchmarks/cuda/summarize.py --contention  # .../h200-mlx-0.32.4-contention.yaml (peaks_contention*.json)
    python3 benchmarks/cuda/summarize.py --heldout2    # .../h200-mlx-0.32.4-heldout2.yaml (commits_heldout2.json)
    python3 benchmarks/cuda/summarize.py --nemotron    # .../h200-mlx-0.32.4-nemotron.yaml (commits_nemotron.json)

No MLX needed: it only reads results/*.json (written by measure_peaks.py on the GPU machine).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = HERE / "results"
CALIB = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4.yaml"
G = 2**30
# the editor hint every calibration file starts with (omlx_profiles.schema.export.hint_line; the data-file
# tests fail when a regenerated file carries a stale one)
CALIBRATION_HINT = "# yaml-language-server: $schema=../../../schema/v1/calibration.schema.json"

CALIB_CONTENTION = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-contention.yaml"
CONTENTION_RUNS = [("peaks_contention.json", 2048), ("peaks_contention2.json", 2048),
                   ("peaks_contention3_step512.json", 512), ("peaks_contention3_step2048.json", 2048)]
CALIB_HELDOUT = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-heldout.yaml"
HELDOUT_IDS = {
    "qwen3-32b": "Qwen/Qwen3-32B",
    "mixtral-8x7b-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "phi-3-mini-4k-instruct": "microsoft/Phi-3-mini-4k-instruct",
    "qwen2.5-7b-instruct": "Qwen/Qwen2.5-7B-Instruct",
    "mistral-7b-v0.3": "mistralai/Mistral-7B-v0.3",
}
CALIB_HELDOUT2 = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-heldout2.yaml"
HELDOUT2_IDS = {
    "gemma-2-9b-it": "google/gemma-2-9b-it",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "llama-3.2-3b-instruct": "meta-llama/Llama-3.2-3B-Instruct",
    "smollm3-3b": "HuggingFaceTB/SmolLM3-3B",
}
CALIB_NEMOTRON = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-nemotron.yaml"
NEMOTRON_IDS = {"nemotron-h-56b-base-8k": "nvidia/Nemotron-H-56B-Base-8K"}
CALIB_NEVERUNDER = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-neverunder.yaml"
CALIB_S5 = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-dsa-s5.yaml"
CALIB_S5_HOG = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-gdn-contention.yaml"
CALIB_S6 = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s6.yaml"
CALIB_S6_HOG = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s6-contention.yaml"
CALIB_S7 = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s7.yaml"
CALIB_S7_HOG = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s7-contention.yaml"
CALIB_S8_STALL = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s8-stalled.yaml"
CALIB_S8_STALL_HOG = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s8-stalled-contention.yaml"
CALIB_S10_WARM = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s10-plans-warm.yaml"
CALIB_S10_WARM_STALL = ROOT / "profiles" / "calibration" / "cuda" / "h200-mlx-0.32.4-s10-plans-warm-stalled.yaml"
NEVERUNDER_IDS = {"deepseek-v3-8l-16e": "deepseek-ai/DeepSeek-V3 (first 8 layers, 16 experts)",
                  "deepseek-v3.2-8l-16e": "deepseek-ai/DeepSeek-V3.2 (first 8 layers, 16 experts)",
                  "qwen3-next-80b-a3b-8l-64e": "Qwen/Qwen3-Next-80B-A3B-Thinking (first 8 layers, 64 experts)",
                  "deepseek-v3-12l-16e": "deepseek-ai/DeepSeek-V3 (first 12 layers, 16 experts)",
                  "qwen3.5-27b-8l": "Qwen/Qwen3.5-27B (first 8 layers)",
                  "kimi-k2-8l-16e": "moonshotai/Kimi-K2-Instruct dims (first 8 layers, 16 experts)"}
HF_IDS = {
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "gemma-3-4b-it": "google/gemma-3-4b-it",
    "deepseek-v2-lite": "deepseek-ai/DeepSeek-V2-Lite",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "gemma-3-27b-it": "google/gemma-3-27b-it",
}
ORDER = list(HF_IDS)
# (file, prefill_step_size): step-2048 points come from two separate processes (a, b), 2 repeats each
RUNS = [("peaks_a.json", 2048), ("peaks_b.json", 2048), ("peaks_c_step512.json", 512), ("peaks_c_step4096.json", 4096)]


def load(runs=None):
    return {f: json.loads((RESULTS / f).read_text()) for f, _ in (runs or RUNS)}


def points(data, runs=None):
    """(model, step, tokens) -> list of (file, point)"""
    out = {}
    for f, step in (runs or RUNS):
        for m, rec in data[f]["models"].items():
            for p in rec.get("points", []):
                if "chunks" in p:
                    out.setdefault((m, step, p["tokens"]), []).append((f, p))
    return out


def calibration(data, runs=None, ids=None, heldout=False, contention=False):
    runs, ids = runs or RUNS, ids or HF_IDS
    pts = points(data, runs)
    meta = data[runs[0][0]]["meta"]
    lines = [
        CALIBRATION_HINT,
        "# Prefill peaks measured on a real MLX allocator (CUDA), for estimator tests.",
    ] + ([
        "# UNDER GPU CONTENTION: a second process (benchmarks/cuda/gpu_hog.py) ran 8192^3 bf16 matmuls on the",
        "# same GPU, so every kernel of the measured process took longer and its host ran further ahead: the",
        "# peaks an engine sees when it shares the GPU (run_chains.sh, run_conv_contention.sh, run_contention3.sh).",
    ] if contention else []) + ([
        "# HELD OUT: five models that were not used to build or tune the CUDA model; the estimates were",
        "# written to benchmarks/cuda/results/heldout_predictions_before_run.json before the device run.",
    ] if heldout else []) + [
        "# Generated by benchmarks/cuda/summarize.py from benchmarks/cuda/results/*.json",
        "# (measure_peaks.py; see benchmarks/cuda/README.md for the method and the term-by-term reading).",
        "#",
        "# peak_over_baseline: max over generate_step chunks of mx.get_peak_memory() minus the active memory",
        "#   after the weights were evaluated (gc + clear_cache), i.e. weights excluded, KV included.",
        "# Every repeat is listed: the estimate must cover the highest (warm-process repeats run higher).",
        "# Weights are random bf16 at real dims and real layer counts; nothing was downloaded.",
        "backend: cuda",
        f"device: {meta['device_info'].get('device_name')}",
        f"mlx: {meta['mlx']}",
        f"mlx_lm: {meta['mlx_lm']}",
        "dtype: bfloat16",
        "batch: 1",
        "cached_tokens: 0",
        "points:",
    ]
    for m in list(ids):
        for step in (512, 2048, 4096):
            for L in (8192, 32768, 65536):
                got = pts.get((m, step, L))
                if not got:
                    continue
                p0 = got[0][1]
                rec = data[got[0][0]]["models"][m]
                peaks = [p["peak_over_baseline"] for _, p in got]
                mt = max((p for _, p in got), key=lambda p: p["max_step_transient"])
                lines += [
                    f"  - model: {m}",
                    f"    hf_id: {ids[m]}",
                    f"    config: benchmarks/cuda/configs/{rec['config_file']}",
                    f"    model_type: {rec['model_type']}",
                    f"    prefill_step_size: {step}",
                    f"    tokens: {L}",
                    f"    kv_bytes: {p0['cache_nbytes']}",
                    f"    weights_bytes: {rec['weights_bytes']}",
                    f"    peak_over_baseline: [{', '.join(str(x) for x in peaks)}]",
                    f"    peak_over_baseline_max: {max(peaks)}",
                    f"    max_chunk_transient: {mt['max_step_transient']}",
                    f"    max_chunk_transient_at: [{mt['max_transient_step'][0]}, {mt['max_transient_step'][1]}]",
                    f"    last_token_transient_max: {max(p['last']['transient'] for _, p in got)}",
                    f"    source: [{', '.join(sorted({'benchmarks/cuda/results/' + f for f, _ in got}))}]",
                ]
    return "\n".join(lines) + "\n"


def tables(data):
    a, b = data["peaks_a.json"], data["peaks_b.json"]
    c4, c5 = data["peaks_c_step4096.json"], data["peaks_c_step512.json"]
    out = []
    w = out.append
    w("| model | weights GiB | tokens | KV bytes | peak over baseline GiB, per repeat (a0 a1 b0 b1) | max | max − KV | max per-chunk transient GiB | at chunk [start,end) | peak reached in chunk |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for m in ORDER:
        ra, rb = a["models"][m], b["models"][m]
        for L in (8192, 32768, 65536):
            ps = [p for p in ra["points"] + rb["points"] if p.get("tokens") == L and "chunks" in p]
            peaks = [p["peak_over_baseline"] for p in ps]
            mt = max(ps, key=lambda p: p["max_step_transient"])
            pk = max(ps, key=lambda p: p["peak_over_baseline"])
            kv = ps[0]["cache_nbytes"]
            w(
                f"| {m} | {ra['weights_bytes'] / G:.2f} | {L} | {kv:,} | {' '.join(f'{x / G:.3f}' for x in peaks)} "
                f"| **{max(peaks) / G:.3f}** | {(max(peaks) - kv) / G:.3f} | {mt['max_step_transient'] / G:.3f} "
                f"| {mt['max_transient_step_index']} [{mt['max_transient_step'][0]},{mt['max_transient_step'][1]}) "
                f"| {pk['peak_step_index']} [{pk['peak_step'][0]},{pk['peak_step'][1]}) |"
            )
    w("")
    w("| model | tokens | KV GiB | step 512: peak/base | step 512: max chunk transient | step 2048: peak/base (max of 4) | step 4096: peak/base | step 4096: max chunk transient |")
    w("|---|---|---|---|---|---|---|---|")
    for m in ORDER:
        for L in (8192, 32768, 65536):
            p5 = [p for p in c5["models"][m]["points"] if p.get("tokens") == L][0]
            p4 = [p for p in c4["models"][m]["points"] if p.get("tokens") == L][0]
            ps = [p for p in a["models"][m]["points"] + b["models"][m]["points"] if p.get("tokens") == L and "chunks" in p]
            w(
                f"| {m} | {L} | {p5['cache_nbytes'] / G:.3f} | {p5['peak_over_baseline'] / G:.3f} | {p5['max_step_transient'] / G:.3f} "
                f"| {max(p['peak_over_baseline'] for p in ps) / G:.3f} | {p4['peak_over_baseline'] / G:.3f} | {p4['max_step_transient'] / G:.3f} |"
            )
    w("")
    w("| layout | n_q/n_kv | Dk/Dv | kL | causal | bool array | additive array | none | route |")
    w("|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for r in a["sdpa"]:
        if r["window"]:
            continue
        key = (r["label"], r["n_q"], r["n_kv"], r["Dk"], r["Dv"], r["kL"], r["sinks"])
        rows.setdefault(key, {})[r["mask"]] = r

    def cell(r):
        return "err" if not r or r["transient_max"] is None else f"{r['transient_max'] / G:.3f} ({r['ratio_to_scores_bf16']:.3f})"

    for (lab, nq, nkv, dk, dv, kl, s), d in rows.items():
        route = "fused (cuDNN)" if dk <= 128 and dv <= 128 else "fallback"
        w(
            f"| {lab}{' +sinks' if s else ''} | {nq}/{nkv} | {dk}/{dv} | {kl} | {cell(d.get('causal'))} | {cell(d.get('bool'))} "
            f"| {cell(d.get('additive'))} | {cell(d.get('none'))} | {route} |"
        )
    w("")
    w("| layout | n_q/n_kv | D | window | kL | bool array | additive array |")
    w("|---|---|---|---|---|---|---|")
    sl = {}
    for r in a["sdpa"]:
        if r["window"]:
            sl.setdefault((r["label"], r["n_q"], r["n_kv"], r["Dk"], r["window"], r["kL"], r["sinks"]), {})[r["mask"]] = r
    for (lab, nq, nkv, d_, win, kl, s), d in sl.items():
        w(f"| {lab}{' +sinks' if s else ''} | {nq}/{nkv} | {d_} | {win} | {kl} | {cell(d['bool'])} | {cell(d['additive'])} |")
    w("")
    w("| model | block | class | cache | transient MiB (max of 2) |")
    w("|---|---|---|---|---|")
    for m in ORDER:
        for bl in a["models"][m].get("blocks", []):
            if "transient_max" in bl:
                w(f"| {m} | {bl['block']} | {bl['class']} | {bl.get('cache', '')} | {bl['transient_max'] / 2**20:.1f} |")
    return "\n".join(out)


HELDOUT2_HEADER = [
    "# HELD OUT (check 2, session 3): four models not used to build or tune the CUDA model; the estimates and",
    "# the replayed CUDA graph counts were committed first (results/heldout2_predictions_before_run.json).",
    "# Measured with benchmarks/cuda/probe_commits.py --warmup 64 (run_heldout2.sh): every graph launch traced;",
    "# each model got one 64-token prefill right after loading, as an engine should (README 'Traced commits').",
]
NEMOTRON_HEADER = [
    "# Nemotron-H-56B (Mamba2 hybrid) at real dims (session 3, run_nemotron.sh; predictions committed first:",
    "# results/nemotron_predictions_before_run.json). The estimator's per-block Mamba2 aggregate gave 0.72-0.76",
    "# of the step-2048 peaks; ssm_attn itemized op by op with final-state holds 1.10 / 1.13, but 0.85-0.90 at",
    "# steps 1024 / 4096 (predicted before measuring): so on CUDA the peak of Mamba2 layers is reported as",
    "# unknown (transient.unverified_peak); tests check that.",
]


NEVERUNDER_HEADER = [
    "# Issue 14 (session 4, run_neverunder.sh; predictions committed first: results/neverunder_predictions_before_run.json).",
    "# CUT TO FIT ONE H200: real attention widths, but only the first 8 layers and fewer routed experts:",
    "#   deepseek-v3-8l-16e / deepseek-v3.2-8l-16e: 8 of 61 layers (3 dense + 5 MoE), 16 of 256 routed experts (top-8);",
    "#   qwen3-next-80b-a3b-8l-64e: 8 of 48 layers (6 gated-DeltaNet + 2 full attention), 64 of 512 experts (top-10);",
    "#   deepseek-v3-12l-16e: 12 of 61 layers (3 dense + 9 MoE), 16 of 256 experts (run 2);",
    "#   qwen3.5-27b-8l: 8 of 64 layers (6 gated-DeltaNet + 2 full attention; run 2, held out).",
    "#   kimi-k2-8l-16e: Kimi-K2 dims (64 heads, 1 dense layer), 8 of 61 layers, 16 of 384 experts (run 3, held out).",
    "# Run 2 / 3 points (commits_*b/c.json, commits_kimi.json) were predicted before measuring:",
    "#   results/neverunder2_predictions_before_run.json, results/neverunder3_predictions_before_run.json.",
    "# The configs in benchmarks/cuda/configs/ are the cut ones; the estimator is checked on exactly those.",
    "# Traced prefill (probe_commits.py) after a 64-token warm-up, one repeat per point.",
]


S5_HEADER = [
    "# Issue 14 (session 5, run_s5.sh; predictions committed first: benchmarks/cuda/predictions-s5.md,",
    "#   results/s5_predictions_before_run.json). CUT TO FIT ONE H200 as in h200-mlx-0.32.4-neverunder.yaml:",
    "#   deepseek-v3.2-8l-16e: 8 of 61 layers (3 dense + 5 MoE), 16 of 256 routed experts (top-8); idle GPU.",
    "#   The 8k / 32k step-2048 points repeat session 4's (same peaks to 0.1 MiB); 16k / step 1024 and 8k / step 4096",
    "#   are new (predicted before measuring).",
]
S5_HOG_HEADER = [
    "# Issue 14 (session 5, run_s5.sh; predictions committed first: benchmarks/cuda/predictions-s5.md).",
    "# MEASURED UNDER GPU CONTENTION: gpu_hog.py (8192^3 bf16 matmuls) ran in a second process on the same H200",
    "#   the whole time, so the measured process's host ran further ahead of its GPU (11 graphs in flight in every",
    "#   chunk, against 8-11 idle). CUT TO FIT as in h200-mlx-0.32.4-neverunder.yaml: qwen3-next-80b-a3b-8l-64e",
    "#   (8 of 48 layers: 6 gated-DeltaNet + 2 full attention, 64 of 512 experts), qwen3.5-27b-8l (8 of 64 layers).",
]


S6_HEADER = [
    "# Issue 14 (session 6, run_s6a.sh then run_s6b.sh's idle part; predictions committed first:",
    "#   benchmarks/cuda/predictions-s6.md, results/s6_predictions_before_run.json). Idle GPU.",
    "# CUT TO FIT ONE H200: real attention widths, but only the first 8 layers and fewer routed experts:",
    "#   deepseek-v3-8l-16e / deepseek-v3.2-8l-16e: 8 of 61 layers (3 dense + 5 MoE), 16 of 256 routed experts (top-8);",
    "#   kimi-k2-8l-16e: Kimi-K2 dims (64 heads, 1 dense layer), 8 of 61 layers, 16 of 384 experts;",
    "#   qwen3-next-80b-a3b-8l-64e: 8 of 48 layers (6 gated-DeltaNet + 2 full attention), 64 of 512 experts (top-10);",
    "#   qwen3.5-27b-8l: 8 of 64 layers (6 gated-DeltaNet + 2 full attention).",
    "# DeepSeek-V3 / V3.2 / Qwen points repeat earlier sessions' (same configs); Kimi-K2 step 512 at 8k / 32k and",
    "#   64k / step 2048 are new. 64k at step 2048 does not fit for DeepSeek-V3 (op model ~190 GiB at 128 heads).",
]
S6_HOG_HEADER = [
    "# Issue 14 (session 6, run_s6b.sh; predictions committed first: benchmarks/cuda/predictions-s6.md).",
    "# MEASURED UNDER GPU CONTENTION: gpu_hog.py (8192^3 bf16 matmuls) ran in a second process on the same H200",
    "#   the whole time, so the measured process's host ran up to MLX's cap ahead of its GPU (11 graphs in flight).",
    "# CUT TO FIT as in h200-mlx-0.32.4-s6.yaml (qwen3-next-80b-a3b-8l-64e, qwen3.5-27b-8l, deepseek-v3-8l-16e).",
]
S7_HEADER = [
    "# Issue 14 (session 7, s7-mla: run_s7mla.sh's idle part; predictions committed first:",
    "#   benchmarks/cuda/predictions-s7-mla.md, results/s7mla_predictions_before_run.json). Idle GPU.",
    "# CUT TO FIT as in h200-mlx-0.32.4-s6.yaml (deepseek-v3-8l-16e, kimi-k2-8l-16e). Two repeats in one process where",
    "#   the first meets a shape for the first time: 8192 tokens end with a 2047-token chunk, and on its first",
    "#   occurrence the host stops at the first MoE layer while the GPU drains (the compiled router retraces), so the",
    "#   first repeat is lower (19.84 vs 27.93 GiB at step 2048); the second is the warm server's case.",
]
S7_HOG_HEADER = [
    "# Issue 14 (session 7, s7-mla: run_s7mla.sh's loaded part; predictions committed first:",
    "#   benchmarks/cuda/predictions-s7-mla.md). MEASURED UNDER GPU CONTENTION: gpu_hog.py (8192^3 bf16 matmuls) ran",
    "#   in a second process on the same H200 the whole time. CUT TO FIT as in h200-mlx-0.32.4-s6.yaml",
    "#   (kimi-k2-8l-16e, deepseek-v3-8l-16e, deepseek-v3.2-8l-16e, qwen3-next-80b-a3b-8l-64e).",
]
S8_HEADER = [
    "# Issue 14 (session 8, s8-mla: run_s8mla.sh's first part and run_s8mla2.sh; predictions committed first:",
    "#   benchmarks/cuda/predictions-s8-mla.md, results/s8mla_predictions_before_run.json).",
    "# MEASURED STALLED (benchmarks/cuda/stall.py): on the measured stream, a custom CUDA kernel that spins on the GPU",
    "#   timer (5-10 ms) before every RMSNorm of a decoder layer and every 8th gated-DeltaNet token step, so the host",
    "#   runs up to MLX's 11-graph cap ahead of the GPU (an engine whose GPU is busy with other work); run 2 also",
    "#   spins 500 ms (200 ms at step 512) before each chunk's first layer. The stall kernels' outputs (a copy of a",
    "#   norm weight or a gate slice) are in the peaks: at most 0.5 MiB per chunk (stall_bytes_bound in the JSON).",
    "# CUT TO FIT as in h200-mlx-0.32.4-s6.yaml (kimi-k2-8l-16e, deepseek-v3-8l-16e, deepseek-v3-12l-16e,",
    "#   deepseek-v3.2-8l-16e, qwen3-next-80b-a3b-8l-64e, qwen3.5-27b-8l).",
]
S8_HOG_HEADER = [
    "# Issue 14 (session 8, s8-mla: run_s8mla.sh's second part; predictions committed first:",
    "#   benchmarks/cuda/predictions-s8-mla.md). STALLED (as h200-mlx-0.32.4-s8-stalled.yaml) AND UNDER GPU CONTENTION:",
    "#   two gpu_hog.py processes (8192^3 bf16 matmuls) on the same H200 the whole time: the shapes still above 1.15",
    "#   after the stalled pass. CUT TO FIT as in h200-mlx-0.32.4-s6.yaml (kimi-k2-8l-16e, qwen3-next-80b-a3b-8l-64e).",
]
S10_COMMON = [
    "# Issue 14 (session 10, s10-mla: run_s10mla.sh twice, probe_plans_warm.py; predictions committed before each run:",
    "#   benchmarks/cuda/predictions-s10-mla.md, results/s10mla_predictions_before_run.json).",
    "# PLANS WARM: each prompt was first run once in the same process (every chunk shape's cuDNN SDPA plan, compiled",
    "#   router and kernel built: the 'first' run, not listed here), then measured again: the steady state of an engine",
    "#   that has served prompts of this length before. (Session 9: building a cuDNN plan for a new shape blocks the",
    "#   host; the traces here show the host waiting for the GPU wherever something is built for a shape first met.)",
]
S10_WARM_HEADER = S10_COMMON + [
    "# Idle GPU, no stalls (condition 'warm' in the JSON).",
    "# CUT TO FIT as in h200-mlx-0.32.4-s6.yaml (kimi-k2-8l-16e, qwen3-next-80b-a3b-8l-64e, deepseek-v3-8l-16e).",
]
S10_WARM_STALL_HEADER = S10_COMMON + [
    "# AND STALLED (stall.py, as h200-mlx-0.32.4-s8-stalled.yaml: a spin kernel before every RMSNorm of a layer, 5-10 ms,",
    "#   100-200 ms at each chunk's first layer, every 8th gated-DeltaNet step 2 ms; 'warm_stalled' in the JSON), and for",
    "#   'warm_stalled_attn' also a spin right before every attention's SDPA (20 ms in run 1, 100 ms in run 2; 5 ms at",
    "#   step 512), the queries made to depend on it with mx.depends (no copy): the GPU then holds layer 0's score",
    "#   matrix (its SDPA's mask) while the host encodes the 12th graph, the window the estimate bounds. Stall bytes: at",
    "#   most 0.5 MiB per chunk (stall_bytes_bound in the JSON).",
    "# CUT TO FIT as in h200-mlx-0.32.4-s6.yaml (kimi-k2-8l-16e, qwen3-next-80b-a3b-8l-64e, deepseek-v3-8l-16e).",
]


def traced_calibration(results: str, ids: dict, header: list[str], conditions: frozenset | None = None) -> str:
    """Calibration points from probe_commits.py's traced prefill (after a 64-token warm-up); its chunk peaks
    are recorded in MiB to 0.1 (so each peak here is exact to +-52 KB). ``results``: one or more files
    (comma-separated); points of depth-truncated models (``layers``) are left out."""
    data = {"mlx": None, "points": []}
    for name in results.split(","):
        d = json.loads((RESULTS / name).read_text())
        data["mlx"] = data["mlx"] or d["mlx"]
        data["points"] += [dict(pt, _file=name) for pt in d.get("points", []) if not pt.get("layers")
                           and (conditions is None or pt.get("condition") in conditions)]
    lines = [
        CALIBRATION_HINT,
        "# Prefill peaks measured on a real MLX allocator (CUDA), for estimator tests.",
    ] + header + [
        "# peak_over_baseline: max over the chunks of mx.get_peak_memory() minus the active memory after the",
        "#   weights were evaluated, from the trace's MiB figures (0.1 MiB resolution). Every repeat is listed.",
        "backend: cuda",
        "device: NVIDIA H200",
        f"mlx: {data['mlx']}",
        "dtype: bfloat16",
        "batch: 1",
        "cached_tokens: 0",
        "points:",
    ]
    got: dict = {}
    for pt in data["points"]:
        got.setdefault((pt["model"], pt["step"], pt["tokens"]), []).append(pt)
    for (m, step, L), pts in got.items():
        peaks = [round(p["peak_over_baseline_mib"] * 2**20) for p in pts]
        lines += [
            f"  - model: {m}",
            f"    hf_id: {ids[m]}",
            f"    config: benchmarks/cuda/configs/{m}.json",
            f"    prefill_step_size: {step}",
            f"    tokens: {L}",
            f"    peak_over_baseline: [{', '.join(str(x) for x in peaks)}]",
            f"    peak_over_baseline_max: {max(peaks)}",
            f"    graphs_per_chunk: [{', '.join(str(c['n_launch']) for c in pts[0]['chunks'])}]",
            f"    most_in_flight: {max(c['most_in_flight_at_launch'] for p in pts for c in p['chunks'])}",
            "    source: [" + ", ".join(dict.fromkeys(f"benchmarks/cuda/results/{p['_file']}" for p in pts)) + "]",
        ]
    return "\n".join(lines) + "\n"


# The DeepSeek-family / GDN traced sessions: for each flag, the calibration files it writes, from which traces,
# under which header (idle and loaded / stalled runs go to separate files).
TRACED_SESSIONS = {
    "s10": ((CALIB_S10_WARM, "commits_s10warm.json,commits_s10warm2.json", S10_WARM_HEADER, frozenset({"warm"})),
            (CALIB_S10_WARM_STALL, "commits_s10warm.json,commits_s10warm2.json", S10_WARM_STALL_HEADER,
             frozenset({"warm_stalled", "warm_stalled_attn"}))),
    "s8": ((CALIB_S8_STALL, "commits_s8stall.json,commits_s8stall2.json", S8_HEADER),
           (CALIB_S8_STALL_HOG, "commits_s8stallhog.json", S8_HOG_HEADER)),
    "s7": ((CALIB_S7, "commits_s7idle.json", S7_HEADER),
           (CALIB_S7_HOG, "commits_s7hog.json", S7_HOG_HEADER)),
    "s6": ((CALIB_S6, "commits_dsv3s6.json,commits_kimis6.json,commits_dsv32s6.json,commits_gdns6.json", S6_HEADER),
           (CALIB_S6_HOG, "commits_gdnhogs6.json,commits_dsv3hogs6.json", S6_HOG_HEADER)),
    "s5": ((CALIB_S5, "commits_dsv32s5.json", S5_HEADER),
           (CALIB_S5_HOG, "commits_gdnhog.json", S5_HOG_HEADER)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", action="store_true")
    ap.add_argument("--heldout", action="store_true")
    ap.add_argument("--contention", action="store_true")
    ap.add_argument("--heldout2", action="store_true")
    ap.add_argument("--nemotron", action="store_true")
    ap.add_argument("--neverunder", action="store_true")
    ap.add_argument("--s5", action="store_true", help="session 5 (issue 14): DSA idle + gated-DeltaNet contended")
    ap.add_argument("--s6", action="store_true", help="session 6 (issue 14): DeepSeek-V3 family + GDN, idle and loaded")
    ap.add_argument("--s7", action="store_true", help="session 7 (issue 14, s7-mla): DeepSeek-V3 family, warm repeats")
    ap.add_argument("--s8", action="store_true", help="session 8 (issue 14, s8-mla): the stalled condition")
    ap.add_argument("--s10", action="store_true", help="session 10 (issue 14, s10-mla): plans warm, idle and stalled")
    args = ap.parse_args()
    sessions = [s for s in TRACED_SESSIONS if getattr(args, s)]
    if sessions:
        for path, res, head, *keep in TRACED_SESSIONS[sessions[0]]:
            path.write_text(traced_calibration(res, NEVERUNDER_IDS, head, *keep))
            print("wrote", path.relative_to(ROOT))
        return
    if args.neverunder:
        CALIB_NEVERUNDER.write_text(traced_calibration("commits_dsv3.json,commits_dsv32.json,commits_gdn.json,"
                                                       "commits_dsv3b.json,commits_dsv3c.json,commits_gdnb.json,commits_kimi.json",
                                                       NEVERUNDER_IDS, NEVERUNDER_HEADER))
        print("wrote", CALIB_NEVERUNDER.relative_to(ROOT))
        return
    if args.heldout2 or args.nemotron:
        path, res, ids, head = ((CALIB_HELDOUT2, "commits_heldout2.json", HELDOUT2_IDS, HELDOUT2_HEADER) if args.heldout2
                                else (CALIB_NEMOTRON, "commits_nemotron.json,commits_nemotron_steps.json", NEMOTRON_IDS,
                                      NEMOTRON_HEADER))
        path.write_text(traced_calibration(res, ids, head))
        print("wrote", path.relative_to(ROOT))
        return
    if args.contention:
        CALIB_CONTENTION.write_text(calibration(load(CONTENTION_RUNS), CONTENTION_RUNS, {**HF_IDS, **HELDOUT_IDS},
                                                contention=True))
        print("wrote", CALIB_CONTENTION.relative_to(ROOT))
        return
    if args.heldout:
        runs = [("peaks_heldout.json", 2048)]
        CALIB_HELDOUT.write_text(calibration(load(runs), runs, HELDOUT_IDS, heldout=True))
        print("wrote", CALIB_HELDOUT.relative_to(ROOT))
        return
    data = load()
    CALIB.parent.mkdir(parents=True, exist_ok=True)
    CALIB.write_text(calibration(data))
    print("wrote", CALIB.relative_to(ROOT))
    if args.tables:
        print(tables(data))


if __name__ == "__main__":
    main()
