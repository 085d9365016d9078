"""Pydantic models of an mlx-lm *module recipe* (``profiles/mlx_lm/<module>.yaml``) and of the module
index (``profiles/mlx_lm/index.yaml``).

Why data: what mlx-lm 0.32 does with a config.json (which keys its args class requires, which
defaults it fills, how ``make_cache`` lays caches over the layers) is knowledge about one module; a
recipe holds it, two small interpreters read it (``mlxlm.recipes``: config -> per-layer caches, and
recipe -> the tiny mlx-lm config the live check builds), and ``tests/test_recipes_live.py`` checks
every recipe against the real mlx-lm model. Adding a type that fits these shapes needs no Python.

A recipe names config *keys*, never numbers of a checkpoint: ``window: sliding_window`` means "the
RotatingKVCache's max_size is the config's ``sliding_window``" (with the args class's default when the
config has none).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from .traits import Traits  # noqa: F401 - part of the recipe model (re-exported)

from .module_types import Formula, Key, KeyPath, KindName, Reason, StateArray, _Strict, _formula  # noqa: F401
from .module_to_config import ToConfig
from .module_layout import (  # noqa: F401 - re-exported: part of the recipe model
    Chars, Cycle, DottedKey, Flag, Flags, Indices, LayerTypes, Layout, Modulo, NullGate, PerLayer)


class Args(_Strict):
    """The module's args class as ``ModelArgs.from_dict`` sees a config."""

    cls: str = Field(alias="class", description="'module.Class' of the args dataclass (messages, drift test)")
    required: list[Key] = Field(default_factory=list, description="fields without a default: absent -> TypeError")
    defaults: dict[Key, Any] = Field(default_factory=dict, description="defaults the args class fills")
    head_dim: Literal["optional", "explicit", "derived"] = Field(
        "optional",
        description="optional: head_dim or hidden // heads; explicit: the head_dim field; "
                    "derived: hidden // heads (a config head_dim is ignored)")
    kv_from_heads: bool = Field(False, description="a missing/null num_key_value_heads becomes num_attention_heads")
    mha: bool = Field(False, description="the module has no KV-head field: every attention head has its own K/V "
                                         "(a config num_key_value_heads is ignored)")
    lengths: dict[Key, Key] = Field(
        default_factory=dict, description="list key -> count key: __post_init__ raises ValueError when the list "
                                          "is given with another length (smollm3 no_rope_layers)")
    keys: dict[Literal["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
                       "head_dim", "vocab_size", "intermediate_size", "max_position_embeddings"], KeyPath] = Field(
        default_factory=dict, description="canonical name -> this module's config key (gpt2: n_layer, ...), or a "
                                          "dotted path into a nested config object (dbrx: attn_config.kv_n_heads)")


class KindRecipe(_Strict):
    """One layer kind: which cache class, and which config keys give its widths (default: the model's)."""

    cache: Literal["full", "sliding", "chunked", "latent", "indexer", "none", "state"]
    window: Key | Annotated[list[Key], Field(min_length=1, max_length=4)] | None = Field(
        None, description="sliding: the config key of RotatingKVCache max_size; a list: keys tried in order, the "
                          "first non-null wins (plamo3: sliding_window overrides window_size)")
    chunk: Key | None = Field(None, description="chunked: the config key of ChunkedKVCache chunk_size")
    num_kv_heads: list[Key | Annotated[int, Field(strict=True, gt=0)]] | None = Field(
        None, description="config keys tried in order for this kind's KV heads (first non-null wins); an integer "
                          "is a constant of the module (gpt_bigcode's multi-query attention: 1)")
    num_kv_heads_if: Key | None = Field(
        None, description="num_kv_heads applies only when this config flag is true (gemma4 attention_k_eq_v); "
                          "the module's default for the flag counts when the config omits it")
    head_dim: list[Key] | None = Field(None, description="config keys tried in order for this kind's head width")
    slot: bool = Field(False, description="cache: none only: mlx-lm still puts a cache object in the list for the "
                                          "layer, and nothing writes it (nemotron-nas attention replaced by a linear)")
    num_kv_heads_is: Formula | None = Field(
        None, description="this kind's KV heads as an integer or formula (recurrent_gemma: 1), over num_kv_heads")
    head_dim_is: Formula | None = Field(None, description="this kind's head width as an integer or formula")
    v_head_dim_is: Formula | None = Field(
        None, description="this kind's value width as an integer or formula when it differs from the key width "
                          "(0: a key-only cache, minimax_m3_vl's indexer stores zero-width values)")
    arrays: list[StateArray] | None = Field(
        None, min_length=1, max_length=8,
        description="state: the ArraysCache's arrays in slot order (every slot mlx-lm fills by the first call)")

    @model_validator(mode="after")
    def _fields(self):
        for f in (self.num_kv_heads_is, self.head_dim_is):
            _formula(f)
        if (self.cache == "state") != (self.arrays is not None):
            raise ValueError("'arrays' is given exactly for cache: state")
        if (self.cache == "sliding") != (self.window is not None):
            raise ValueError("'window' is given exactly for cache: sliding")
        if (self.cache == "chunked") != (self.chunk is not None):
            raise ValueError("'chunk' is given exactly for cache: chunked")
        if self.slot and self.cache != "none":
            raise ValueError("'slot' applies to cache: none")
        return self


