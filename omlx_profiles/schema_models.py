"""Pydantic models of a profile file: the single source of ``schema/profile.schema.json``.

A file describes one *family* (how its layers are laid out, which mlx-lm module builds it) and a list
of *variants*, one per real checkpoint (its numbers and the ids it answers to). A variant inherits
from the family's ``defaults`` and, with ``base:``, from another variant; see ``merge.py``.

Two levels of strictness:

* ``VariantEntry`` (what a file may contain): every field optional because it may be inherited, but
  unknown keys, wrong types, non-positive counts and bools-for-ints are rejected here already.
* ``CompleteVariant`` (after inheritance): the fields the estimator needs must be present, and the
  cross-field rules hold (a pattern tiles the layer count, a latent layer has MLA ranks, ...).
"""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from .versions import check_range

PosInt = Annotated[int, Field(strict=True, gt=0)]
MAX_LAYERS = 4096  # the deepest real checkpoint has ~130 layers; more is a typo (and would cost memory)
LayerCount = Annotated[int, Field(strict=True, gt=0, le=MAX_LAYERS)]
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
DType = Literal["bf16", "fp16", "fp32"]
Slug = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=120)]
ModelId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\s]+$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------------------------------
# Cache specs: what ONE cache entry of a layer holds (mlx-lm cache class + widths).
# --------------------------------------------------------------------------------------------------


class _AttnDims(Strict):
    num_kv_heads: PosInt | None = Field(None, description="KV heads of this layer (default: the variant's).")
    head_dim: PosInt | None = Field(None, description="Key width per head (default: the variant's).")
    v_head_dim: PosInt | None = Field(
        None, description="Value width per head when it differs from the key width (expanded MLA: 192/128)."
    )


class FullCache(_AttnDims):
    """mlx-lm ``KVCache``: grows in 256-token steps, never shrinks."""

    kind: Literal["full"]


class SlidingCache(_AttnDims):
    """mlx-lm ``RotatingKVCache(window, keep)``: bounded after the first call, window-1+chunk during a chunk."""

    kind: Literal["sliding"]
    window: PosInt = Field(description="max_size of the RotatingKVCache (the config's sliding_window).")
    keep: NonNegInt = 0


class ChunkedCache(_AttnDims):
    """mlx-lm ``ChunkedKVCache(chunk)`` (llama4): keeps the last ``chunk`` tokens, grows like KVCache."""

    kind: Literal["chunked"]
    chunk: PosInt


class LatentCache(Strict):
    """MLA latent ``KVCache``: one head, keys = kv_lora_rank latent, values = qk_rope_head_dim k_pe."""

    kind: Literal["latent"]


class IndexerCache(Strict):
    """DSA indexer ``KVCache`` (deepseek_v32): ``index_head_dim`` keys plus equal-size zero values."""

    kind: Literal["indexer"]
    head_dim: PosInt | None = Field(None, description="default: the variant's mla.index_head_dim")


class StateTensor(Strict):
    name: str = Field(min_length=1, max_length=64)
    shape: list[PosInt] = Field(min_length=1, max_length=8, description="shape without the batch axis")
    dtype: Literal["model", "bf16", "fp16", "fp32"] = Field(
        description="'model' = the activation dtype; gated-DeltaNet/Mamba2 SSM states are fp32 whatever the model"
    )


class StateCache(Strict):
    """mlx-lm ``ArraysCache``: constant bytes (conv window, recurrent state)."""

    kind: Literal["state"]
    tensors: list[StateTensor] = Field(min_length=1, max_length=8)


class NoCache(Strict):
    """A layer without a cache entry (KV-shared layers, MLP-only blocks of nemotron_h)."""

    kind: Literal["none"]


CacheSpec = Annotated[
    Union[FullCache, SlidingCache, ChunkedCache, LatentCache, IndexerCache, StateCache, NoCache],
    Field(discriminator="kind"),
]

# A layer kind holds one cache or a list of them (mlx-lm CacheList). The callable discriminator keeps
# validation errors to the branch that matches the input's shape.
LayerCaches = Annotated[
    Union[Annotated[CacheSpec, Tag("one")], Annotated[list[CacheSpec], Tag("list")]],
    Discriminator(lambda v: "list" if isinstance(v, list) else "one"),
]


