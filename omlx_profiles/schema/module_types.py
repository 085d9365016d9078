"""The small building blocks every module-recipe model shares: config-key names, kind names, formulas, and
the strict base (unknown fields are errors: a typo in a recipe must not pass silently).

Split out of ``schema.module`` so the layout shapes (``schema.module_layout``) and the recipe itself import
them from one place.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .formula import FormulaError, parse as parse_formula

Key = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=80)]
#: a config key, or a dotted path into a nested object of the config (dbrx ``attn_config.kv_n_heads``)
KeyPath = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,3}$", max_length=160)]
KindName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_*.-]+$", min_length=1, max_length=40)]
Reason = Annotated[str, Field(min_length=3, max_length=600)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _formula(v: Any) -> Any:
    if isinstance(v, str):
        try:
            parse_formula(v)
        except FormulaError as e:
            raise ValueError(str(e)) from None
    return v


#: an integer, or a formula over config keys (``schema.formula``: ints, keys, ``+ - * //``, ``or``)
Formula = Union[Annotated[int, Field(strict=True, ge=0)], Annotated[str, Field(min_length=1, max_length=200)]]


class StateArray(_Strict):
    """One array of an mlx-lm ``ArraysCache`` (batch axis left out): its shape as formulas over config keys."""

    name: Annotated[str, Field(min_length=1, max_length=64)]
    shape: list[Formula] = Field(min_length=1, max_length=8,
                                 description="dims without the batch axis, e.g. ['conv_kernel - 1', 'intermediate_size']")
    dtype: Literal["model", "bf16", "fp16", "fp32"] = Field(
        description="'model' = the activation dtype; fp32 where mlx-lm keeps the recurrent state in float32")

    @field_validator("shape")
    @classmethod
    def _formulas(cls, v):
        for x in v:
            _formula(x)
        return v
