"""Gated-DeltaNet hybrids on CUDA (issue 14 item 4, issue 18): bucket bounds for calls whose per-token loop changes
its op counts with the query count, and the monotone report they make possible.

The recurrence is itemized in 32 spans (``peak.ops.recurrent.deltanet_spans``); on CUDA every span only grows with the
query count, so two shorter calls differ in the spans' op and node counts alone, and ``peak.fast_cuda`` bounds a
bucket of them by its top (``_Ops.embed`` + ``free_graph_window`` over the fewest nodes). Checked here against the graph
model itself (``executor.graph_window_max``) on generated item lists, and on Qwen3.5-35B-A3B against the exact replay.
About 10 s of CPU.
"""
from __future__ import annotations

import random

from omlx_profiles import default_registry
from omlx_profiles.peak import executor as ex
from omlx_profiles.peak.envelope import CudaEnvelope
from omlx_profiles.peak.executor import graph_window_max
from omlx_profiles.peak.fast_cuda import _Ops, cuda_fit_for, free_graph_window
from omlx_profiles.peak.ops.items import Item
from omlx_profiles.peak.ops.recurrent import DELTANET_SPANS, deltanet_spans
from omlx_profiles.peak.prefill import Request, prefill_peak


def test_monotone_spans_grow_one_step_at_a_time():
    prev = None
    for s in range(0, 300):
        sp = deltanet_spans(s, True)
        assert len(sp) == DELTANET_SPANS and sum(sp) == s and (s == 0 or sp[0] >= 1)
        if prev is not None:
            assert all(a <= b for a, b in zip(prev, sp)) and sum(sp) - sum(prev) == 1
        prev = sp
    # the default partition (CPU / Metal) is not monotone per span: what made every GDN length "shapeless" on CUDA
    a, b = deltanet_spans(47, False), deltanet_spans(48, False)
    assert any(x > y for x, y in zip(a, b))


def _call(shape, steps: list[int], q: float) -> list[Item]:
    """A call of the generated ``shape``: fixed items scaled by ``q`` in (0, 1], grows items with ``steps`` ops."""
    out, gi = [], 0
    for kind, (b, e, car, npo, fixed) in shape:
        if kind == "grows":
            n = steps[gi]
            gi += 1
            out.append(Item("span", int(b * n + (fixed if n else 0)), n * 2, carry=int(car * (1 + n)), carry_items=1,
                            out=0, elems=int(e * n), nodes=npo * n * 2, grows=True))
        else:
            out.append(Item("op%d" % (len(out) % 5), int(b * q), max(1, fixed), carry=int(car * q),
                            carry_items=1 if car else 0, elems=int(e * q)))
    return out


def test_the_embedded_bound_holds_every_call_between_the_bottom_and_the_top():
    """Random item lists where some items are a loop's spans (op and node counts growing with the query count, a
    fixed part per span) and the rest scale with it: the top's ``free_graph_window`` over the bottom's mapped nodes and
    elements plus the slack is never below the graph model (``graph_window_max``) of the bottom, the top, or any call
    between (limits small enough that both the node and the element rule end graphs)."""
    rng = random.Random(1410)
    checked = 0
    for t in range(150):
        shape = []
        for _ in range(rng.randint(2, 30)):
            if rng.random() < 0.4:
                shape.append(("grows", (rng.randint(0, 1 << 20), rng.randint(0, 1 << 22), rng.choice((0, rng.randint(0, 1 << 20))),
                                        rng.choice((1, 1, 3)), rng.choice((0, rng.randint(0, 1 << 21))))))
            else:
                shape.append(("op", (rng.randint(0, 1 << 26), rng.randint(0, 1 << 28), rng.choice((0, rng.randint(0, 1 << 24))),
                                     1, rng.choice((1, 1, 2, 5)))))
        g = sum(1 for k, _ in shape if k == "grows")
        top = [rng.randint(0, 12) for _ in range(g)]
        bottom = [rng.randint(0, x) for x in top]
        qa = rng.uniform(0.3, 1.0)
        max_nodes = rng.choice((3, 10, 100))
        mega = rng.choice((0, 1, 50))
        inflight = rng.choice((0, 1, 3, 10))
        ib, it = _call(shape, bottom, qa), _call(shape, top, 1.0)
        ob, ot = _Ops(ib, 2), _Ops(it, 2)
        emb = ob.embed(ot)
        assert emb is not None, t
        lo_nodes, lo_el, slack = emb
        up = free_graph_window(it, max_nodes, mega, inflight, 2, lo_el, ot, lo_nodes, slack)
        for _ in range(3):
            mid = [rng.randint(a, b) for a, b in zip(bottom, top)]
            q = rng.uniform(qa, 1.0)
            for items in (ib, it, _call(shape, mid, q)):
                exact, _ = graph_window_max(items, max_nodes, mega, inflight, 2)
                assert up >= exact, (t, up, exact)
                checked += 1
    assert checked == 150 * 9


