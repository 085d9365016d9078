"""State-cache layers: gated DeltaNet and Mamba2 (with the CUDA SSD replay), short convolutions;
the shapes of their conv window and recurrent state, and which backends cannot bound them."""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ...units import DTYPE_BYTES
from ...errors import UnsupportedError
from ...registry.profile import CacheEntry, LayerType, Profile
from ..kernels import KernelRoutes
from .items import CallContext, EntryStep, Item, fast_op
from ...mlxlm.recipe_files import traits_of


@dataclass(frozen=True, slots=True)
class StateDims:
    k1: int  # conv window rows (kernel - 1)
    conv_dim: int
    ssm_shape: tuple[int, ...]
    ssm_elems: int
    ssm_bytes: int  # bytes per element of the recurrent state


def state_dims(p: Profile, lt: LayerType, entry: CacheEntry) -> StateDims:
    """Shapes of a state cache's conv window and recurrent state, as the profile declares them
    (``StateTensorSpec.shape``)."""
    shapes = {t.name: tuple(t.shape) for t in entry.tensors if t.shape}
    conv = next((t for t in entry.tensors if t.name.startswith("conv")), None)
    ssm = next((t for t in entry.tensors if not t.name.startswith("conv")), None)
    if conv is None or ssm is None or conv.name not in shapes or ssm.name not in shapes:
        raise UnsupportedError(
            f"unsupported: {p.name}: the transient of its {lt.name!r} state layers needs the conv and recurrent "
            "state shapes (declare them in the profile's layer kind)")
    cs, ss = shapes[conv.name], shapes[ssm.name]
    k1 = cs[0] if len(cs) >= 2 else 1
    conv_dim = prod(cs[1:]) if len(cs) >= 2 else cs[0]
    return StateDims(k1, conv_dim, ss, prod(ss), DTYPE_BYTES.get(ssm.dtype, 0))


