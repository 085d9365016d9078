"""The CUDA graph-commit model (peak.executor.graph_ends / graph_window_max) against H200 measurements.

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
* Traced commits (probe_commits.py with commit_trace.so: every cuGraphLaunch MLX makes, with the active
  memory and the graphs still in flight): the element meter's chains (results/commits_meter.json) must
  commit exactly as many graphs as the model replays; every warm prefill chunk of six models
  (commits_trace*.json, commits_warm*.json, commits_cold_qwen3.json; four held-out models,
  commits_heldout2.json) within one graph of it (the first
  call of a process is the exception: more, smaller graphs, more than 11 in flight), and a 64-token
  warm-up right after loading must remove that first-call excess.
"""
from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from omlx_profiles.errors import UnsupportedError
from omlx_profiles.peak.executor import graph_ends, graph_window_max, split_ops
from omlx_profiles.peak.ops.attention import sdpa_items
from omlx_profiles.peak.ops.items import CallContext, Item, fast_op
from omlx_profiles.peak.ops.mlp import mlp_items
from omlx_profiles.estimate.calibration import calibration_files, load_calibration, profile_for_config, profile_for_point
from omlx_profiles.peak.prefill import Request, call_items, prefill_peak
from omlx_profiles.peak.kernels import KernelRoutes, SdpaCall

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "cuda" / "results"
CAP = KernelRoutes.for_backend("cuda", "0.32.4").executor.graph_commit


def _chain_live(M: int, K: int, n_ops: int, inflight: int) -> float:
    out = M * K * 2
    items = [Item("matmul", out, 1, elems=M * K + K * K) for _ in range(n_ops)]
    live, _ = graph_window_max(items, CAP.max_nodes, CAP.max_mega_elements, inflight, 2)
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
    items = [Item("x", 1, 1, elems=1) for _ in range(250)]
    assert graph_ends(items, 100, 1000, 2)[:2] == [101, 202]
    # inputs of 600 Mi-elements: the element rule ends every second op
    big = [Item("x", 1, 1, elems=600 << 20) for _ in range(6)]
    assert graph_ends(big, 100, 1000, 2) == [2, 4, 6]
    # per-op elements in a tuple: only the op that crosses the limit ends the graph
    mixed = [Item("x", 1, 3, elems=(10, 2000 << 20, 10))]
    assert graph_ends(mixed, 100, 1000, 2) == [2, 3]


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
    ctx = CallContext(q_len=c["S"], offset=0, act=2, dtype="bf16", routes=kr, tiled={})
    call = SdpaCall(c["n_q"], c["n_kv"], c["D"], c["D"], c["S"], c["kL"], c["mask"], c["sinks"], "bf16", False)
    # one step: the SDPA, then x + out (in place: out is donated)
    step = sdpa_items(ctx, call, family="chain") + [Item("add", 0, 1, elems=2 * c["n_q"] * c["S"] * c["D"])]
    est, _ = graph_window_max(step * c["steps"], CAP.max_nodes, CAP.max_mega_elements, CAP.max_inflight_graphs, 2)
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
    ctx = CallContext(q_len=c["S"], offset=0, act=2, dtype="bf16", routes=kr, tiled={})
    step = [it for it in mlp_items(_PROFS[model], ctx, moe=True) if it.term not in ("rms_norm", "moe.shared_expert")]
    est, _ = graph_window_max(step * c["steps"], CAP.max_nodes, CAP.max_mega_elements, CAP.max_inflight_graphs, 2)
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
    return prefill_peak(_PROFS[model], Request(tokens, chunk=step), routes=kr, apply_basis=False).peak_bytes


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


# --------------------------------------------------------------------------------------------------
# traced commits (benchmarks/cuda/probe_commits.py + commit_trace.c)

def _meter_cases():
    data = json.loads((RESULTS / "commits_meter.json").read_text())
    return [pytest.param(c, id=c["case"][:40]) for c in data["meter"]]


