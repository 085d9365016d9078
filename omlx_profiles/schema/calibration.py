"""A measured-peak file (``profiles/calibration/<backend>/*.yaml``): what one device run recorded.

Why a schema: the calibration tests hold the estimator to these numbers, so a mistyped key or a peak
written as a string must be an error naming the file and line, as for every other data file (it was
checked by hand before). Keys that only document the run (``hf_id``, ``graphs_per_chunk``, ...) are
declared so that a typo in any key is caught.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .family import NonNegInt, Strict

Count = Annotated[int, Field(strict=True, ge=0)]


class MeasuredChunk(Strict):
    """One prefill call of a measured prompt: query and key lengths, bytes held before, its peak."""

    q_len: Count
    kv_len: Count
    before: Count
    peak: Count


class CalibrationPoint(Strict):
    """One measured prompt. The model is a ``config`` path (from the repository root), a ``config_inline``
    dict, or a registry ``profile`` id; the peak is ``peak_over_baseline`` (one value per repeat, weights
    excluded) or, for published numbers that include the weights, ``peak_total_bytes``."""

    model: str | None = None
    config: str | None = None
    config_inline: dict | None = None
    profile: str | None = None
    tokens: Count
    prefill_step_size: Count = 2048
    cached_tokens: Count = 0
    dtype: str | None = None
    peak_over_baseline: list[Count] = Field(default_factory=list)
    peak_over_baseline_max: Count | None = None
    peak_total_bytes: Count | None = None
    kv_bytes: Count | None = None
    chunks: list[MeasuredChunk] = Field(default_factory=list)
    # recorded for the reader, not used by the estimator's tests
    hf_id: str | None = None
    model_type: str | None = None
    source: list[str] | str | None = None
    weights_bytes: Count | None = None
    max_chunk_transient: Count | None = None
    max_chunk_transient_at: list[Count] | None = None
    last_token_transient_max: Count | None = None
    estimate_at_calibration: Count | None = None
    graphs_per_chunk: list[Count] | None = None
    most_in_flight: Count | None = None

    @field_validator("peak_over_baseline", mode="before")
    @classmethod
    def _one_repeat(cls, v):
        return [v] if isinstance(v, int) and not isinstance(v, bool) else v

    @model_validator(mode="after")
    def _has_a_peak(self):
        if not self.peak_over_baseline and self.peak_total_bytes is None:
            raise ValueError("needs peak_over_baseline or peak_total_bytes")
        return self


class CalibrationFile(Strict):
    backend: Literal["metal", "cuda", "cpu"]
    device: str = ""
    mlx: str = ""
    mlx_lm: str | None = None
    dtype: str | None = None
    source: str | None = None
    batch: NonNegInt | None = None
    cached_tokens: NonNegInt | None = None
    points: list[CalibrationPoint]
