"""The model-id naming table (``profiles/naming/ids.yaml``): suffixes that say how a converted repo stores
its weights, release words stripped to find a base architecture, ids refused as not MLX checkpoints.
Read by ``omlx_profiles.registry.naming``."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _regex(v: str) -> str:
    try:
        re.compile(v)
    except re.error as e:
        raise ValueError(f"not a regular expression: {e}") from None
    return v


class _Default(_Strict):
    mode: Literal["affine", "mxfp4", "nvfp4", "mxfp8"] = "affine"
    bits: Literal[2, 3, 4, 5, 6, 8]
    group: Literal[16, 32, 64, 128] | None = None
    why: str
    keeps_embeddings: bool = False


class _Suffix(_Strict):
    token: str
    mode: Literal["affine", "mxfp4", "nvfp4", "mxfp8"] | None = None
    bits: Literal[2, 3, 4, 5, 6, 8] | None = None
    float_bits: Literal[16, 32] | None = None
    marker: str | None = None
    default: _Default | None = None
    note: str | None = None

    @field_validator("token")
    @classmethod
    def _check(cls, v: str) -> str:
        return _regex(v)


class _Variant(_Strict):
    token: str

    @field_validator("token")
    @classmethod
    def _check(cls, v: str) -> str:
        return _regex(v)


class _Refuse(_Strict):
    match: str
    what: str
    why: str

    @field_validator("match")
    @classmethod
    def _check(cls, v: str) -> str:
        return _regex(v)


class _HFMethod(_Strict):
    method: str
    bits: list[Literal[2, 3, 4, 5, 6, 8]] | None = None  # the bits mlx-lm accepts (None: whatever the file says)
    why: str


class NamingTable(_Strict):
    version: Literal[1]
    refuse: list[_Refuse] = Field(default_factory=list)
    hf_quant_methods: list[_HFMethod] = Field(default_factory=list)
    hf_quant_refused: str = ""
    suffixes: list[_Suffix]
    prefixes: list[_Variant] = Field(default_factory=list)
    variants: list[_Variant] = Field(default_factory=list)
