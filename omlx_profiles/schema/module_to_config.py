"""The ``to_config:`` block of a module file: how a *resolved profile* is written back into the config this
mlx-lm module reads (``omlx_profiles.mlxlm.to_config``, the registry families' live check at real dims).

Why data: the inverse of a recipe (profile -> config keys) differs between modules only in key names,
constants, and which layout spelling the module honours (``layer_types``, a modulo period, a character
pattern). Those are facts about the module, so they sit in its file beside the forward recipe; the Python
that reads them names no model type.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .module_types import Key, StateArray, _Strict

#: a layer's cache role as ``to_config`` reads it from a profile
Role = Literal["full", "sliding", "chunked", "latent", "latent+indexer", "state", "none"]


class LayoutOut(_Strict):
    """How the per-layer roles are spelled in the config (at most one of layer_types / period / chars)."""

    roles: list[Role] = Field(min_length=1, description="the roles this module builds (others: a SynthError)")
    layer_types: dict[Role, str] | None = Field(
        None, description="role -> the entry of the config's layer_types list (written when a sliding layer "
                          "exists, or always with layer_types_always)")
    layer_types_always: bool = False
    period: Key | None = Field(
        None, description="mlx-lm's modulo rule: layer i is `special` iff i % k == k - 1; this key gets k")
    special: Role = "full"
    chars: dict[Role, str] | None = Field(
        None, description="role -> one character of a pattern string (nemotron_h's hybrid_override_pattern)")
    chars_key: Key | None = None
    window: Key | None = Field(None, description="the key of the sliding window (written with a sliding layer)")
    window_default: int | None = Field(
        None, description="the window written when no layer slides (the key is then always written)")

    @model_validator(mode="after")
    def _one_spelling(self):
        given = [n for n in ("layer_types", "period", "chars") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of layer_types, period, chars (got {given})")
        if (self.chars is None) != (self.chars_key is None):
            raise ValueError("'chars' and 'chars_key' are given together")
        return self


class MoEOut(_Strict):
    """How the module's config names its experts (written from the profile's ``moe``)."""

    experts: Key
    top_k: Key = "num_experts_per_tok"
    width: Key | None = Field(None, description="the expert MLP width")
    shared_width: Key | None = Field(None, description="the expert width when the profile has shared experts, else 0")
    shared_count: Key | None = Field(None, description="the shared-expert count, null when there are none")
    set: dict[Key, Any] = Field(default_factory=dict, description="constants written with the expert keys")
    dense: Literal["layer_list", "layer_count", "zero"] | None = Field(
        None, description="how dense=True switches the experts off (the cache does not change): dense_key = every "
                          "layer index / the layer count (0 when not dense), or zero: experts and top_k 0 and no "
                          "other expert key")
    dense_key: Key | None = None
    optional: bool = Field(False, description="a profile without moe is written as dense (zero), not refused")

    @model_validator(mode="after")
    def _dense(self):
        if (self.dense in ("layer_list", "layer_count")) != (self.dense_key is not None):
            raise ValueError("'dense_key' is given exactly for dense: layer_list / layer_count")
        if self.optional and self.dense != "zero":
            raise ValueError("'optional' needs dense: zero")
        return self


class MLAOut(_Strict):
    """MLA ranks from the profile's ``mla`` (kv_lora_rank, qk_rope/nope_head_dim, v_head_dim, q_lora_rank)."""

    query_heads: Literal["cached", "any"] = Field(
        description="cached: the cache holds every query head (expanded MLA), so the real count is kept; any: "
                    "a latent cache has one head whatever the query heads (2 when shrinking)")
    indexer: dict[Literal["heads_default", "topk_default", "heads_small"], int] | None = Field(
        None, description="a DSA indexer (latent+indexer layers): mlx-lm's defaults for index_n_heads / index_topk, "
                          "and the head count of a shrunk model")


class Wrapper(_Strict):
    """A wrapper module: the text config under ``key``, built by ``text_module``'s to_config (or by this
    block with model_type ``text_model_type``), beside top-level keys."""

    key: Key = "text_config"
    text_module: Key | None = None
    text_model_type: str | None = None
    top: list[Key] = Field(default_factory=list, description="keys copied from the text config to the top level")
    refuse: dict[Role, str] = Field(default_factory=dict, description="role -> why this wrapper is not written")

    @model_validator(mode="after")
    def _inner(self):
        if (self.text_module is None) == (self.text_model_type is None):
            raise ValueError("give exactly one of text_module, text_model_type")
        return self


class ToConfig(_Strict):
    """Profile -> this module's config keys. Every key not listed is the generic base (layers, hidden,
    intermediate, vocab, heads, KV heads, eps, rope theta, tie, max positions)."""

    layout: LayoutOut | None = None
    head_dim: Key | None = Field("head_dim", description="the key of the head width; null: not written")
    derived_head_dim: bool = Field(
        False, description="mlx-lm computes the head width as hidden_size // num_attention_heads: a shrunk model "
                           "gets hidden = heads * head width, a full-size one must already agree")
    heads_from_hidden: bool = Field(
        False, description="the query-head count is hidden_size // head width (lfm2), not the profile's")
    same_kv_width: bool = True
    floats: list[Key] = Field(default_factory=list, description="keys written as float(head width)")
    copies: dict[Key, Key] = Field(default_factory=dict, description="key -> the written key it repeats")
    moe: MoEOut | None = None
    mla: MLAOut | None = None
    state: Literal["recipe", "arrays"] | None = Field(
        None, description="the state dims are solved back from the declared tensor shapes by the formulas of "
                          "this file's state kind (recipe) or of 'arrays' below")
    arrays: list[StateArray] | None = Field(
        None, min_length=1, max_length=8, description="state arrays (as a recipe kind's) when the file has no recipe")
    divisible: dict[Key, Key] = Field(
        default_factory=dict, description="key -> the key it must be a multiple of (mlx-lm raises otherwise)")
    state_default: dict[Key, Any] = Field(
        default_factory=dict, description="the state keys written when no layer is a state layer")
    set: dict[Key, Any] = Field(default_factory=dict, description="constants the module needs (not cache dims)")
    wrapper: Wrapper | None = None

    @model_validator(mode="after")
    def _state(self):
        if (self.layout is None) != (self.wrapper is not None and self.wrapper.text_module is not None):
            raise ValueError("'layout' is given unless a wrapper's text_module writes the text config")
        if (self.state == "arrays") != (self.arrays is not None):
            raise ValueError("'arrays' is given exactly for state: arrays")
        return self
