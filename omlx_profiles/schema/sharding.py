"""Pydantic model of ``profiles/mlx_lm/sharding.yaml``: the single source of ``schema/sharding.schema.json``.

One entry per mlx-lm module, keyed by the module name (``mlx_lm.models.<module>``), so a later move of
per-module facts into ``profiles/mlx_lm/<module>.yaml`` can take each entry as it is.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .family import Strict

# ``*`` stands for any item of a module list (``self_attn.*.q_proj``: every attention of a layer's list)
Path_ = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.*]*$", max_length=200)]
Module = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_]*$", max_length=80)]
Share = Literal["divided", "replicated"]


class CachePlan(Strict):
    """Per cache kind: does a rank hold 1/N of it (``divided``) or all of it (``replicated``)?"""

    attention: Share = Field(description="full / sliding / chunked K/V rows: divided when the K/V projections split")
    latent: Share = Field(description="MLA latent cache (kv_lora_rank + rope): no module shards kv_a_proj")
    indexer: Share = Field(description="DSA indexer keys")
    state: Share = Field(description="recurrent state (gated DeltaNet / Mamba): divided when the mixer's input splits")


class TensorPlan(Strict):
    """What ``Model.shard(group)`` does (tensor parallelism)."""

    all_to_sharded: list[Path_] = Field(default_factory=list,
                                        description="projections split on the output axis (each rank: 1/N of them)")
    sharded_to_all: list[Path_] = Field(default_factory=list,
                                        description="projections split on the input axis, followed by an all_sum")
    heads: list[Path_] = Field(default_factory=list, description="tensors split along the head axis")
    divided: list[Path_] = Field(default_factory=list, description="counts divided by the group size")
    custom: list[Path_] = Field(default_factory=list, description="shard_inplace with a custom rule (split evenly)")
    vocab: Literal["sharded", "replicated"] = Field(description="whether lm_head is split over the ranks")
    caches: CachePlan
    via: Module | None = Field(None, description="the module whose Model.shard this one calls")


class ModulePlan(Strict):
    tensor: TensorPlan | None = Field(None, description="absent: the module has no Model.shard")
    pipeline: bool = Field(description="model.model.pipeline(group) exists (PipelineMixin)")
    pipeline_split: Literal["mixin", "own_default", "extra_to_first_layers", "own"] = Field(
        "mixin", description="how pipeline() assigns layers to ranks: mixin = PipelineMixin's (even, the low ranks "
                             "take the extra layers, or the given split); own_default = its own default, the "
                             "mixin's for a given split; extra_to_first_layers = even, the high ranks (first "
                             "layers) take the extra, no split argument; own = another rule (not modelled)")


class ShardingFile(Strict):
    mlx_lm: str = Field(max_length=40, description="the mlx-lm version the plan was read from")
    modules: dict[Module, ModulePlan]
