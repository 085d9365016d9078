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

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

PosInt = Annotated[int, Field(strict=True, gt=0)]
#: The deepest real checkpoints have ~130 layers (Llama-3.1-405B 126, Nemotron-H-56B 118). Every estimate
#: walks the layers, and a chart or fit costs ~0.1-0.2 s per layer on a 2-core machine (4,096 layers: a
#: chart ran for minutes, fit ~25 s), so the limit is twice the deepest real model (see README, limits).
MAX_LAYERS = 256
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
    v_head_dim: NonNegInt | None = Field(
        None, description="value width; default: the key width (deepseek_v32 stores zero values as wide as the "
                          "keys); 0: key-only (minimax_m3_vl updates the cache with zero-width values)")


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
    slot: bool = Field(False, description="mlx-lm still allocates a cache object for the layer that nothing ever "
                                          "writes (0 bytes; nemotron-nas blocks whose attention is a linear)")


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
    vision_params: PosInt | None = Field(
        None, description="a VLM checkpoint's vision tower + projector parameters, not in params: the upper bound "
                          "omlx_profiles/estimate/weights/vision.py computes from the config's vision_config")




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
    kv_bits_fails: Annotated[str, Field(min_length=3, max_length=600)] | None = Field(
        None, description="why mlx-lm's module crashes once the KV cache is quantized (kv_bits): the estimate "
                          "refuses kv_bits for this model instead of giving a number mlx-lm never reaches")
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
