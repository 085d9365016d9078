"""The resolved profile: plain frozen dataclasses the estimator reads without any validation cost.

``Profile.from_variant`` turns a ``CompleteVariant`` (validated, inheritance applied) into per-layer
``CacheEntry`` tuples with every width filled in, so the arithmetic never has to ask "which default?".
What the readers of a resolved profile still need from the declaration is kept here as plain data
(the pattern's period, each state tensor's shape, which widths a kind states itself), so no reader
reaches back into the Pydantic variant: a Profile is the only resolved form.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from math import prod
from typing import Any

from ..units import DTYPE_BYTES
from ..errors import InputError
from ..schema.family import CompleteVariant, Layers

#: the width fields a layer kind may state itself instead of inheriting the variant's
WIDTH_FIELDS = ("num_kv_heads", "head_dim", "v_head_dim")


@dataclass(frozen=True, slots=True)
class StateTensorSpec:
    name: str
    elements: int
    dtype: str  # "model" or a dtype name
    shape: tuple[int, ...] = ()  # as declared: the peak's state ops need the conv window and recurrent dims

    def nbytes(self, act_bytes: int) -> int:
        return self.elements * (act_bytes if self.dtype == "model" else DTYPE_BYTES[self.dtype])


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One cache object of a layer, as mlx-lm allocates it.

    For the attention kinds a cached *row* (one token) holds ``n_kv * (k_width + v_width)`` elements:
    keys and values are separate buffers, sized from ``keys.shape[-1]`` and ``values.shape[-1]``, so an
    expanded-MLA layer (k 192 / v 128) is not ``2 * 192``.
    """

    kind: str  # full | sliding | chunked | latent | indexer | state | none
    n_kv: int = 0
    k_width: int = 0
    v_width: int = 0
    window: int = 0
    keep: int = 0
    chunk: int = 0
    tensors: tuple[StateTensorSpec, ...] = ()
    in_list: bool = False  # inside an mlx-lm CacheList: kv quantization skips it
    slot: bool = False  # kind none: mlx-lm still lists an (unwritten, empty) cache object for the layer
    # the WIDTH_FIELDS its layer kind states itself (the others come from the variant): `verify` names the
    # field a disagreement is in (layers.kinds.<k>.head_dim or the top-level head_dim); not part of the value
    own: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def row_elements(self) -> int:
        return self.n_kv * (self.k_width + self.v_width)

    def state_bytes(self, act_bytes: int) -> int:
        return sum(t.nbytes(act_bytes) for t in self.tensors)


@dataclass(frozen=True, slots=True)
class LayerType:
    name: str
    entries: tuple[CacheEntry, ...]

    @property
    def label(self) -> str:
        return "+".join(e.kind for e in self.entries)


@dataclass(frozen=True)
class Profile:
    """A resolved checkpoint: layer layout, attention dims, compute dtype, and where it came from."""

    name: str
    family: str
    mlx_model_type: str
    num_layers: int
    dtype: str
    layer_names: tuple[str, ...]  # kind name per layer
    layer_types: dict[str, LayerType]
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    v_head_dim: int | None = None
    hidden_size: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    tie_word_embeddings: bool | None = None
    max_context: int | None = None
    attention_sinks: bool = False
    kv_bits_fails: str | None = None  # why mlx-lm crashes with a quantized KV cache (kv_report refuses kv_bits)
    # a pipeline stage that sends its output to the next stage (mlx-lm's PipelineMixin: every rank but 0)
    # computes its last layer in every prefill chunk; a whole model leaves it to the cache update only
    sends_output: bool = False
    # one rank of a tensor-sharded model (mlx-lm ``Model.shard``): every attention and MLP block ends with an
    # ``all_sum`` (a CUDA graph node per block on the NCCL backend: twogpu_s5_rank*.json); 1: not sharded
    tensor_ranks: int = 1
    mla: Any = None
    moe: Any = None
    weights: Any = None
    ids: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    source: str = ""  # "profiles/llama.yaml#llama-3.1-8b" or "config.json"
    # len(pattern) for a repeating ``pattern`` layout, None for explicit per-layer ``types``: a shorter
    # model for a live check keeps one period (mlx-lm's ``i % p`` rules need the declared period)
    period: int | None = field(default=None, compare=False)
    # field -> where its value came from ("config.json: text_config.head_dim", "live probe: layer 3 keys"),
    # filled by extraction (omlx_profiles.extraction.from_config); YAML profiles leave it empty and `resolve --explain`
    # computes file:line from the registry instead.
    provenance: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_variant(cls, v: CompleteVariant, *, name: str, family: str, ids=(), aliases=(), source="") -> "Profile":
        names, types, period = _laid_out(v.layers, v.num_layers, v)
        return cls(
            name=name,
            family=family,
            mlx_model_type=v.mlx_model_type,
            num_layers=v.num_layers,
            dtype=v.dtype,
            layer_names=names,
            layer_types=types,
            num_heads=v.num_heads,
            num_kv_heads=v.num_kv_heads,
            head_dim=v.head_dim,
            v_head_dim=v.v_head_dim,
            hidden_size=v.hidden_size,
            intermediate_size=v.intermediate_size,
            vocab_size=v.vocab_size,
            tie_word_embeddings=v.tie_word_embeddings,
            max_context=v.max_context,
            attention_sinks=bool(v.attention_sinks),
            kv_bits_fails=v.kv_bits_fails,
            mla=v.mla,
            moe=v.moe,
            weights=v.weights,
            ids=tuple(ids),
            aliases=tuple(aliases),
            source=source,
            period=period,
        )

    def relaid(self, layers: Layers, *, name: str, **changes) -> "Profile":
        """A copy with another layer layout (``num_layers`` = its length unless given), widths as this
        profile's (plus ``changes``): what a test builds to contrast two layouts of one checkpoint."""
        base = dataclasses.replace(self, **changes)
        num_layers = changes.get("num_layers", len(layers.sequence()))
        names, types, period = _laid_out(layers, num_layers, base)
        return dataclasses.replace(base, name=name, num_layers=num_layers, layer_names=names, layer_types=types,
                                   period=period, provenance={})