def _meter_items(case: str) -> list[Item]:
    """The model's items for one block of the meter chain named ``case`` (probe_commits.meter)."""
    kr = KernelRoutes.for_backend("cuda", "0.32.4")
    ctx = CallContext(q_len=2048, offset=0, act=2, dtype="bf16", routes=kr, tiled={})
    S, I = 2048, 21504
    if case.startswith(("gemma MLP", "llama MLP")):
        gemma = profile_for_point(_profiles()["gemma-3-27b-it"])  # hidden 5376, intermediate 21504
        prof = gemma if case.startswith("gemma") else dataclasses.replace(gemma, mlx_model_type="llama")
        return [it for it in mlp_items(prof, ctx, moe=False) if it.term == "mlp"]
    if case.startswith("gelu_approx(y) * u"):  # the gemma MLP's middle ops
        gemma = profile_for_point(_profiles()["gemma-3-27b-it"])
        mlp = next(it for it in mlp_items(gemma, ctx, moe=False) if it.term == "mlp")
        # the product writes into gelu's buffer: that buffer is the block's output, read by the next block
        return [Item("gelu", mlp.op_bytes[2], 1, nodes=2, elems=mlp.elems[2]),
                Item("mul", mlp.op_bytes[3], 1, out=mlp.op_bytes[2], elems=mlp.elems[3])]
    if case.startswith("gelu_approx(y)"):
        gemma = profile_for_point(_profiles()["gemma-3-27b-it"])
        mlp = next(it for it in mlp_items(gemma, ctx, moe=False) if it.term == "mlp")
        return [Item("gelu", mlp.op_bytes[2], 1, nodes=2, elems=mlp.elems[2])]
    if case.startswith(("y * u", "swiglu")):  # in place (the chain's y is single-use), two operands
        return [Item("mul", 0, 1, out=2 * S * I, elems=2 * S * I)]
    if case.startswith("rms_norm"):  # (1, 2048, 32, 128): one fused kernel per op (the chain's views stay contiguous)
        return [fast_op(ctx, "rms_norm", S * 32 * 128 * 2, weight=128)]
    if case.startswith("sdpa"):
        if "additive" in case:  # a (2048, 3071) bf16 mask read as it is (no conversion)
            n_q, n_kv, D, kL = 32, 16, 128, 3071
            return [Item("sdpa.fused_out", n_q * S * D * 2, 1, elems=n_q * S * D + 2 * n_kv * kL * D + S * kL)]
        if "fallback" in case:
            call = SdpaCall(8, 4, 256, 256, S, 8192, "causal", False, "bf16", False)
        else:
            call = SdpaCall(32, 16, 128, 128, S, 3071, "bool" if "bool" in case else "causal", False, "bf16", False)
        return sdpa_items(ctx, call, family="chain")
    raise KeyError(case)


@pytest.mark.parametrize("c", _meter_cases())
def test_meter_chain_commits(c):
    """K identical blocks with the node rule lifted (MLX_MAX_OPS_PER_BUFFER=100000): MLX launched exactly the
    number of graphs the element rule gives for the model's ``elems`` (gelu_approx: 3x its input's elements,
    the bool -> additive conversion, the fallback's score reads), and the live bytes never exceed the
    model's window (at the cap, 11 graphs in flight, within 10%)."""
    items = _meter_items(c["case"]) * c["K"]
    if items[0].bytes == 0 and items[0].out > 0:  # the first op reads the probe's held input: it cannot write in place
        items[0] = dataclasses.replace(items[0], bytes=items[0].out)
    assert len(graph_ends(split_ops(items), 100000, CAP.max_mega_elements, 2)) == c["launches"]
    est, _ = graph_window_max(items, 100000, CAP.max_mega_elements, CAP.max_inflight_graphs, 2)
    measured = c["peak_over_inputs"]
    assert est >= 0.99 * measured, (est, measured)
    if c["most_in_flight"] >= CAP.max_inflight_graphs + 1 and c["launches"] > CAP.max_inflight_graphs + 1:
        assert est <= 1.10 * measured, (est, measured)


TRACES = ["commits_trace.json", "commits_trace2.json", "commits_warm64_gptoss.json", "commits_warm2049_gptoss.json",
          "commits_warm64_deepseek.json", "commits_warm300_llama.json", "commits_cold_qwen3.json",
          "commits_heldout2.json"]
_TRACE_PROFILES: dict = {}


def _traced_chunks():
    out = []
    for name in TRACES:
        for pt in json.loads((RESULTS / name).read_text()).get("points", []):
            for i, c in enumerate(pt["chunks"]):
                out.append((name, pt, i, c))
    return out


def _trace_profile(model: str):
    if model not in _TRACE_PROFILES:
        cfg = json.loads((RESULTS.parent / "configs" / f"{model}.json").read_text())
        _TRACE_PROFILES[model] = profile_for_config(cfg, "bf16")
    return _TRACE_PROFILES[model]


def _model_graphs(model: str, tokens: int, step: int, call: int) -> int:
    items = call_items(_trace_profile(model), Request(tokens, chunk=step), call, backend="cuda", mlx_version="0.32.4")
    return len(graph_ends(split_ops(items), CAP.max_nodes, CAP.max_mega_elements, 2))


