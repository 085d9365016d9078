"""Replay vs the traced launches of the session-7 rank-shaped Llama prefill (donation_s7_prefill_*.json).

For every chunk: the replayed graph count vs the traced one, and at every traced launch (n graphs in flight)
the replay's bytes over the same n graphs vs MLX's active memory at that launch (over the chunk's start). Also
the op-model peak of the point vs the measured peak. usage: check_s7_prefill.py [file ...]"""
import json
import sys
from pathlib import Path

from omlx_profiles.estimate.calibration import profile_for_config
from omlx_profiles.peak.executor import _Live, graph_ends, split_ops
from omlx_profiles.peak.kernels import KernelRoutes
from omlx_profiles.peak.prefill import Request, call_items, prefill_peak

R = Path(__file__).resolve().parent / "results"
MiB = 2**20


def rank_profile():
    cfg = json.loads((R.parent / "configs" / "llama-3.1-8b.json").read_text())
    cfg.update(num_attention_heads=16, num_key_value_heads=4, intermediate_size=7168, head_dim=128)
    return profile_for_config(cfg, "bf16")


def main(files):
    cap = KernelRoutes.for_backend("cuda", "0.32.4").executor.graph_commit
    p = rank_profile()
    worst = 9.0
    for fn in files:
        d = json.loads((R / fn).read_text())
        for pt in d["prefill"]:
            T, step = pt["tokens"], pt["step"]
            est = prefill_peak(p, Request(T, chunk=step), backend="cuda", mlx_version="0.32.4", dtype="bf16",
                               apply_basis=False).peak_bytes
            meas = pt["peak_over_baseline_mib"] * MiB
            low = 9.0
            for ci, ch in enumerate(pt["chunks"]):
                items = split_ops(call_items(p, Request(T, chunk=step), ci, backend="cuda", mlx_version="0.32.4"))
                ends = graph_ends(items, cap.max_nodes, cap.max_mega_elements, 2)
                live = _Live(items, 1, 0)
                starts = [0.0] + ends[:-1]
                for g, (_, mem, n, _nodes) in enumerate(ch["launches"]):
                    if g >= len(ends) or mem < 256:
                        continue
                    rep = live.sum(starts[max(0, g - n + 1)], ends[g]) / MiB
                    low = min(low, rep / mem)
            worst = min(worst, low)
            print(f"{fn} {T} rep {pt['repeat']}: est {est / 2**30:.3f} GiB, measured {meas / 2**30:.3f} -> "
                  f"{est / meas:.3f}; graphs replayed/traced per chunk "
                  + " ".join(f"{len(graph_ends(split_ops(call_items(p, Request(T, chunk=step), i, backend='cuda', mlx_version='0.32.4')), cap.max_nodes, cap.max_mega_elements, 2))}/{c['n_launch']}"
                             for i, c in enumerate(pt["chunks"][:3]))
                  + f" ...; lowest replay/traced at a launch {low:.3f}")
    print(f"lowest replay/traced over all launches: {worst:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["donation_s7_prefill_idle.json", "donation_s7_prefill_hog.json"])