def _laid_out(layers: Layers, num_layers: int, dims) -> tuple[tuple[str, ...], dict[str, LayerType], int | None]:
    """(kind name per layer, the kinds, the pattern's period) of ``layers``; ``dims`` gives the widths a
    kind does not state (a CompleteVariant or a Profile: both have head_dim, v_head_dim, num_kv_heads, mla)."""
    seq = layers.sequence()
    if layers.pattern is not None:
        names = tuple(seq[i % len(seq)] for i in range(num_layers))
    else:
        names = tuple(seq)
    types: dict[str, LayerType] = {}
    for kname in sorted(set(names)):
        spec = layers.kinds[kname]
        specs = spec if isinstance(spec, list) else [spec]
        in_list = isinstance(spec, list)
        types[kname] = LayerType(kname, tuple(_entry(s, dims, in_list) for s in specs))
    return names, types, (len(seq) if layers.pattern is not None else None)


def _entry(s, v, in_list: bool) -> CacheEntry:
    kind = s.kind
    own = tuple(f for f in WIDTH_FIELDS if getattr(s, f, None))
    if kind in ("full", "sliding", "chunked"):
        hd = s.head_dim or v.head_dim
        vd = s.v_head_dim or (v.v_head_dim if s.head_dim is None else None) or hd
        return CacheEntry(
            kind=kind,
            n_kv=s.num_kv_heads or v.num_kv_heads,
            k_width=hd,
            v_width=vd,
            window=getattr(s, "window", 0),
            keep=getattr(s, "keep", 0),
            chunk=getattr(s, "chunk", 0),
            in_list=in_list,
            own=own,
        )
    if kind == "latent":
        return CacheEntry(kind=kind, n_kv=1, k_width=v.mla.kv_lora_rank, v_width=v.mla.qk_rope_head_dim, in_list=in_list)
    if kind == "indexer":
        w = s.head_dim or v.mla.index_head_dim
        vw = w if s.v_head_dim is None else s.v_head_dim
        return CacheEntry(kind=kind, n_kv=1, k_width=w, v_width=vw, in_list=in_list, own=own)
    if kind == "state":
        return CacheEntry(
            kind=kind,
            tensors=tuple(StateTensorSpec(t.name, prod(t.shape), t.dtype, tuple(t.shape)) for t in s.tensors),
            in_list=in_list,
        )
    return CacheEntry(kind="none", in_list=in_list, slot=bool(getattr(s, "slot", False)))


def past_context(profile, tokens: int) -> str | None:
    """Why ``tokens`` is past the model's context (``max_context``: max_position_embeddings, times a
    YaRN factor where the config has one), or ``None``. One rule for every verdict: the CLI's and ``Estimator.fits``."""
    mc = getattr(profile, "max_context", None)
    if mc and tokens > mc:
        return (f"{tokens:,} tokens is past the model's context of {mc:,} (max_context): the memory numbers "
                "are computed, but the model was not trained for this length")
    return None


def require_profile(obj: object, what: str = "profile") -> "Profile":
    """``obj`` if it is a ``Profile``, else an ``InputError`` naming the argument: ``Estimator(42)`` or the
    facade's ``set_profile("qwen3-8b")`` failed later with an ``AttributeError`` from deep inside."""
    if isinstance(obj, Profile):
        return obj
    hint = " (a Resolution: pass resolution.profile)" if hasattr(obj, "profile") else ""
    raise InputError(f"{what} must be an omlx_profiles Profile (e.g. omlx_profiles.resolve(model_id).profile){hint}, "
                     f"got {type(obj).__name__} {obj!r:.40}")