# a list is an mlx-lm CacheList (one member too: minimax_m3_vl wraps a dense layer's KVCache in CacheList(KVCache()))
KindSpec = Union[KindRecipe, Annotated[list[KindRecipe], Field(min_length=1, max_length=4)]]


class Source(_Strict):
    """A public config this recipe was checked against: where it was read (search-tool id), at which revision."""

    model: str
    where: str
    revision: str | None = None
    file: str | None = Field(None, description="tests/configs/<file> holding the config")


class Shrink(_Strict):
    """The live harness (``live.build.shrink_config``) may shrink real configs of this text stack: their cache
    layout survives (``tests/test_live_harness.py`` builds both and compares). How the module's head width,
    hidden size and MLA ranks behave is read from the rest of the file (``args.head_dim``, ``mla``, state
    arrays, ``attention``); only what it cannot say is here."""

    widths: list[Key] = Field(default_factory=list, description="further MLP width keys set to the small width "
                                                                "(lfm2 block_ff_dim)")
    sets: dict[Key, Any] = Field(default_factory=dict, description="constants a shrunk config needs "
                                                                   "(lfm2: block_auto_adjust_ff_dim false)")


class Live(_Strict):
    """The live check: config keys over the generic tiny model (hidden 64, 4 heads, 2 KV heads, ...)."""

    config: dict[Key, Any] = Field(default_factory=dict)
    also: list[dict[Key, Any]] = Field(
        default_factory=list, max_length=4,
        description="further overlays over config, each checked too (N 1/255/256/257, both schedules): the other "
                    "branch of a flag, an alternative key (gpt_bigcode multi_query: false)")
    top: dict[Key, Any] = Field(default_factory=dict, description="wrapper: top-level keys beside the text config")
    kv_bits: bool = Field(True, description="False: a cache kind has no to_quantized (or crashes), skip kv_bits runs")
    long: bool = Field(True, description="also run N=3000 (replayed lazily: the caches' shapes, nothing evaluated)")
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    shrink: Shrink | None = Field(None, description="the live harness shrinks real configs of this text stack")


class Text(_Strict):
    """A wrapper module (VLM): the language model's config sits under ``key``; ``args`` describes the
    inner args class. ``optional``: a config without ``key`` is itself the text config (qwen3_vl)."""

    key: Key = "text_config"
    optional: bool = False
    wrapper_required: list[Key] = Field(default_factory=lambda: ["model_type"],
                                        description="top-level fields the wrapper's args class requires")
    recipe: Key | None = Field(
        None, description="the module whose recipe reads the text config (gemma3 -> gemma3_text): this file then "
                          "gives no args / layout / kinds of its own")
    sets: dict[Key, Any] = Field(default_factory=dict, description="values the wrapper's __post_init__ writes into "
                                                                   "the text config, whatever it says")
    defaults: dict[Key, Any] = Field(default_factory=dict, description="values it writes where the text config "
                                                                       "lacks the key")
    from_top: dict[Key, Key] = Field(default_factory=dict, description="text key := this top-level key of the "
                                                                       "wrapper config (its default: top_defaults)")
    top_defaults: dict[Key, Any] = Field(default_factory=dict, description="the wrapper args class's defaults")


