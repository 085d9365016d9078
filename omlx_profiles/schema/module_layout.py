"""Layout shapes of a module recipe: how mlx-lm's ``make_cache`` lays cache kinds over the layers (modulo,
``layer_types``, cycle, index list, char map, flags, per-layer lists, KV-shared tail).

Split out of ``schema.module`` (one job: the per-layer pattern); ``schema.module`` re-exports every name.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .module_types import Formula, Key, KeyPath, KindName, Reason, _Strict, _formula  # noqa: F401


class Modulo(_Strict):
    """Layer i is ``kind`` iff ``i % period == residue`` (``last``: period - 1), else ``else``."""

    period: Key | Annotated[int, Field(strict=True, gt=0)]
    residue: Literal["last"] | Annotated[int, Field(strict=True, ge=0)] | Annotated[str, Field(max_length=200)] = Field(
        "last", description="'last' (period - 1), an integer, or a formula over config keys (jamba attn_layer_offset)")
    kind: KindName
    other: KindName = Field(alias="else")
    tail: KindName | None = Field(
        None, description="layers i >= (count // period) * period (the incomplete last group) are this kind")
    needs_residue: bool = Field(
        False, description="mlx-lm indexes layer `residue` (its first `kind` layer): a count <= residue fails")

    @field_validator("residue")
    @classmethod
    def _residue(cls, v):
        return v if v == "last" else _formula(v)

    def kinds(self) -> set[str]:
        return {self.kind, self.other} | ({self.tail} if self.tail else set())


class LayerTypes(_Strict):
    """Layer i's kind is ``map[layer_types[i]]`` (``else`` for other strings); missing -> ``default``."""

    key: Key = "layer_types"
    map: dict[str, KindName]
    other: KindName | None = Field(None, alias="else")
    default: Modulo | Flags | KindName | None = Field(
        description="layout when the config has no layer_types (null: mlx-lm has none and fails)")
    length: bool = Field(False, description="mlx-lm builds one layer per entry: the count key is not read")
    requires: list[str] = Field(
        default_factory=list, description="entries mlx-lm looks up with list.index (e.g. the first full-attention "
                                          "layer's mask): a config whose list lacks one fails to load")
    ints: bool = Field(False, description="the list holds integers (mimo_v2_flash hybrid_layer_pattern, 1 = sliding): "
                                          "map keys are their decimal strings ('0', '1')")

    def kinds(self) -> set[str]:
        out = set(self.map.values()) | ({self.other} if self.other else set())
        if isinstance(self.default, (Modulo, Flags)):
            out |= self.default.kinds()
        elif self.default:
            out.add(self.default)
        return out


class Cycle(_Strict):
    """A list of strings cycled over the layers (recurrent_gemma ``block_types``): ``map[entry]``, else ``else``."""

    key: Key
    also: list[Key] = Field(default_factory=list, description="keys tried in order when `key` is null/absent")
    map: dict[str, KindName]
    other: KindName | None = Field(None, alias="else")
    default: list[str] | None = Field(None, description="the list when the config has none (mlx-lm's default)")


class Indices(_Strict):
    """Layer i is ``kind`` iff ``i + base`` is in the config's index list (``key``, dotted for a nested
    dict: ``linear_attn_config.kda_layers``), else ``else``; no list -> ``default``."""

    key: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$", max_length=120)]
    base: Literal[0, 1] = 0
    kind: KindName
    other: KindName = Field(alias="else")
    default: LayerTypes | KindName | None = Field(
        None, description="layout when the list is null/absent (null: mlx-lm fails without it)")

    def kinds(self) -> set[str]:
        out = {self.kind, self.other}
        if isinstance(self.default, LayerTypes):
            out |= self.default.kinds()
        elif self.default:
            out.add(self.default)
        return out


class Chars(_Strict):
    """A string pattern over the layers, one character per layer: cycled (exaone4 'LLLG') or, with ``length``,
    the whole stack (nemotron_h's ``hybrid_override_pattern`` 'M-M-M*-'); ``map[char]``, else ``else``; null ->
    ``none``. With ``lists`` a per-layer list of block names stands in for a null pattern (``names`` spells each
    as its character), as mlx-lm's ``__post_init__`` normalizes it."""

    key: Key
    map: dict[Annotated[str, Field(min_length=1, max_length=1)], KindName]
    other: KindName | None = Field(None, alias="else", description="kind of a character not in map (absent: such a "
                                                                 "character is refused, as mlx-lm refuses it)")
    none: KindName | None = Field(None, description="kind of every layer when the pattern (and every list) is "
                                                    "null/absent (absent: such a config is refused)")
    length: bool = Field(False, description="one layer per character: the pattern's length is the layer count "
                                            "(the count key is only compared with it)")
    lists: list[Key] = Field(default_factory=list, max_length=4,
                             description="keys of a per-layer list of block names, tried in order (the first "
                                         "non-empty wins) when the pattern is null")
    names: dict[Annotated[str, Field(min_length=1, max_length=40)], Annotated[str, Field(min_length=1, max_length=1)]] = \
        Field(default_factory=dict, description="block name -> its character, for 'lists' (another name is refused)")
    as_string: bool = Field(False, description="the extracted profile writes its layers as the characters (the "
                                               "registry family spells them so)")

    @model_validator(mode="after")
    def _lists(self):
        if bool(self.lists) != bool(self.names):
            raise ValueError("'lists' and 'names' are given together")
        if self.as_string and not self.length:
            raise ValueError("'as_string' needs 'length' (one character per layer)")
        return self

    def kinds(self) -> set[str]:
        return set(self.map.values()) | {k for k in (self.other, self.none) if k is not None}


