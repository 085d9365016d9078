"""A kernel-route table (``profiles/kernels/<backend>.yaml``): which SDPA kernel a call takes, what the
backend's executor keeps in flight, and what the non-SDPA "fast" ops cost where the backend decomposes
them. Read by ``omlx_profiles.peak.kernels``."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ..versions import check_range
from .family import DType, NonNegInt, PosInt, Slug, Strict

MaskKind = Literal["none", "causal", "bool", "additive"]


class RouteWhen(Strict):
    """Conditions of one SDPA routing rule; an absent condition matches anything.

    ``Dq`` is the query/key head width, ``Dv`` the value width, ``qL`` the query length of the call (a
    prefill chunk), ``kL`` the keys it attends to, ``gqa`` = n_q / n_kv.
    """

    head_dim: list[PosInt] | None = Field(None, description="Dq must be one of these")
    v_head_dim: list[PosInt] | None = Field(None, description="Dv must be one of these")
    pairs: list[Annotated[list[PosInt], Field(min_length=2, max_length=2)]] | None = Field(
        None, description="(Dq, Dv) must be one of these pairs")
    same_qk_v_dim: bool | None = Field(None, description="Dq == Dv required (true) or excluded (false)")
    head_dim_max: PosInt | None = Field(None, description="Dq <= this and Dv <= this")
    head_dim_multiple_of: PosInt | None = Field(None, description="Dq and Dv multiples of this (cuDNN: 8)")
    query_len_min: PosInt | None = None
    query_len_max: PosInt | None = None
    query_len_eq_kv_len: bool | None = Field(None, description="qL == kL (a whole prompt in one call, no prefix)")
    query_len_le_kv_len: bool | None = Field(None, description="qL <= kL")
    kv_len_min: PosInt | None = None
    gqa_times_query_max: PosInt | None = Field(None, description="qL * (n_q / n_kv) bound of vector kernels")
    gqa: PosInt | None = Field(None, description="n_q / n_kv must equal this")
    mask: list[MaskKind] | None = Field(None, description="mask kinds the rule covers")
    sinks: bool | None = None
    dtype: list[DType] | None = None
    nax: bool | None = Field(None, description="Metal: the M5-generation neural accelerators (metal::is_nax_available)")


class Route(Strict):
    """One SDPA routing rule. The first rule whose ``when`` matches decides the kernel.

    Memory of each route (per call, what the estimator charges; see ``omlx_profiles/peak/ops/``):

    * ``fused``: the kernel writes only its output (n_q * qL * Dv elements); with a bool mask on a
      backend that cannot take one, the mask is first materialized as an additive array.
    * ``vector``: the decode kernel (qL <= 8): output only (its two-pass scratch is a few MiB).
    * ``fallback``: MLX's unfused ops: one score buffer n_q * qL * kL (where/softmax reuse it), the
      scaled q and the output; a causal mask is built as a bool qL x kL array; sinks add copies.
    * ``blocked``: the query-blocked kernel (MLX 0.32.4 Metal D512): one score tile of ``q_tile`` rows.
    * ``tiled``: an O(L) kernel registered at runtime (oMLX's sdpa256 patch): one KV tile of scores.
    """

    name: Slug
    when: RouteWhen = Field(default_factory=RouteWhen)
    route: Literal["fused", "vector", "fallback", "blocked", "tiled"]
    q_tile: PosInt | None = Field(None, description="blocked kernels: query rows per score tile")
    kv_tile: PosInt | None = Field(None, description="tiled kernels: kv block width bounding the score tile")
    output_in_query_layout: bool = Field(
        False, description="the kernel allocates its output in the query's memory order, (B, qL, n_q, Dv) for "
                           "mlx-lm's transposed queries, so the transpose + reshape before o_proj is a view, not a "
                           "copy (MLX CUDA: malloc_with_same_layout in cuDNN SDPA; sdpa_vector's (B, L, H, D) strides)")
    source: str = Field(min_length=1, description="where the rule comes from (file, commit, measurement)")

    @model_validator(mode="after")
    def _tile(self):
        if self.route == "tiled" and self.kv_tile is None:
            raise ValueError("a tiled route needs kv_tile")
        if self.route == "blocked" and self.q_tile is None:
            raise ValueError("a blocked route needs q_tile")
        return self


class FallbackCosts(Strict):
    """What MLX's unfused SDPA fallback holds, in units of the score buffer (n_q * qL * kL * itemsize)."""

    score_buffers: Annotated[float, Field(ge=1)] = Field(
        1.0, description="score-sized buffers live at once (donation makes where/softmax reuse one)")
    sinks_score_buffers: Annotated[float, Field(ge=1)] = Field(
        3.2, description="score-sized buffers live at once with attention sinks (concatenate + softmax + slice)")
    causal_mask_bytes_per_element: Annotated[float, Field(ge=0)] = Field(
        1.0, description="the bool qL x kL mask the fallback builds for mask='causal' (plus two aranges)")
    source: str = Field(min_length=1)


class ChunkWindow(Strict):
    chunk: PosInt = Field(description="applies to calls of at most this many query tokens")
    ops: PosInt


class KernelNodes(Strict):
    """CUDA graph nodes of the ops that do not launch one kernel each. Nodes only move where a graph is
    committed (``max_nodes``); bytes never depend on them."""

    sort_block_elements: PosInt = Field(description="argsort of a row up to this many elements is one kernel (one "
                                                    "block: threads x items per thread); longer rows sort in blocks "
                                                    "and merge")
    sort_merge_pass_nodes: PosInt = Field(description="kernels per doubling merge pass of a multi-block argsort "
                                                      "(after its one block-sort kernel)")
    gather_mm_sorted: PosInt = Field(description="nodes of one gather_mm on expert-sorted rows (grouped GEMM)")
    all_sum: PosInt = Field(1, description="nodes of one all_sum of a tensor rank (the collective, captured into the "
                                           "graph being encoded; it neither commits nor synchronizes)")
    source: str = Field(min_length=1)


class GraphCommit(Strict):
    """MLX's CUDA backend: when the host commits the CUDA graph it is encoding, and how many committed
    graphs it lets run ahead of the GPU. Every input of every op of a committed graph stays allocated
    until the GPU has finished that graph, so these numbers set how many layers' temporaries are live."""

    max_nodes: PosInt = Field(description="a graph is committed after the op that takes it past this many kernel "
                                          "nodes (node_count_ > max_ops_per_graph; MLX_MAX_OPS_PER_BUFFER)")
    max_mega_elements: PosInt = Field(description="... or past this many Mi-elements of kernel inputs "
                                                  "((bytes_in_graph_ >> 20) > max_mb_per_graph; MLX_MAX_MB_PER_BUFFER; "
                                                  "counted in elements, once per kernel that reads an array)")
    max_inflight_graphs: PosInt = Field(description="eval_impl waits for the oldest graph once more than this many "
                                                    "are in flight (MAX_ACTIVE_TASKS)")
    op_window_bound: bool = Field(False, description="also cap the live set by the executor's inflight_ops window (how far "
                                                     "the host got ahead in time on the measured device); off: the graph "
                                                     "cap alone, which holds on any device and under GPU contention")
    completion_overlap_graphs: NonNegInt = Field(
        0, description="committed graphs whose inputs can still be allocated after MLX counted them complete: "
                       "gpu::eval registers notify_task_completion before commit() adds the handler that holds the "
                       "graph's temporaries, and the completion worker runs a graph's handlers in that order, so the "
                       "host woken from the in-flight cap encodes (allocates) the next graph while the completed "
                       "one's inputs are alive; the worker drops them before it can signal the next completion, so "
                       "at most one graph more (mlx/backend/cuda/eval.cpp, device.cpp commit, worker.cpp)")
    margin_graphs: NonNegInt = Field(0, description="graphs added to max_inflight_graphs on the safe side (calibrated: "
                                                    "what the measured peaks needed beyond the exact cap)")
    kernel_nodes: KernelNodes | None = Field(
        None, description="graph nodes of the ops whose kernel count is not one per op; absent: one node per op "
                          "(fewer, larger graphs: a larger run-ahead window, the safe side)")
    source: str = Field(min_length=1, description="where the numbers come from")

    @property
    def window_graphs(self) -> int:
        """Graphs, besides the one being encoded, whose inputs can be allocated together: the in-flight cap,
        the completion overlap, any calibrated margin."""
        return self.max_inflight_graphs + self.completion_overlap_graphs + self.margin_graphs


class Executor(Strict):
    """How far the backend's host thread allocates ahead of the device.

    MLX evaluates a chunk's graph by allocating every op's output on the host thread and handing the
    work to a device stream; an op's inputs are released only when the device (or the CPU worker
    thread) has finished it. So at the peak, the outputs of roughly the next ``inflight_ops`` ops are
    all allocated: the live set spans several layers, not one.
    """

    inflight_ops: PosInt = Field(description="length of the run-ahead window, in the units below")
    inflight_ops_by_chunk: list[ChunkWindow] = Field(
        default_factory=list,
        description="window lengths that depend on the prefill step (first entry with chunk >= the call's "
                    "query length wins; beyond the last, the last); empty: inflight_ops for every call")
    op_weight: PosInt = Field(1, description="window units one computing op takes (CPU: 2 dispatches, compute + release)")
    view_weight: NonNegInt = Field(0, description="window units one view op (reshape, broadcast, slice) takes (CPU: 1 dispatch)")
    graph_commit: GraphCommit | None = Field(
        None, description="CUDA: the live set is bounded by graph commits (inflight_ops is then only used when "
                          "graph_commit.op_window_bound is set)")
    source: str = Field(min_length=1, description="how the number was derived or measured")

    def window_for(self, q_len: int) -> int:
        for w in self.inflight_ops_by_chunk:
            if q_len <= w.chunk:
                return w.ops
        return self.inflight_ops_by_chunk[-1].ops if self.inflight_ops_by_chunk else self.inflight_ops


class FastOpCost(Strict):
    """Cost of one of MLX's ``mx.fast`` ops on this backend.

    ``transient`` is the peak of the op alone, in units of its *input* bytes (output included), per
    dtype; ``ops`` is the number of allocating ops it becomes (1 when a fused kernel runs it).
    """

    ops: PosInt = 1
    ops_half: PosInt | None = Field(None, description="computing ops in fp16/bf16 when it differs (the casts to fp32 and back)")
    views: NonNegInt = Field(0, description="view ops of the decomposition (broadcasts, slices)")
    transient: dict[DType, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    placement: dict[DType, list[tuple[NonNegInt, NonNegInt, Annotated[float, Field(ge=0)]]]] = Field(
        default_factory=dict,
        description="where one call's bytes are allocated, per dtype: (ops, views, bytes in units of the input) in "
                    "tape order; the ops and views sum to the op's own, the bytes to ``transient``. Empty: spread "
                    "evenly over the op's executor slots")
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _placement_sums(self):
        for dt, parts in self.placement.items():
            ops = self.ops_half if (dt != "fp32" and self.ops_half) else self.ops
            if sum(p[0] for p in parts) != ops or sum(p[1] for p in parts) != self.views:
                raise ValueError(f"placement[{dt}]: its ops/views must sum to {ops}/{self.views}")
            if abs(sum(p[2] for p in parts) - self.transient.get(dt, -1.0)) > 1e-9:
                raise ValueError(f"placement[{dt}]: its bytes must sum to transient[{dt}]")
        return self


class FastOps(Strict):
    rms_norm: FastOpCost | None = None
    rope: FastOpCost | None = None
    layer_norm: FastOpCost | None = None
    norm_rope_tail_dispatches: PosInt | None = Field(
        None, description="a decomposed RMSNorm whose output only a decomposed RoPE reads (per-head q/k norms): MLX's "
                          "tape (a breadth-first walk from the outputs, run in reverse) runs the norm's first "
                          "placement part, then the zero-byte ops of both, and the norm's remaining bytes with all of "
                          "RoPE's in the last this-many dispatches before the next item; None: one after the other")
    rope_output_spans_input: bool = Field(
        False, description="the fused RoPE kernel, given an input it cannot donate, allocates the input's "
                           "data_size with the input's strides: for a column view of a fused q|k|v projection "
                           "that is the fused buffer's span from the view's first element to its last, not the "
                           "view's own width (MLX CUDA rope.cu)")


class GemmWorkspace(Strict):
    """cuBLASLt's workspace for a matmul (MLX CUDA ``CublasGemm::execute``: ``heuristic_.workspaceSize`` bytes
    from MLX's allocator, added to the encoder's temporaries, so alive until the graph completes). Which
    algorithm (and workspace) the heuristic picks is cuBLASLt's choice per shape; this is the charged bound."""

    max_rows: PosInt = Field(description="matmuls of at most this many rows are charged (more rows: measured none)")
    matmuls: list[Literal["mlp_down"]] = Field(description="which matmuls of a layer are charged")
    bytes_per_output_element: PosInt = Field(description="workspace bytes per element of the matmul's output")
    max_bytes: PosInt = Field(description="MLX's CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (the cap per matmul)")
    source: str = Field(min_length=1, description="where the numbers come from")


class Donation(Strict):
    """Which single-use inputs an op of the backend writes into instead of allocating (read by the item
    formulas, peak/ops/). Why per backend: on CUDA an op's inputs stay referenced by the command encoder until
    the GPU finished their graph (``add_temporary``), so only an input nothing else has read can be donated;
    CPU and Metal items keep their own measured rules (defaults: no donation assumed)."""
    residual_add: bool = Field(
        False, description="the block's residual add (h = x + r) writes into r, the sublayer's output that nothing "
                           "else reads, so it allocates nothing (set_binary_op_output_data: VectorVector donates a "
                           "donatable operand)")
    residual_add_whole_call: bool = Field(
        False, description="with residual_add false: the adds are donated (measured) but charged as a bound against "
                           "CUDA graph placement, and that bound is dropped for a call whose every graph lies inside "
                           "the graph window (executor.graph_window_max): then nothing of the call can have been "
                           "freed at the window's end, so where the graphs end cannot move any byte out of it")
    rope_single_use_input: bool = Field(
        False, description="RoPE of a (B, H, L, D) view of a projection nothing else reads writes in place "
                           "(rope.cu: ndim <= 4 and is_donatable: copy_shared_buffer); a view of a fused q|k|v buffer "
                           "is shared and never donated (fast_ops.rope_output_spans_input)")
    qk_norm_single_use_input: bool = Field(
        False, description="a per-head q/k RMSNorm of a separate projection reshaped to (B, L, H, D) (qk_norm: heads) "
                           "writes in place (rms_norm.cu: a row-contiguous donatable input); never for views of a "
                           "fused or gated projection (shared buffer) or a norm after the transpose (copied first)")
    source: str | None = None


class RouteTable(Strict):
    mlx_versions: str = Field(min_length=1, description="version range, e.g. '>=0.32.3,<0.33' (first table that matches wins)")
    description: str | None = None
    executor: Executor
    fast_ops: FastOps = Field(default_factory=FastOps)
    donation: Donation = Field(default_factory=Donation)
    gemm_workspace: GemmWorkspace | None = Field(None, description="cuBLASLt matmul workspace (absent: none)")
    fallback: FallbackCosts
    routes: list[Route] = Field(min_length=1, description="first matching rule wins; the last should match anything")

    @field_validator("mlx_versions")
    @classmethod
    def _range(cls, v: str) -> str:
        check_range(v)  # packaging's PEP 440 reading: '>=abc', '~', '*', '===', empty ranges refused
        return v


class KernelRoutesFile(Strict):
    schema_: str | None = Field(None, alias="$schema")
    backend: Literal["metal", "cuda", "cpu"]
    description: str | None = None
    supports_bool_mask: bool = Field(
        description="false: a fused kernel given a bool mask first materializes where(mask, 0, -inf) as (B, n_q, qL, kL)")
    bool_to_additive_buffers: Annotated[float, Field(ge=0)] = Field(
        0.0, description="score-sized buffers that conversion allocates (full_like zeros, full_like -inf, where)")
    tables: list[RouteTable] = Field(min_length=1)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