def test_traced_prefill_commits_match_the_replay():
    """Every prefill chunk of ten real-size models, traced on the H200 (four of them held out: their counts
    were predicted before the run, results/heldout2_predictions_before_run.json): the graphs MLX committed
    against the model's replay of the commit rules. Warm chunks (at most 11 graphs in flight): within one graph (the
    chunk's last, partial graph), and most exact. The first call of a process (gpt-oss-20b, DeepSeek-V2-Lite,
    Llama-3.1-8B) commits 2-7x as many smaller graphs and holds up to 38 in flight, past MLX's limit."""
    warm = exact = 0
    cold = []
    for name, pt, i, c in _traced_chunks():
        n = _model_graphs(pt["model"], pt["tokens"], pt["step"], i)
        if c["most_in_flight_at_launch"] > CAP.max_inflight_graphs + 1:
            cold.append((name, pt["model"], pt["repeat"], i))
            assert c["n_launch"] > 2 * n, (name, pt["model"], i, c["n_launch"], n)
            continue
        warm += 1
        exact += c["n_launch"] == n
        assert abs(c["n_launch"] - n) <= 1, (name, pt["model"], pt["tokens"], pt["step"], i, c["n_launch"], n)
    assert warm >= 450 and exact >= 0.7 * warm, (warm, exact)
    # the excess is the first chunk of the first call of a process, and only there
    assert sorted(cold) == sorted([("commits_trace.json", "gpt-oss-20b", 0, 0), ("commits_trace.json", "deepseek-v2-lite", 0, 0),
                                   ("commits_trace.json", "llama-3.1-8b", 0, 0), ("commits_trace2.json", "gpt-oss-20b", 0, 0),
                                   ("commits_trace2.json", "llama-3.1-8b", 0, 0)])


@pytest.mark.parametrize("name,model", [("commits_warm64_gptoss.json", "gpt-oss-20b"),
                                        ("commits_warm64_deepseek.json", "deepseek-v2-lite")])
def test_warm_up_removes_the_first_call_excess(name, model):
    """A 64-token prefill right after loading (itself a first call: 72 / 81 graphs for one 63-token chunk)
    leaves the next prompt warm: the points whose first call peaked 9.90 GiB (gpt-oss-20b, step 2048, 8k) and 13.25 GiB
    (DeepSeek-V2-Lite, step 4096, 8k) then peak as their later repeats, inside the estimate's band."""
    data = json.loads((RESULTS / name).read_text())
    (pt,) = data["points"]
    assert all(c["most_in_flight_at_launch"] <= CAP.max_inflight_graphs + 1 for c in pt["chunks"])
    est = prefill_peak(_trace_profile(model), Request(pt["tokens"], chunk=pt["step"]), backend="cuda",
                       mlx_version="0.32.4", apply_basis=False).peak_bytes
    measured = pt["peak_over_baseline_mib"] * 2**20
    assert 1.0 <= est / measured <= 1.15, (est, measured)


def test_fused_projection_views_count_their_span():
    """Phi-3 fuses q|k|v and gate|up into one matmul each and splits the output: the pieces are views whose
    data_size is the fused buffer's span, and MLX counts that toward the graph's element limit. Traced at 64k
    (commits_unders.json) MLX committed one graph per layer at long context; with separate projections the
    replay was 1-4 graphs short in 29 of 32 chunks; with the views at their span it is exact in 22, within 2 in all."""
    pt = json.loads((RESULTS / "commits_unders.json").read_text())["points"][0]
    assert pt["model"] == "phi-3-mini-4k-instruct"
    diffs = [_model_graphs(pt["model"], pt["tokens"], pt["step"], i) - c["n_launch"] for i, c in enumerate(pt["chunks"])]
    assert max(abs(d) for d in diffs) <= 2, diffs
    assert sum(d == 0 for d in diffs) >= 0.65 * len(diffs), diffs


def _nemotron_depth(depth: int):
    cfg = json.loads((RESULTS.parent / "configs" / "nemotron-h-56b-base-8k.json").read_text())
    cfg["num_hidden_layers"] = depth
    cfg["hybrid_override_pattern"] = cfg["hybrid_override_pattern"][:depth]
    return profile_for_config(cfg, "bf16")


@pytest.mark.parametrize("pt", json.loads((RESULTS / "commits_nemotron_depth.json").read_text())["points"],
                         ids=lambda pt: f"{pt['layers']}L")