class Layers(Strict):
    """How the layers are laid out: named layer kinds and either a repeating ``pattern`` or explicit ``types``.

    A layer kind is one cache spec or a list of them (mlx-lm ``CacheList``, e.g. MLA + DSA indexer).
    """

    kinds: dict[Annotated[str, Field(min_length=1, max_length=40)], LayerCaches] = Field(
        min_length=1
    )
    pattern: Annotated[list[str], Field(min_length=1)] | Annotated[str, Field(min_length=1)] | None = Field(
        None,
        description="Kind names repeated to cover the layers; a string means one character per layer "
        "(nemotron_h's hybrid_override_pattern). Must tile num_layers exactly unless cyclic is true.",
    )
    cyclic: bool = Field(
        False,
        description="Repeat the pattern and cut at num_layers (mlx-lm's `i % p` rules, e.g. gemma3's 34 layers with a period of 6).",
    )
    types: Annotated[list[str], Field(min_length=1)] | Annotated[str, Field(min_length=1)] | None = Field(
        None, description="One kind name per layer (the config's layer_types), length = num_layers."
    )

    @model_validator(mode="after")
    def _one_layout(self):
        if (self.pattern is None) == (self.types is None):
            raise ValueError("give exactly one of 'pattern' or 'types'")
        seq = self.sequence()
        unknown = sorted({k for k in seq if k not in self.kinds})
        if unknown:
            raise ValueError(f"layer kind(s) {unknown} are used but not defined in 'kinds' {sorted(self.kinds)}")
        if self.types is not None and self.cyclic:
            raise ValueError("'cyclic' applies to 'pattern', not to 'types'")
        for name, spec in self.kinds.items():
            if isinstance(spec, list):
                if not spec:
                    raise ValueError(f"kind {name!r}: an empty list of caches; use {{kind: none}}")
                if any(s.kind == "none" for s in spec):
                    raise ValueError(f"kind {name!r}: 'none' cannot be part of a cache list")
        return self

    def sequence(self) -> list[str]:
        seq = self.pattern if self.pattern is not None else self.types
        return list(seq) if isinstance(seq, str) else list(seq or [])


class MLA(Strict):
    """Multi-head latent attention dims (DeepSeek V2/V3 family)."""

    kv_lora_rank: PosInt
    qk_rope_head_dim: PosInt
    qk_nope_head_dim: PosInt
    v_head_dim: PosInt
    q_lora_rank: PosInt | None = None
    index_head_dim: PosInt | None = Field(None, description="DSA indexer key width (deepseek_v32)")
    index_n_heads: PosInt | None = None
    index_topk: PosInt | None = None


class MoE(Strict):
    num_experts: PosInt
    experts_per_token: PosInt
    moe_intermediate_size: PosInt | None = None
    shared_experts: NonNegInt = 0
    first_dense_layers: NonNegInt = Field(0, description="the first layers run a dense MLP instead of the experts "
                                          "(first_k_dense_replace)")

    @model_validator(mode="after")
    def _k_le_n(self):
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) exceeds num_experts ({self.num_experts})"
            )
        return self


class Weights(Strict):
    """What the checkpoint stores, for the weights term when no safetensors are at hand."""

    params: PosInt | None = Field(None, description="total parameter count")
    embedding_params: PosInt | None = Field(None, description="embedding (+ untied lm_head) parameters")
    bits: Literal[2, 3, 4, 5, 6, 8, 16, 32] | None = Field(None, description="quantization bits, 16 = bf16/fp16")
    group_size: PosInt | None = None
    bytes: PosInt | None = Field(None, description="exact weight bytes, when known")




class VariantDefaults(Strict):
    """The family's defaults: any variant field except identity."""

    mlx_model_type: str | None = None
    num_layers: LayerCount | None = None
    hidden_size: PosInt | None = None
    intermediate_size: PosInt | None = None
    vocab_size: PosInt | None = None
    num_heads: PosInt | None = None
    num_kv_heads: PosInt | None = None
    head_dim: PosInt | None = None
    v_head_dim: PosInt | None = None
    tie_word_embeddings: bool | None = None
    dtype: DType | None = None
    max_context: PosInt | None = None
    attention_sinks: bool | None = None
    mla: MLA | None = None
    moe: MoE | None = None
    layers: Layers | None = None
    weights: Weights | None = None


INHERITED_FIELDS: tuple[str, ...] = tuple(VariantDefaults.model_fields)