class TextByType(_Strict):
    """A wrapper whose language model is another module's, picked by the text config's ``model_type``
    (mlx-lm's mistral3.py: ``ministral3`` -> ministral3.Model, ``mistral4`` -> mistral4.Model, anything else
    llama.Model). Unlike ``text`` (one inner recipe, resolved when the files load), the choice needs the
    config, so extraction and the live harness make it; the file stays traits-only."""

    key: Key = "text_config"
    args_class: str = Field(description="'module.Class' of the wrapper's args class (messages)")
    wrapper_required: list[Key] = Field(default_factory=lambda: ["model_type"],
                                        description="top-level fields the wrapper's args class requires")
    modules: dict[Key, Key] = Field(min_length=1, description="text model_type -> the module whose recipe reads "
                                                               "the text config")
    default: Key = Field(description="the module for any other text model_type, or none")
    defaults: dict[Key, Any] = Field(default_factory=dict, description="values the wrapper's __post_init__ writes "
                                                                       "where the text config lacks the key")
    make_cache: bool = Field(
        True, description="false: the wrapper defines no make_cache, so make_prompt_cache gives every text layer an "
                          "unbounded KVCache: the inner recipe's sliding layers are full caches here (the window "
                          "only masks attention)")

    def module_for(self, text_model_type: str | None) -> str:
        """The module that builds the language model for this text ``model_type``."""
        return self.modules.get(text_model_type or "", self.default)


class Ignore(_Strict):
    """A config key mlx-lm does not honour, with conditions: no note when ``unless`` is false in the config
    (the config itself already switches the ignored key off, e.g. ``use_sliding_window: false``), or when
    ``only_without`` is given (the key is honoured through that one)."""

    reason: Reason
    unless: Key | None = None
    only_without: Key | None = Field(
        None, description="said only when this key is absent or null (llama: sliding_window matters only through "
                          "layer_types)")
    unless_equal: Key | None = Field(
        None, description="not said when the config's value equals this extracted field (nemotron_h: an "
                          "attention_head_dim equal to the head_dim mlx-lm derives changes nothing)")


class Attention(_Strict):
    """Attention widths a module computes from other keys instead of the args rule, as formulas over config
    keys (``schema.formula``). Expanded MLA (deepseek_v2-shaped) caches K/V for every query head: keys
    ``qk_nope_head_dim + qk_rope_head_dim`` wide, values ``v_head_dim``. Each given width replaces the model's
    (and so every full/sliding/chunked kind's that does not set its own)."""

    num_kv_heads: Formula | None = Field(None, description="e.g. 'num_attention_heads' (K/V per query head)")
    head_dim: Formula | None = Field(None, description="key width, e.g. 'qk_nope_head_dim + qk_rope_head_dim'")
    v_head_dim: Formula | None = Field(None, description="value width when it differs from the key width")

    @model_validator(mode="after")
    def _formulas(self):
        for v in (self.num_kv_heads, self.head_dim, self.v_head_dim):
            _formula(v)
        if self.num_kv_heads is None and self.head_dim is None and self.v_head_dim is None:
            raise ValueError("give at least one of num_kv_heads, head_dim, v_head_dim")
        return self