def test_mamba2_ssm_attn_on_cuda(pt):
    """Nemotron-H-56B's first 8 / 16 / 32 / 64 layers at real widths, traced on the H200: ssm_attn op by op
    (peak.ops.recurrent.ssd_items_cuda) replays the graphs MLX commits to within 8% (they fill on the 100-node
    limit). The peak itself is reported as unknown on CUDA (transient.unverified_peak): right at step 2048,
    0.85-0.90 at steps 1024 / 4096."""
    prof = _nemotron_depth(pt["layers"])
    req = Request(pt["tokens"], chunk=pt["step"])
    for i, c in enumerate(pt["chunks"]):
        items = call_items(prof, req, i, backend="cuda", mlx_version="0.32.4")
        n = len(graph_ends(split_ops(items), CAP.max_nodes, CAP.max_mega_elements, 2))
        assert abs(n - c["n_launch"]) <= 0.08 * c["n_launch"], (i, n, c["n_launch"])
    with pytest.raises(UnsupportedError, match="Mamba2"):
        prefill_peak(prof, req, backend="cuda", mlx_version="0.32.4")


def _rank_chunks():
    out = []
    for r in (0, 1):
        data = json.loads((RESULTS / f"twogpu_s5_rank{r}.json").read_text())
        for model, m in data["models"].items():
            for t in m["traced"]:
                out.append(pytest.param(model, data["meta"], t, id=f"{model}:r{r}:{t['tokens']}:{t['repeat']}"))
    return out


@pytest.mark.parametrize("model,meta,traced", _rank_chunks())
def test_tensor_rank_commits_match_the_replay(model, meta, traced):
    """Two H200s over NCCL, each rank of a tensor-sharded model traced (twogpu_s5_rank*.json, 64-token warm-up).
    A rank's tensors are half as wide, so Qwen3-30B-A3B's graphs end on the 100-node limit in later chunks, and
    the replay only lands there if the items carry every kernel: the SwitchGLU's two multi-block argsorts,
    the flatten copy, the grouped gather_mm's nodes and the two all_sums per layer (with 34 / 37 kernels
    per layer the replay made 24 graphs where the rank committed 29). Qwen3-30B-A3B: every chunk exact;
    Llama-3.1-8B (dense): within one graph."""
    from omlx_profiles.sharding import ShardSpec, rank_profiles

    cfg = json.loads((RESULTS.parent / "configs" / f"{model}.json").read_text())
    view = rank_profiles(profile_for_config(cfg, "bf16"), ShardSpec(meta["size"], meta["parallel"]))[meta["rank"]]
    for i, c in enumerate(traced["chunks"]):
        items = call_items(view.profile, Request(traced["tokens"], chunk=meta["step"]), i, backend="cuda",
                           mlx_version="0.32.4")
        n = len(graph_ends(split_ops(items), CAP.max_nodes, CAP.max_mega_elements, 2))
        if model == "qwen3-30b-a3b":
            assert n == c["n_launch"], (i, n, c["n_launch"])
        else:
            assert abs(n - c["n_launch"]) <= 1, (i, n, c["n_launch"])


def test_one_call_graph_counts_match_the_dumped_graphs():
    """gpt-oss-20b one-call prompts across every graph-count step below 2,048 tokens: MLX's committed graphs,
    counted from CUDA graph DOT dumps on the H200 (MLX_SAVE_CUDA_GRAPHS_DOT_FILE, session 11,
    h200-mlx-0.32.4-s11-gptoss.yaml), against the replay's. Session 10's replay committed 30 graphs for the
    2,047-token call (MLX: 36; 9.234 GiB estimated against 7.33 measured): RoPE and the cache update were ordered
    before the sliding layers' bool-mask conversion, and a RotatingKVCache's first call (no kernel) was counted.
    With only the first of those fixed, 2,020-2,025-token calls had 36 graphs against MLX's 30 and went 14% under
    their measured peak. Exact at all 26 prompts except 1250 and 1601, where the replay commits fewer, larger
    graphs than MLX (a larger window: over, never under)."""
    import yaml

    path = next(p for p in calibration_files("cuda") if p.stem.endswith("s11-gptoss"))
    points = yaml.safe_load(path.read_text())["points"]
    prof = _trace_profile("gpt-oss-20b")
    fewer = []
    for pt in points:
        items = call_items(prof, Request(pt["tokens"], chunk=pt["prefill_step_size"]), 0, backend="cuda",
                           mlx_version="0.32.4")
        n = len(graph_ends(split_ops(items), CAP.max_nodes, CAP.max_mega_elements, 2))
        (mlx,) = pt["graphs_per_chunk"]
        assert n <= mlx, (pt["tokens"], n, mlx)
        if n < mlx:
            fewer.append(pt["tokens"])
    assert len(points) == 26 and fewer == [1250, 1601], fewer