def test_the_numpy_graph_window_picks_the_loops_window():
    """``graph_window_max`` sums the windows in numpy from 64 graphs on: the same window and terms as the loop over
    the graphs (``_Live.sum``), on generated items with enough graphs (a node limit of 3)."""
    from omlx_profiles.peak.executor import _Live, graph_ends, split_ops

    rng = random.Random(64)
    many = 0
    for t in range(60):
        items = [Item("t%d" % rng.randint(0, 4), rng.randint(0, 1 << 30), rng.choice((1, 1, 2, 7)),
                      carry=rng.choice((0, rng.randint(0, 1 << 28))), carry_items=rng.randint(1, 3),
                      out=rng.choice((-1, 0)), elems=rng.randint(0, 600 << 20)) for _ in range(rng.randint(40, 200))]
        inflight = rng.choice((1, 3, 10))
        sp = split_ops(items)
        live = _Live(sp, 1, 0)
        ends = graph_ends(sp, 3, 500, 2)
        starts = [0.0] + ends[:-1]
        best, bw = -1.0, (0.0, 0.0)
        for g, hi in enumerate(ends):
            lo = starts[max(0, g - inflight)]
            v = live.sum(lo, hi)
            if v > best:
                best, bw = v, (lo, hi)
        want = live.terms(*bw)
        got = graph_window_max(items, 3, 500, inflight, 2)
        many += len(ends) >= 64
        assert got == (sum(want.values()), want), t
    assert many >= 30, many


def test_qwen35_on_cuda_is_bounded_and_its_report_monotone_in_the_prompt():
    """Qwen3.5-35B-A3B, chunk 64, no prefix: every shorter call is in a bounded bucket now (session 8: "shapeless",
    each length replayed, and the report fell within a block: chunk 52, 43 new tokens above 52); the bounds sit
    around the exact replay and the reported total never falls over two blocks."""
    p = default_registry().resolve("qwen3.5-35b-a3b").profile
    cf = cuda_fit_for(p, "cuda", None, None, False, 64)
    env = CudaEnvelope(cf)
    prev = 0
    rng = random.Random(3)
    sample = set(rng.sample(range(2, 130), 12))
    for n in range(1, 130):
        e = env.fresh(n)
        assert e >= prev, (n, e, prev)
        prev = e
        if n in sample:
            exact = prefill_peak(p, Request(n, chunk=64), backend="cuda").peak_bytes
            lo, hi = cf.bounds(n)
            assert hi is not None and lo <= exact <= hi and exact <= e, (n, lo, exact, hi, e)
    assert not cf._shapeless and env.bounded(129)


# --- what a chain step and a layer really hold (session 12, s12-cuda: H200 traces of run_s12cuda1.sh) ----------------
_TRACES = "benchmarks/cuda/results/commits_s12stall.json", "benchmarks/cuda/results/commits_s12idle.json"


