"""The CUDA graph-commit model (transient.graph_ends / graph_window_max) against H200 measurements.

* Chains of matmuls (benchmarks/cuda/probe_graphs.py, results/graphs_default.json): the number of live
  outputs at the peak must be what the commit rules predict with the exact cap of 10 graphs in flight
  (no margin) — where the GPU is slower than the host. The chain whose ops are so short that the GPU keeps
  up must come out below the cap (the model is an upper bound there).
* Chains of one SDPA (or one MoE block) per step (probe_chains.py, results/chains_*.json): the fallback
  route (D 192 / 256, causal) must match to 2%, fused causal to 5%, MoE blocks within [1.00, 1.15]; the
  bool-mask conversion (short kernels: the GPU nearly keeps up, runs differ by 15%) within [0.90, 1.75].
* Real models with MLX_MAX_OPS_PER_BUFFER=1 (results/peaks_e_ops1*.json): every graph holds one or two
  ops, so the live set is a few ops: this checks the per-op bytes of the item lists on CUDA.
* Real models with MLX_MAX_MB_PER_BUFFER=100000 (results/peaks_e_nodes.json): graphs end on node
  counts only; the estimate must not fall below the measurement.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from omlx_profiles.peak import transient as T
from omlx_profiles.peak.calibration import calibration_files, load_calibration, profile_for_point
from omlx_profiles.peak.prefill import Request, prefill_peak
from omlx_profiles.peak.routes import KernelRoutes, SdpaCall

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "cuda" / "results"
CAP = KernelRoutes.for_backend("cuda", "0.32.4").executor.graph_commit


def _chain_live(M: int, K: int, n_ops: int, inflight: int) -> float:
    out = M * K * 2
    items = [T.Item("matmul", out, 1, elems=M * K + K * K) for _ in range(n_ops)]
    live, _ = T.graph_window_max(items, CAP.max_nodes, CAP.max_mega_elements, inflight, 2)
    # the window includes the input of the oldest graph's first op (the previous graph's last output, held
    # as that op's temporary): the item before the window is "carried"
    return live / out


def _chains():
    data = json.loads((RESULTS / "graphs_default.json").read_text())
    return [c for c in data["cases"] if c["case"] == "matmul"]


@pytest.mark.parametrize("case", _chains(), ids=lambda c: f"{c['M']}x{c['K']}")
def test_matmul_chain_live_outputs(case):
    measured = max(case["rep0"]["live_outputs"], case["rep1"]["live_outputs"])
    predicted = _chain_live(case["M"], case["K"], case["n_ops"], CAP.max_inflight_graphs)
    gpu_bound = case["M"] * case["K"] >= 2048 * 8192  # each op takes the GPU longer than the host needs
    if gpu_bound:
        assert predicted == pytest.approx(measured, abs=0.5), (predicted, measured)
    else:
        assert predicted >= measured, (predicted, measured)


def test_graph_limits_are_the_sources():
    assert (CAP.max_nodes, CAP.max_mega_elements, CAP.max_inflight_graphs) == (100, 1000, 10)


def test_graph_ends_follow_both_rules():
    # 101 one-node ops with tiny inputs: the node rule ends the graph after op 101
    items = [T.Item("x", 1, 1, elems=1) for _ in range(250)]
    assert T.graph_ends(items, 100, 1000, 2)[:2] == [101, 202]
    # inputs of 600 Mi-elements: the element rule ends every second op
    big = [T.Item("x", 1, 1, elems=600 << 20) for _ in range(6)]
    assert T.graph_ends(big, 100, 1000, 2) == [2, 4, 6]
    # per-op elements in a tuple: only the op that crosses the limit ends the graph
    mixed = [T.Item("x", 1, 3, elems=(10, 2000 << 20, 10))]
    assert T.graph_ends(mixed, 100, 1000, 2) == [2, 3]


def _sdpa_chains():
    out = []
    for name in ("chains_default.json", "chains_conv.json", "chains_conv_contention.json"):
        for c in json.loads((RESULTS / name).read_text())["cases"]:
            if "n_q" in c:
                out.append(pytest.param(c, id=f"{name[7:-5]}:{c['case']}"))
    return out


@pytest.mark.parametrize("c", _sdpa_chains())
def test_sdpa_chain(c):
    kr = KernelRoutes.for_backend("cuda", "0.32.4")
    ctx = T.CallContext(q_len=c["S"], offset=0, act=2, dtype="bf16", routes=kr, tiled={})
    call = SdpaCall(c["n_q"], c["n_kv"], c["D"], c["D"], c["S"], c["kL"], c["mask"], c["sinks"], "bf16", False)
    # one step: the SDPA, then x + out (in place: out is donated)
    step = T._sdpa(ctx, call, family="chain") + [T.Item("add", 0, 1, elems=2 * c["n_q"] * c["S"] * c["D"])]
    est, _ = T.graph_window_max(step * c["steps"], CAP.max_nodes, CAP.max_mega_elements, CAP.max_inflight_graphs, 2)
    measured = max(c["rep0"]["peak"], c["rep1"]["peak"])
    route = kr.route(call, {}).route
    if route == "fallback":
        assert 0.98 <= est / measured <= 1.02, (est, measured)
    elif call.mask == "bool":
        # the conversion's kernels are short: alone, the GPU nearly keeps up (the same chain measured 11.9
        # and 13.6 GB in two runs); with a second process loading the GPU (contention) the host reaches the
        # cap and the model is 0.92 (S 4096) - 1.24 (gemma-3-27b-like) of it; alone up to 1.6
        assert 0.9 <= est / measured <= 1.75, (est, measured)
    else:  # fused, causal: only the outputs
        assert 0.95 <= est / measured <= 1.05, (est, measured)


def _moe_chains():
    return [pytest.param(c, m, id=m) for c, m in zip(
        [c for c in json.loads((RESULTS / "chains_default.json").read_text())["cases"] if "E" in c],
        ["deepseek-v2-lite", "qwen3-30b-a3b"])]


@pytest.mark.parametrize("c,model", _moe_chains())
def test_moe_chain(c, model):
    if model not in _PROFS:
        _PROFS[model] = profile_for_point(_profiles()[model])
    kr = KernelRoutes.for_backend("cuda", "0.32.4")
    ctx = T.CallContext(q_len=c["S"], offset=0, act=2, dtype="bf16", routes=kr, tiled={})
    step = [it for it in T._mlp(_PROFS[model], ctx, moe=True) if it.term not in ("rms_norm", "moe.shared_expert")]
    est, _ = T.graph_window_max(step * c["steps"], CAP.max_nodes, CAP.max_mega_elements, CAP.max_inflight_graphs, 2)
    measured = max(c["rep0"]["peak"], c["rep1"]["peak"])
    assert 1.0 <= est / measured <= 1.15, (est, measured)


def _profiles():
    f = load_calibration(next(p for p in calibration_files("cuda") if p.name == "h200-mlx-0.32.4.yaml"))
    out = {}
    for pt in f.points:
        out.setdefault(pt.model, pt)
    return out


_PROFS: dict = {}


def _estimate(model: str, tokens: int, step: int, *, op_window: bool = True, **cap) -> int:
    if model not in _PROFS:
        _PROFS[model] = profile_for_point(_profiles()[model])
    kr = copy.deepcopy(KernelRoutes.for_backend("cuda", "0.32.4"))
    ex = kr.executor
    if not op_window:  # the time bound was measured with the default limits only
        object.__setattr__(ex, "inflight_ops_by_chunk", [])
        object.__setattr__(ex, "inflight_ops", 1 << 30)
    gc = ex.graph_commit
    for k, v in cap.items():
        object.__setattr__(gc, k, v)
    return prefill_peak(_PROFS[model], Request(tokens, chunk=step), routes=kr).peak_bytes


def _variant_points(name):
    data = json.loads((RESULTS / name).read_text())
    out = []
    for model, v in data["models"].items():
        for p in v["points"]:
            if "peak_over_baseline" in p:
                out.append(pytest.param(model, p, id=f"{model}:{p['tokens']}"))
    return out


@pytest.mark.parametrize("model,p", _variant_points("peaks_e_ops1.json") + _variant_points("peaks_e_ops1_long.json"))
def test_one_op_graphs_match_item_bytes(model, p):
    """MLX_MAX_OPS_PER_BUFFER=1: the window is one or two ops per graph; measured 0.976-1.06 on the H200
    (8k for six models, 32k for DeepSeek-V2-Lite, gpt-oss-20b and gemma-3-4b, 64k for Qwen3-30B)."""
    est = _estimate(model, p["tokens"], p["prefill_step_size"], max_nodes=1, margin_graphs=0)
    assert 0.95 <= est / p["peak_over_baseline"] <= 1.10, (est, p["peak_over_baseline"])


@pytest.mark.parametrize("model,p", _variant_points("peaks_e_nodes.json"))
def test_node_only_graphs_never_under(model, p):
    """MLX_MAX_MB_PER_BUFFER=100000: graphs of 100 nodes; the whole chunk can be in flight (the op-window
    bound of the kernel table was measured with the default limits, so it is not applied here)."""
    est = _estimate(model, p["tokens"], p["prefill_step_size"], op_window=False, max_mega_elements=100000)
    assert 1.0 <= est / p["peak_over_baseline"] <= 2.0, (est, p["peak_over_baseline"])