class VariantEntry(VariantDefaults):
    """One real checkpoint. Fields not given are inherited from ``base`` and then the family defaults."""

    name: Slug
    base: Slug | None = Field(None, description="another variant (any file) whose fields this one inherits")
    ids: list[ModelId] = Field(default_factory=list, description="Hugging Face ids this checkpoint answers to")
    aliases: list[ModelId] = Field(default_factory=list, description="short names (ollama-style, nicknames)")
    description: str | None = None


class ProfileFile(Strict):
    """A file in ``profiles/``: one family and its variants."""

    schema_: str | None = Field(None, alias="$schema")
    family: Slug
    description: str | None = None
    model_types: list[str] = Field(
        min_length=1, description="config.json model_type values (after mlx-lm's remapping) this family covers"
    )
    notes: list[str] = Field(default_factory=list, description="what mlx-lm does that a reader would not guess")
    defaults: VariantDefaults = Field(default_factory=VariantDefaults)
    variants: list[VariantEntry] = Field(min_length=1)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _unique_names(self):
        seen: set[str] = set()
        for v in self.variants:
            if v.name in seen:
                raise ValueError(f"variant name {v.name!r} appears twice in this file")
            seen.add(v.name)
        return self


class CompleteVariant(VariantDefaults):
    """A variant after inheritance: what the estimator needs is present and consistent."""

    num_layers: LayerCount
    dtype: DType
    layers: Layers
    mlx_model_type: str

    @model_validator(mode="after")
    def _cross_checks(self):
        lay = self.layers
        seq = lay.sequence()
        n = self.num_layers
        if lay.types is not None and len(seq) != n:
            raise ValueError(f"layers.types has {len(seq)} entries but num_layers is {n}")
        if lay.pattern is not None:
            if len(seq) > n:
                raise ValueError(f"layers.pattern ({len(seq)} entries) is longer than num_layers ({n})")
            if not lay.cyclic and n % len(seq) != 0:
                raise ValueError(
                    f"layers.pattern of {len(seq)} does not tile num_layers {n} "
                    f"({n} % {len(seq)} = {n % len(seq)}); fix one, or set cyclic: true if mlx-lm repeats it"
                )
        used = set(seq)
        for name, spec in lay.kinds.items():
            if name not in used:
                continue
            for s in spec if isinstance(spec, list) else [spec]:
                if s.kind in ("full", "sliding", "chunked"):
                    if (s.num_kv_heads or self.num_kv_heads) is None:
                        raise ValueError(f"layer kind {name!r} ({s.kind}) needs num_kv_heads (on the kind or the variant)")
                    if (s.head_dim or self.head_dim) is None:
                        raise ValueError(f"layer kind {name!r} ({s.kind}) needs head_dim (on the kind or the variant)")
                if s.kind == "latent" and self.mla is None:
                    raise ValueError(f"layer kind {name!r} is latent (MLA) but the variant has no 'mla' ranks")
                if s.kind == "indexer" and s.head_dim is None and (self.mla is None or self.mla.index_head_dim is None):
                    raise ValueError(f"layer kind {name!r} is a DSA indexer but no index_head_dim is given")
        return self


# --------------------------------------------------------------------------------------------------
# Kernel routes (profiles/kernels/*.yaml): which SDPA kernel a call takes, what the backend's executor
# keeps in flight, and what the non-SDPA "fast" ops cost where the backend decomposes them.
# --------------------------------------------------------------------------------------------------

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

    Memory of each route (per call, what the estimator charges; see ``omlx_profiles/peak/transient.py``):

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
    margin_graphs: NonNegInt = Field(0, description="graphs added to max_inflight_graphs on the safe side (calibrated: "
                                                    "what the measured peaks needed beyond the exact cap)")
    source: str = Field(min_length=1, description="where the numbers come from")


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
    kv_copy_all_layers: bool = Field(
        False, description="the old KV buffer of every growing layer is still held at the peak (else: only the in-flight layers')")
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
    source: str = Field(min_length=1)


class FastOps(Strict):
    rms_norm: FastOpCost | None = None
    rope: FastOpCost | None = None
    layer_norm: FastOpCost | None = None


class RouteTable(Strict):
    mlx_versions: str = Field(min_length=1, description="version range, e.g. '>=0.32.3,<0.33' (first table that matches wins)")
    description: str | None = None
    executor: Executor
    fast_ops: FastOps = Field(default_factory=FastOps)
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