def linear_attention_items(p: Profile, lt: LayerType, entry: CacheEntry, step: EntryStep, ctx: CallContext, *,
                      cache_only: bool) -> list[Item]:
    """Gated-DeltaNet (qwen3_next / qwen3_5) and Mamba2 (nemotron_h) mixers.

    The conv window is concatenated with the chunk ((K-1+S) x conv_dim) and the new conv state is a view
    of that buffer (held until the next call: ``state_snapshot_bytes``). Off Metal the recurrence runs
    as ops, one step per token (gated_delta_ops: ``deltanet_recurrence_items``, the state chain then the
    readouts) or per 256-token block (Mamba2 ssm), each step writing a new fp32 state and state-sized products.
    """
    S, s, h = ctx.q_len, ctx.act, p.hidden_size
    d = state_dims(p, lt, entry)
    sb = d.ssm_bytes or 4
    nvdv = d.ssm_shape[0] * d.ssm_shape[1] if len(d.ssm_shape) == 3 else d.conv_dim  # nv*dv, or H*head_dim
    items = [fast_op(ctx, "rms_norm", S * h * s)]
    fam = p.mlx_model_type
    mixer = traits_of(fam).mixer
    if mixer == "gated_delta":
        # in_proj outputs: conv_dim (q, k, v) + z (nv*dv) + b, a (nv each)
        nv = d.ssm_shape[0]
        items.append(Item("deltanet.in_proj", S * (d.conv_dim + nvdv + 2 * nv) * s, 2,
                          elems=2 * S * h + h * (d.conv_dim + nvdv + 2 * nv)))
        items.append(Item("deltanet.conv", (d.k1 + S) * d.conv_dim * s + 2 * S * d.conv_dim * s, 3,
                          out=S * d.conv_dim * s))
        items.append(fast_op(ctx, "rms_norm", S * max(d.conv_dim - nvdv, 0) * s))
        if ctx.routes.backend == "metal":
            items.append(Item("deltanet.gates", S * nv * 4 * 4, 4, out=S * nv * 4 * 2))
            items.append(Item("deltanet.kernel", d.ssm_elems * sb + S * nvdv * s, 1))
        else:
            # what the loop reads until its last readout: q and k (normalized, repeated to the value heads),
            # v (a view of the conv output, which it keeps whole), g and beta; z (a view of the in_proj
            # output, kept whole until the output norm)
            dk = d.ssm_shape[2] if len(d.ssm_shape) == 3 else 1
            held = (2 * S * nv * dk * s + S * d.conv_dim * s + S * (d.conv_dim + nvdv + 2 * nv) * s
                    + S * nv * 4 * 2)
            items.append(Item("deltanet.gates", S * nv * 4 * 4 + 2 * S * nv * dk * s, 6, out=0,
                              carry=held, carry_items=1))
            gc = ctx.routes.executor.graph_commit
            items += deltanet_recurrence_items(S, d, nvdv, s, held, S * (d.conv_dim + nvdv + 2 * nv) * s,
                                               monotone=gc is not None, dk=dk,
                                               graph_nodes=gc.max_nodes + 1 if gc is not None else 0)
        if not cache_only:
            items.append(Item("deltanet.out_norm", S * nvdv * s * 3, 5, out=S * nvdv * s))
            items.append(Item("o_proj", S * h * s, 1, elems=S * nvdv + h * nvdv))
            items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
        return items
    if mixer == "ssd":
        heads = d.ssm_shape[0]
        items.append(Item("mamba.in_proj", S * (d.conv_dim + nvdv + heads) * s, 1,
                          elems=S * h + h * (d.conv_dim + nvdv + heads)))
        items.append(Item("mamba.conv", (d.k1 + S) * d.conv_dim * s + 2 * S * d.conv_dim * s, 3,
                          out=S * d.conv_dim * s))
        if ctx.routes.backend == "metal" and S == 1:
            items.append(Item("mamba.kernel", d.ssm_elems * sb, 1))
        elif ctx.routes.executor.graph_commit is not None:
            n_state = d.ssm_shape[2] if len(d.ssm_shape) == 3 else 1
            groups = max(1, (d.conv_dim - nvdv) // (2 * n_state))
            items += ssd_items_cuda(S, heads, nvdv // heads, n_state, groups, s, step.old_rows > 0)
        else:
            # ssm_attn, per 256-token block: CB repeated to (H, 256, 256) in the model dtype, and four
            # fp32 (H, 256, 256) arrays live together: segsum's repeat/tril, its cumsum, exp(segsum)
            # (the decay, read twice so never donated) and CB * decay; plus the next state
            # and the (256, H, head_dim) fp32 products dt*x, dt*x*decay, y and y_prev, B repeated to
            # (H, N, 256) in the model dtype, next_state and decay*state (fp32, state-sized)
            blocks = -(-S // 256)
            blk = min(S, 256)
            n_state = d.ssm_shape[2] if len(d.ssm_shape) == 3 else 1
            per_block = (heads * blk * blk * (4 * 4 + s) + 4 * blk * nvdv * 4 + heads * n_state * blk * s
                         + 2 * d.ssm_elems * 4)
            items.append(Item("mamba.ssm_blocks", blocks * per_block, blocks * 14, blocks * 10,
                              out=S * nvdv * s + d.ssm_elems * 4))
        if not cache_only:
            items.append(Item("mamba.out_norm", S * nvdv * s * 3, 5, out=S * nvdv * s))
            items.append(Item("o_proj", S * h * s, 1, elems=S * nvdv + h * nvdv))
            items.append(Item("residual", S * h * s, 1, elems=2 * S * h))
        return items
    raise UnsupportedError(f"unsupported: no transient model for the state layers of mlx-lm {fam!r}")


# spans per phase of the loop: the carry rounds a window edge inside a span up to the whole span (at most 1/32 of
# the layer's states over); 32 keeps that small and the item count low
DELTANET_SPANS = 32
CHAIN_KERNELS, READOUT_KERNELS = 6, 2  # kernels per step of each phase (traced on the H200, see below)
# state-sized fp32 buffers a chain step allocates (the decay product takes the previous state's buffer: donated)
CHAIN_STATES = 3


def deltanet_spans(S: int, monotone: bool) -> list[int]:
    """The steps per span of ``S`` steps. By default ``S * i // DELTANET_SPANS`` cut points, the empty spans
    dropped. ``monotone`` (graph-commit executors, CUDA): always ``DELTANET_SPANS`` spans, each taking one step more in
    a fixed order (the first span, then the last, the one before, ...; some empty where ``S < DELTANET_SPANS``), so
    that every span only grows with ``S`` and the items of two query counts differ only in the spans' op counts: what lets ``peak.fast_cuda``
    bound a bucket of shorter calls by its top (with the cut points, 47 and 48 steps split 1, 1, 2, ... and
    1, 2, 1, ...: no bucket held, every length was replayed). An empty span is one slot with no kernel and no bytes
    that hands the carry on: the graph model's bytes, nodes and elements are those of the spans it replaces."""
    if not monotone:
        parts = [S * i // DELTANET_SPANS for i in range(DELTANET_SPANS + 1)]
        return [b - a for a, b in zip(parts, parts[1:]) if b > a]
    q, j = divmod(S, DELTANET_SPANS)
    # the order the spans take one step more in: the first, then from the last down (the first span, which holds the
    # loop's first temporaries, is never empty)
    return [q + (j > 0)] + [q + (j >= DELTANET_SPANS + 1 - i) for i in range(1, DELTANET_SPANS)]


def deltanet_recurrence_items(S: int, d: StateDims, nvdv: int, act: int, held: int, held_z: int, *,
                              monotone: bool = False, dk: int = 1, graph_nodes: int = 0) -> list[Item]:
    """``gated_delta_ops`` (off Metal) in the order MLX evaluates it: a Python loop of one compiled step per
    token builds a lazy graph whose two outputs per step are the new fp32 state and ``y = sum(state * q)``.
    MLX evaluates the graph depth-first from what is asked for (the cache's final state, then the next layer's
    input), so it runs the **state chain** first — every step's new state, each kept because its own ``y``
    still reads it — and only then the **readouts** ``y_0 .. y_{S-1}``, each freeing its state, then the stack.

    Traced on the H200 (Qwen3-Next 8 layers at real widths, ``results/commits_gdn.json``, 32k / step 2048,
    the chunk's memory at every graph launch): per gated-DeltaNet layer the active memory climbs by one
    2 MiB state per step over ~120 graphs of 101 kernels (~6 kernels per step), peaks at S states
    (4.3 GiB at S = 2048), falls back linearly over ~40 graphs (~2 kernels per readout), then the stack
    (one graph of S + ~40 copy nodes) starts from ~0.2 GiB: the next layer's attention scores never meet
    the states. The items before held every state until the stack and then across CUDA's whole 11-graph
    window, next to the following attention's fallback scores: 1.17-1.65 of the measured peak.

    Items: ``DELTANET_SPANS`` chain spans, then as many readout spans, then the stack. Each span hands the
    next one everything still alive (``carry``, one item on): ``held`` (what the loop reads: q, k, v, g,
    beta, and z's in_proj buffer), the states written so far and not yet read out, the ``y``s so far.
    Within a span its bytes are what the steps allocate: a chain step three state-sized fp32 buffers
    (``CHAIN_STATES``: ``state * k``, the new state, ``new state * q``; the decay product ``state * decay`` takes the
    previous step's new state's buffer, which nothing else references: donated) and its small fp32 arrays (k cast
    to fp32, kv_mem, delta), all inputs of its graph's kernels so held while the graph is in flight; a readout its
    ``state * q`` product and ``y`` (fp32 sum, cast). The chain's carry also holds the previous step's state and,
    on a graph-commit executor, one chain graph's inputs for the completion overlap
    (``GraphCommit.completion_overlap_graphs``: the host woken by a finished graph encodes the next before the worker
    drops the finished one's temporaries; the chain's small graphs complete every few ms, so that race is run
    hundreds of times per layer).

    Session 12 (s12-cuda, run_s12cuda1.sh, predictions first): session 11's dumps show 6 kernels per chain step
    (the k copy, two broadcast multiplies, the row reduction, the compiled delta, a compiled kernel with two fp32
    state-sized outputs); the traces ramp 102.5-104.5 MiB per 101-kernel chain graph with no completion between
    (Qwen3-Next, 2 MiB states: 16.8 steps x 3.05 states) and 154-157 MiB (Qwen3.5, 3 MiB states): three fresh
    states per step, not four (the fourth was session 11's 1.162 at 8k / step 512). The rest of what the fourth
    covered at 8 layers is the conv inputs held to the end of the call (``deferred_conv_bytes``): with both, every
    gated-DeltaNet CUDA shape is 1.019-1.058 of its highest measured peak (8 layers, a 16-layer cut, and 1.149 idle
    for the whole Qwen3.5-27B, where main's items were under: 0.978)."""
    st_b = d.ssm_elems * 4
    y_b = nvdv * act
    # a step's small fp32 arrays: k cast to fp32 (the copy kernel), kv_mem and delta (inputs of its graph's kernels)
    small = (d.ssm_shape[0] * dk + 2 * nvdv) * 4 if len(d.ssm_shape) == 3 else 0
    # the completion overlap of one chain graph (GraphCommit.completion_overlap_graphs, at most one graph): the
    # host woken by a finished graph encodes the next before the worker drops the finished graph's inputs (its
    # steps' decay products and state * k products, the small arrays); a chain graph is ~graph_nodes /
    # CHAIN_KERNELS steps and completes every few ms, so the race is run hundreds of times per layer
    overlap = -(-graph_nodes // CHAIN_KERNELS) * (2 * st_b + small) if graph_nodes else 0
    spans = deltanet_spans(S, monotone)
    items = []
    states = 0
    for k, n in enumerate(spans):
        states += n * st_b
        # the carry also counts the next span's states: a window that starts inside that span holds the states
        # it wrote before the window's edge (bytes spread evenly over the span would miss them), so the
        # discretization errs by at most one span's states, on the safe side; and the previous step's new state
        # (the buffer the window's first step's decay product takes)
        ahead = spans[k + 1] * st_b if k + 1 < len(spans) else 0
        items.append(Item("deltanet.recurrence_states",
                          n * (CHAIN_STATES * st_b + small) + (3 * st_b if k == 0 else 0),
                          CHAIN_KERNELS * n, carry=held + states + ahead + st_b + overlap, carry_items=1, out=0,
                          elems=n * 3 * d.ssm_elems, grows=monotone))
    ys = 0
    for n in spans:
        states -= n * st_b
        ys += n * y_b
        items.append(Item("deltanet.readout", n * (nvdv * 4 + y_b) + (st_b if n else 0), READOUT_KERNELS * n,
                          carry=held + states + ys, carry_items=1, out=0, elems=n * (d.ssm_elems + nvdv),
                          grows=monotone))
    # mx.stack of S arrays: one copy kernel per input, all in one graph (traced: a graph of S + ~40 nodes)
    items.append(Item("deltanet.stack", S * nvdv * act, 1, nodes=S, carry=held_z, carry_items=1, grows=monotone))
    return items


def unverified_peak(p: Profile, routes: KernelRoutes) -> str | None:
    """Why the prefill peak of ``p`` on ``routes``' backend is reported as unknown instead of a number, or None.

    Mamba2 (nemotron_h) layers on CUDA: ``ssd_items_cuda`` replays MLX's graphs to within 8%, but what each
    layer keeps alive until the end of the forward (its final state's inputs) is not understood well enough
    to promise a bound: modelled, Nemotron-H-56B came out at 1.10 / 1.13 of the H200's peak at prefill step
    2048 and 0.85 / 0.85 / 0.90 at steps 1024 and 4096 (estimates written before measuring)."""
    if routes.executor.graph_commit is None:
        return None
    if traits_of(p.mlx_model_type).mixer == "ssd" and any(e.kind == "state" for lt in p.layer_types.values() for e in lt.entries):
        return ("unsupported: the CUDA prefill peak of Mamba2 (ssm_attn) layers is not verified: modelled op by op it "
                "was 1.10-1.13 of the peak measured for Nemotron-H-56B on an H200 at prefill step 2048 but 0.85-0.90 at "
                "steps 1024 and 4096 (benchmarks/cuda/README.md); KV and state bytes stay exact")
    return None


def ssd_items_cuda(S: int, H: int, dh: int, N: int, G: int, md: int, state: bool) -> list[Item]:
    """mlx-lm's ``ssm_attn`` (Mamba2 SSD, ``mlx_lm/models/ssm.py``) op by op as MLX runs it on CUDA: per
    256-token block ~24 kernels (~34 once a state exists), each its own graph node, so MLX's graphs fill on
    their 100-node limit (the per-block aggregate the CPU and Metal windows use replayed far fewer, larger
    graphs and put Nemotron-H-56B's peak at 0.72-0.76 of the H200's). Bytes per op: the (H, 256, 256) fp32
    segsum / cumsum / decay / CB*decay arrays, CB repeated in the model dtype, the fp32 copies mx.matmul
    makes of B (next_state) and of C broadcast over the group's heads (y_prev) - the single-op peaks
    measured on CPU (benchmarks/cuda/README.md, "Nemotron-H").

    What these items do not hold: the cache's new state is the last block's next_state, which no later layer
    reads, so MLX's tape reaches it only after the whole forward and what it reads stays allocated until
    then. Measured on the H200 the peak grows with depth (10.4 / 13.3 / 17.9 / 23.5 / 28.0 GiB for the first
    8 / 16 / 32 / 64 / all 118 layers of Nemotron-H-56B, 4k-8k tokens) and falls back near the end of each
    chunk. Charging dt*x + the last decay + the previous state per layer gave 1.10 / 1.13 at step 2048 but
    0.85-0.90 at steps 1024 / 4096 (predicted before measuring), so the items replay the graphs (within 8% of
    the traced ones) and ``unverified_peak`` reports the CUDA peak of these layers as unknown."""
    f = 4
    items = [Item("mamba.ssd_prep", S * H * f * 3 + S * H * dh * f, 6, 4,
                  elems=(S * H, S * H, H, S * H, S * H, S * H * dh + S * H))]
    for i in range(0, S, 256):
        s = min(256, S - i)
        st = state or i > 0
        hs2 = H * s * s
        blk = [
            Item("mamba.ssd_cb", G * s * s * md, 1, 2, elems=2 * s * G * N),
            Item("mamba.ssd_cb_repeat", hs2 * md, 1, elems=G * s * s),
            Item("mamba.ssd_segsum_repeat", hs2 * f, 1, 2, elems=H * s),
            Item("mamba.ssd_tril", 0, 4, 2, elems=(2 * s, 2 * s, s * s, hs2 + s * s)),
            Item("mamba.ssd_cumsum", hs2 * f, 1, elems=hs2),
            Item("mamba.ssd_decay", 0, 1, elems=hs2),
            Item("mamba.ssd_cb_f32", hs2 * f, 1, elems=hs2),
            Item("mamba.ssd_cb_decay", 0, 1, elems=2 * hs2),
            Item("mamba.ssd_tril", 0, 4, 2, elems=(2 * s, 2 * s, s * s, hs2 + s * s)),
            Item("mamba.ssd_y", s * H * dh * f, 1, 2, elems=hs2 + s * H * dh),
            Item("mamba.ssd_b_repeat", H * N * s * md, 1, 3, elems=s * G * N),
            Item("mamba.ssd_dtx_decay", s * H * dh * f, 1, 4, elems=s * H * dh + hs2),
            Item("mamba.ssd_b_f32", H * N * s * f, 1, elems=H * N * s),
            Item("mamba.ssd_next_state", H * dh * N * f, 1, elems=s * H * dh + H * N * s),
        ]
        if st:
            blk += [
                Item("mamba.ssd_state_decay", s * H * f * 2, 3, 3, elems=(s * H, s * H, H)),
                Item("mamba.ssd_state_scaled", H * dh * N * f, 1, 2, elems=H + H * dh * N),
                Item("mamba.ssd_state_add", 0, 1, elems=2 * H * dh * N),
                Item("mamba.ssd_c_f32", s * G * N * f, 1, 2, elems=s * G * N),
                Item("mamba.ssd_c_broadcast", s * H * N * f, 1, elems=s * G * N),
                Item("mamba.ssd_y_prev", s * H * dh * f, 1, 3, elems=H * dh * N + s * H * N),
                Item("mamba.ssd_y_prev_scaled", 0, 1, 2, elems=s * H + s * H * dh),
                Item("mamba.ssd_y_add", s * H * dh * f, 1, elems=2 * s * H * dh),
            ]
        blk.append(Item("mamba.ssd_y_cast", s * H * dh * md, 1, elems=s * H * dh, carry=s * H * dh * md, carry_items=8))
        items += blk
    items.append(Item("mamba.ssd_concat", S * H * dh * md * 2, 3, 2, out=S * H * dh * md,
                      elems=(S * H * dh, H, 2 * S * H * dh)))
    return items


def state_snapshot_bytes(p: Profile, lt: LayerType, entry: CacheEntry, q_len: int, act: int) -> int:
    """Bytes a state layer keeps beyond its ``nbytes`` between prefill chunks: the new conv state is a
    slice view of the (K-1+S) x conv_dim concatenation, which keeps the whole buffer alive until the
    next call replaces it (reference/mlxlm_caches.md §3.1; released after the last 1-token step)."""
    if q_len <= 1 or traits_of(p.mlx_model_type).conv_state != "view":
        return 0
    d = state_dims(p, lt, entry)
    conv = next(t for t in entry.tensors if t.name.startswith("conv"))
    conv_b = act if conv.dtype == "model" else DTYPE_BYTES[conv.dtype]
    return q_len * d.conv_dim * conv_b


def deferred_conv_bytes(p: Profile, q_len: int, act: int) -> int:
    """Bytes of the state layers' conv inputs that stay alive to the end of a call of ``q_len`` queries, where
    the new conv state is a copy (``conv_state: contiguous``): ``cache[0] = mx.contiguous(conv_input[:, -(K-1):])``
    is lazy and only the cache reads it, so it is one of the outputs ``mx.eval([c.state for c in cache])`` asks
    for and MLX's tape (built breadth-first from those outputs, run from the back) runs it after the whole
    forward: each layer's (K-1+S) x conv_dim concatenation stays allocated from its layer to the end of the call.

    Measured on the H200 (Qwen3-Next 8 layers, six gated-DeltaNet layers: commits_gdnb.json, commits_gdn.json):
    the memory at the end of each layer's state chain climbs by 64 / 32 / 16 MiB per gated-DeltaNet layer at
    chunks of 4096 / 2048 / 1024 (that layer's (3+S) x 8192 bf16 concatenation), and the next chunk starts
    from the caches alone (28 MiB before chunk 2 at step 4096). Charged for every state layer of the model at
    once (exact from the last state layer on; earlier layers hold fewer). Only the mixers this module itemizes
    (``mixer``); a family with conv-only state layers keeps its own model."""
    tr = traits_of(p.mlx_model_type)
    if q_len <= 1 or tr.conv_state != "contiguous" or tr.mixer == "none":
        return 0
    total = 0
    counts: dict[str, int] = {}
    for n in p.layer_names:
        counts[n] = counts.get(n, 0) + 1
    for name, lt in p.layer_types.items():
        for e in lt.entries:
            if e.kind != "state":
                continue
            conv = next((t for t in e.tensors if t.name.startswith("conv")), None)
            if conv is None:
                continue
            d = state_dims(p, lt, e)
            conv_b = act if conv.dtype == "model" else DTYPE_BYTES[conv.dtype]
            total += counts.get(name, 0) * (d.k1 + q_len) * d.conv_dim * conv_b
    return total