DottedKey = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$", max_length=120)]


class Flags(_Strict):
    """A per-layer list of 0/1 (or booleans): layer i is ``kind`` iff entry i is truthy, else ``else``. ``keys``
    are tried in order (dotted for a nested dict: mlx-lm's ``sac.get("sparse_attention_freq", flat)``);
    no list -> ``default``."""

    keys: list[DottedKey] = Field(min_length=1, max_length=4)
    kind: KindName
    other: KindName = Field(alias="else")
    default: KindName = Field(description="every layer's kind when no list is given")

    def kinds(self) -> set[str]:
        return {self.kind, self.other, self.default}


class NullGate(_Strict):
    """When ``value`` (a formula over config keys, ``a or b`` for mlx-lm's fallbacks) is null/absent, every layer
    is ``kind`` whatever the shape below says (minimax_m3_vl: no index_block_size -> no sparse layer)."""

    value: Annotated[str, Field(min_length=1, max_length=200)]
    kind: KindName

    @model_validator(mode="after")
    def _formula(self):
        _formula(self.value)
        return self


class Flag(_Strict):
    """A boolean config key that, when false, makes every layer one kind (plamo2 ``mamba_enabled``)."""

    key: Key
    kind: KindName = Field(description="every layer's kind when the flag is false")


class PerLayer(_Strict):
    """Values that differ from layer to layer, read for layer i: on a key path, a config value that is a LIST
    is indexed by i (openelm ``num_kv_heads: [3, 3, 4, ...]``; nemotron-nas
    ``block_configs.attention.n_heads_in_group``: entry i of block_configs, then its keys). A shorter list
    than the layer count is an error (mlx-lm indexes it and fails too)."""

    kind_if: dict[KeyPath, KindName] = Field(
        default_factory=dict, description="boolean paths, in order: the first true for layer i makes it that kind "
                                          "('none': no attention and no cache entry; nemotron-nas attention.no_op)")
    num_kv_heads: Formula | None = Field(None, description="layer i's KV heads, a formula over (indexed) keys")
    num_heads: Formula | None = Field(
        None, description="layer i's query heads; the model-level num_heads is their largest (the peak model's "
                          "bound)")

    @model_validator(mode="after")
    def _formulas(self):
        for v in (self.num_kv_heads, self.num_heads):
            if v is not None:
                _formula(v)
        if not self.kind_if and self.num_kv_heads is None and self.num_heads is None:
            raise ValueError("give kind_if, num_kv_heads or num_heads")
        return self


class Layout(_Strict):
    """How ``make_cache`` lays caches over the layers (exactly one shape)."""

    count: Key = Field("num_hidden_layers", description="config key of the number of layers")
    shared: Key | None = Field(
        None, description="config key: that many LAST layers reuse an earlier layer's K/V and hold no cache entry")
    uniform: KindName | None = None
    modulo: Modulo | None = None
    layer_types: LayerTypes | None = None
    chars: Chars | None = None
    cycle: Cycle | None = None
    indices: Indices | None = None
    flag: Flag | None = Field(None, description="a switch that overrides the shape below when false")
    unless: NullGate | None = Field(None, description="a value that, when null, makes every layer one kind")
    per_layer: PerLayer | None = Field(None, description="per-layer values over the shape (lists in the config)")

    @model_validator(mode="after")
    def _one(self):
        shapes = ("uniform", "modulo", "layer_types", "chars", "cycle", "indices")
        given = [n for n in shapes if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one layout shape ({', '.join(shapes)}), got {given or 'none'}")
        if self.chars is not None and self.chars.length and (self.flag or self.unless or self.shared or self.per_layer):
            raise ValueError("a whole-stack chars pattern (length: true) is the layout by itself: no flag, unless, "
                             "shared or per_layer (they count layers by 'count', which the pattern replaces)")
        return self

    def kind_names(self) -> set[str]:
        out: set[str] = set()
        if self.modulo:
            out |= self.modulo.kinds()
        if self.uniform:
            out.add(self.uniform)
        if self.layer_types:
            out |= self.layer_types.kinds()
        if self.indices:
            out |= self.indices.kinds()
        if self.flag:
            out.add(self.flag.kind)
        if self.unless:
            out.add(self.unless.kind)
        if self.cycle:
            out |= set(self.cycle.map.values()) | ({self.cycle.other} if self.cycle.other else set())
        if self.chars:
            out |= self.chars.kinds()
        if self.per_layer:
            out |= set(self.per_layer.kind_if.values()) - {"none"}
        return out