class ModuleRecipe(_Strict):
    """``profiles/mlx_lm/<module>.yaml``: one mlx-lm module as data.

    ``args``, ``layout`` and ``kinds`` are given together (an extraction recipe) or not at all: a file
    without them holds only the module's compute ``traits`` while its extraction is still Python (or not
    yet written)."""

    module: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
    mlx_lm: str = Field(description="the mlx-lm version this recipe was read from and verified against")
    checkpoint_model_type: Key | None = Field(
        None, description="the model_type this module's checkpoints say when mlx-lm cannot import the module by it "
                          "(lfm2-vl.py: checkpoints say 'lfm2_vl', and mlx_lm.load raises 'Model type lfm2_vl not "
                          "supported'): coverage lists that type, the live harness builds the module for it")
    args: Args | None = None
    text: Text | None = Field(None, description="wrapper: where the language model's config is")
    text_by: TextByType | None = Field(
        None, description="wrapper whose language model's module depends on the text config's model_type "
                          "(traits-only file)")
    layout: Layout | None = None
    kinds: dict[KindName, KindSpec] | None = Field(None, min_length=1)
    traits: Traits = Field(default_factory=Traits, description="compute traits for the prefill peak's op model")
    mla: list[Key] | None = Field(None, description="config keys of the MLA ranks (latent/indexer kinds; with "
                                                    "full kinds: expanded MLA, the ranks the peak model reads)")
    dims: dict[Key, Formula] = Field(
        default_factory=dict,
        description="values the module computes instead of reading a config key (minicpm3: v_head_dim = "
                    "'hidden_size // num_attention_heads'): the rest of the recipe reads the name as that value, "
                    "whatever the config says")
    attention: Attention | None = Field(None, description="attention widths computed from other keys (expanded MLA)")
    ignores: dict[Key, Reason | Ignore] = Field(
        default_factory=dict, description="config keys mlx-lm does not honour, and why (said as a note when set)")
    kv_bits_fails: Reason | None = Field(
        None, description="why the module crashes once its KV cache is quantized (kv_bits): the extracted profile "
                          "carries it and the estimate refuses kv_bits; the live check requires mlx-lm to fail too")
    unsupported: Reason | None = Field(
        None, description="why this project does not profile the module (its layout cannot be expressed, or it "
                          "cannot be built and checked live here): a file without args / layout / kinds")
    live: Live = Field(default_factory=Live)
    to_config: ToConfig | None = Field(
        None, description="profile -> this module's config (the registry families' live check at real dims)")
    sources: list[Source] = Field(default_factory=list)
    notes: list[Reason] = Field(default_factory=list)

    @property
    def extracts(self) -> bool:
        """True when the file is an extraction recipe (args, layout, kinds), not only traits."""
        return self.layout is not None

    @model_validator(mode="after")
    def _kinds_known(self):
        given = [n for n in ("args", "layout", "kinds") if getattr(self, n) is not None]
        if given and len(given) != 3:
            raise ValueError(f"args, layout and kinds are given together or not at all (got only {given})")
        if self.text_by is not None and (given or self.text is not None):
            raise ValueError("'text_by' is for a traits-only wrapper file (no args / layout / kinds / text)")
        if given and self.unsupported:
            raise ValueError("an extraction recipe (args, layout, kinds) cannot also be 'unsupported'")
        if not given and self.text is not None and self.text.recipe:
            return self  # a wrapper over another module's recipe (resolved when the files are loaded)
        if not given:
            if self.text is not None or self.mla or self.ignores or self.live.model_copy(update={"shrink": None}) != Live() \
                    or self.dims or self.attention \
                    or self.kv_bits_fails:
                raise ValueError("a traits-only file (no args / layout / kinds) holds only module, mlx_lm, traits, "
                                 "text_by, to_config, live.shrink, sources and notes")
            return self
        missing = sorted(self.layout.kind_names() - set(self.kinds))
        if missing:
            raise ValueError(f"layout names kinds {missing} that 'kinds' does not define")
        every = [k for v in self.kinds.values() for k in (v if isinstance(v, list) else [v])]
        if any(k.cache == "latent" for k in every) and not self.mla:
            raise ValueError("latent kinds need 'mla' (the config keys of the MLA ranks)")
        if any(k.cache == "indexer" and not (k.head_dim or k.head_dim_is is not None) for k in every) and not self.mla:
            raise ValueError("an indexer kind needs 'mla' (index_head_dim among the MLA keys) or its own head_dim")
        for v in self.dims.values():
            _formula(v)
        return self


class IndexEntry(_Strict):
    status: Literal["recipe", "python", "unsupported", "not yet"]
    reason: str | None = None


class RopeType(_Strict):
    """One RoPE type mlx-lm's ``initialize_rope`` builds (``mlx_lm/models/rope_utils.py``): what the config
    reader checks in a ``rope_scaling`` of this type and what it derives from it."""

    factor: Literal["required", "optional"] = Field(
        "optional", description="required: initialize_rope reads rope_scaling['factor'] for this type (absent: "
                                "KeyError there); optional: a factor given is still checked (a number >= 1)")
    extends_context: bool = Field(
        False, description="true (YaRN): the context is factor x original_max_position_embeddings when that is "
                           "more than max_position_embeddings (Qwen3's model card, vLLM); false: "
                           "max_position_embeddings alone")


class ModuleIndex(_Strict):
    """``profiles/mlx_lm/index.yaml``: mlx-lm's remapping, its RoPE types and every module's status."""

    mlx_lm: str
    remapping: dict[str, str]
    architecture_remapping: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="mlx_lm.utils.MODEL_ARCHITECTURE_REMAPPING: model_type -> {architecture "
                                          "(config 'architectures' entry) -> module}; checked before 'remapping'")
    rope_types: dict[str, RopeType] = Field(
        default_factory=dict, description="the RoPE types (rope_scaling 'type' / 'rope_type') mlx-lm's "
                                          "initialize_rope builds; any other raises ValueError there")
    plain_decoder: str | None = Field(
        None, description="the module of a plain decoder stack (attention + MLP, no compute traits): the oMLX "
                          "facade's set_model_info profile, which knows no model type, uses its op list")
    modules: dict[str, IndexEntry]

    @model_validator(mode="after")
    def _plain_decoder_listed(self) -> "ModuleIndex":
        if self.plain_decoder is not None and self.plain_decoder not in self.modules:
            raise ValueError(f"plain_decoder {self.plain_decoder!r} is not one of 'modules'")
        return self