def _traced_points():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for name in _TRACES:
        for pt in json.loads((root / name).read_text())["points"]:
            cfg = json.loads((root / "benchmarks/cuda/configs" / f"{pt['model']}.json").read_text())
            if pt.get("layers"):
                cfg.get("text_config", cfg)["num_hidden_layers"] = pt["layers"]
            yield pt, cfg


def _chain_graph_bytes(items, nodes: int) -> float:
    """Bytes the chain items allocate per ``nodes`` kernel nodes, in the middle of the chain (no first-span extras)."""
    mid = [it for it in items if it.term == "deltanet.recurrence_states"][5:-5]
    return sum(it.bytes for it in mid) / sum(it.ops for it in mid) * nodes


def test_chain_steps_allocate_what_the_h200_traces_ramp():
    """Between two graph launches with no completion in between the host allocated one whole graph: the traces ramp
    102.5-104.5 MiB per 101-node chain graph for Qwen3-Next (2 MiB states) and 151-157 for Qwen3.5 (3 MiB). The items
    allocate 3 states per step (the decay product takes the previous state's buffer) plus the small arrays: within
    3% of the measured median, never above its 90th percentile; 4 states per step (session 11's items) were 1.31x."""
    from omlx_profiles.estimate.calibration import profile_for_config
    from omlx_profiles.peak.call import call_items

    seen = set()
    for pt, cfg in _traced_points():
        if pt["model"] in seen or pt.get("layers"):
            continue
        seen.add(pt["model"])
        ramps = sorted(b[1] - a[1] for c in pt["chunks"] for a, b in zip(c["launches"], c["launches"][1:])
                       if b[2] == a[2] + 1 and a[2] >= 1 and a[3] == b[3] == 101)
        med, p90 = ramps[len(ramps) // 2], ramps[9 * len(ramps) // 10]
        p = profile_for_config(cfg, "bf16")
        items = call_items(p, Request(pt["step"] + 1, chunk=pt["step"]), 0, backend="cuda")
        got = _chain_graph_bytes(items, 101) / 2**20
        assert 0.97 * med <= got <= p90, (pt["model"], got, med, p90)
    assert len(seen) == 3, seen  # Qwen3-Next 8l, Qwen3.5-27B 8l and whole


def test_conv_inputs_stay_alive_to_the_end_of_the_call_as_traced():
    """The first chunk's chain maxima climb layer by layer by one conv input ((K-1+S) x conv_dim) and one state:
    ``mx.contiguous`` of the conv-state slice runs last on MLX's tape (16-layer Qwen3-Next cut: 12 gated-DeltaNet
    layers; the whole Qwen3.5-27B: 48, 128 cache-state outputs, past the tape's breadth limit of 20). The pinned
    ``conv_inputs`` term per layer plus a state is within 15% of the measured climb per layer (without it: ~5%)."""
    from omlx_profiles.estimate.calibration import profile_for_config
    from omlx_profiles.peak.call import pinned_bytes

    checked = 0
    for pt, cfg in _traced_points():
        p = profile_for_config(cfg, "bf16")
        n_state = sum(1 for n in p.layer_names for e in p.layer_types[n].entries if e.kind == "state")
        if n_state < 12:
            continue
        c0 = pt["chunks"][0]
        maxima, cur = [], []
        for l in c0["launches"]:
            if l[3] > 1000:  # the stack of a layer's readouts: one graph of S + ~40 nodes ends its chain
                maxima.append(max(x[1] for x in cur))
                cur = []
            else:
                cur.append(l)
        assert len(maxima) == n_state, (pt["model"], len(maxima))
        climb = (maxima[-1] - maxima[0]) / (n_state - 1) * 2**20
        st = next(e for lt in p.layer_types.values() for e in lt.entries if e.kind == "state")
        model = pinned_bytes(p, {}, pt["step"], 2)["conv_inputs"] / n_state + st.state_bytes(2)
        assert 0.85 * climb <= model <= 1.15 * climb, (pt["model"], model / 2**20, climb / 2**20)
        checked += 1
    assert checked == 2, checked
