"""Pydantic model of a calibration file (``profiles/calibration/<backend>/*.yaml``): measured prefill peaks.

The single source of ``schema/v1/calibration.schema.json``. These files are the measurements the
estimator is tested against, so a typo in one (a key the loader ignores, a peak written as a string,
a point with no model) would silently weaken a test; ``validate`` checks them like every other data
file instead of leaving it to the hand-written checks of ``peak.calibration.load_calibration``.

Every key the writers emit (``omlx-profiles calibrate``, ``benchmarks/cuda/summarize.py``, the
hand-encoded Metal ladder) is declared; an unknown key is an error, as in family files.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PosInt = Annotated[int, Field(strict=True, gt=0)]
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
Text = Annotated[str, Field(min_length=1, max_length=500)]
# dtype as the writers spell it: the short names of family files, or MLX's own names
CalDType = Literal["bf16", "fp16", "fp32", "bfloat16", "float16", "float32"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChunkPeak(_Strict):
    """One ``generate_step`` call of the measured prefill."""

    q_len: PosInt = Field(description="query tokens of the call")
    kv_len: PosInt = Field(description="keys the call attends to (cached + this call)")
    before: NonNegInt = Field(description="bytes held over the baseline before the call")
    peak: NonNegInt = Field(description="peak bytes over the baseline during the call")


class PointEntry(_Strict):
    """One measured (model, prompt length, chunk size) point.

    The model is named by ``config`` (a config.json path from the repository root), ``config_inline``
    (the config itself) or ``profile`` (a registry id). The peak is ``peak_over_baseline`` (one value
    per repeat, weights excluded) or, for published whole-process numbers, ``peak_total_bytes``.
    """

    model: Text = Field(description="a label for the point (usually the checkpoint's name)")
    hf_id: Text | None = Field(None, description="the Hugging Face id the dims come from")
    config: Text | None = Field(None, description="config.json path, from the repository root")
    config_inline: dict[str, Any] | None = Field(None, description="the mlx-lm config itself")
    profile: Text | None = Field(None, description="a registry id")
    model_type: Text | None = None
    dtype: CalDType | None = Field(None, description="activation dtype (default: the file's)")
    prefill_step_size: PosInt = Field(description="mlx-lm prefill_step_size of the run")
    tokens: PosInt = Field(description="prompt tokens")
    cached_tokens: NonNegInt = Field(0, description="tokens already in the cache before the prompt")
    kv_bytes: NonNegInt | None = None
    weights_bytes: NonNegInt | None = None
    peak_over_baseline: list[NonNegInt] | None = Field(
        None, min_length=1, description="peak over the memory held before the prompt, one per repeat")
    peak_over_baseline_max: NonNegInt | None = None
    peak_total_bytes: PosInt | None = Field(None, description="published whole-process peak (weights included)")
    estimate_at_calibration: NonNegInt | None = Field(None, description="what the estimator said when measured")
    max_chunk_transient: NonNegInt | None = None
    max_chunk_transient_at: list[NonNegInt] | None = None
    last_token_transient_max: NonNegInt | None = None
    graphs_per_chunk: list[NonNegInt] | None = None
    most_in_flight: NonNegInt | None = None
    chunks: list[ChunkPeak] | None = None
    source: list[Text] | None = Field(None, description="result files the point was summarized from")
    ranks: PosInt | None = Field(None, description="mlx.distributed group size, when the point is one rank of a "
                                                   "sharded model (then rank and parallel too)")
    rank: NonNegInt | None = Field(None, description="this point's rank in the group (0 .. ranks-1)")
    parallel: Literal["tensor", "pipeline"] | None = Field(
        None, description="tensor: model.shard(group); pipeline: model.model.pipeline(group)")
    split: list[PosInt] | None = Field(None, description="pipeline layers per rank, when not mlx-lm's even split")

    @model_validator(mode="after")
    def _one_model_and_a_peak(self):
        shard = [k for k in ("ranks", "rank", "parallel") if getattr(self, k) is not None]
        if shard and len(shard) < 3:
            raise ValueError(f"a rank's point needs ranks, rank and parallel together; got only {', '.join(shard)}")
        if shard and self.rank >= self.ranks:
            raise ValueError(f"rank {self.rank} is not in a group of {self.ranks}")
        if self.split is not None and self.parallel != "pipeline":
            raise ValueError("split is for parallel: pipeline")
        named = [k for k in ("config", "config_inline", "profile") if getattr(self, k) is not None]
        if not named:
            raise ValueError("a point needs the model as config, config_inline or profile")
        if len(named) > 1:
            raise ValueError(f"a point names its model once; got {' and '.join(named)}")
        if self.peak_over_baseline is None and self.peak_total_bytes is None:
            raise ValueError("a point needs peak_over_baseline or peak_total_bytes")
        if self.peak_over_baseline is not None and self.peak_over_baseline_max is not None \
                and self.peak_over_baseline_max != max(self.peak_over_baseline):
            raise ValueError(f"peak_over_baseline_max ({self.peak_over_baseline_max}) is not the highest "
                             f"peak_over_baseline ({max(self.peak_over_baseline)})")
        return self


class CalibrationRunFile(_Strict):
    """A device run: where it ran, with which MLX, and its points."""

    backend: Literal["metal", "cuda", "cpu"]
    device: Text
    mlx: Text = Field(description="MLX version of the run")
    mlx_lm: Text | None = Field(None, description="mlx-lm version of the run")
    dtype: CalDType | None = None
    source: Text | None = Field(None, description="what wrote the file, or the publication it encodes")
    batch: PosInt | None = None
    cached_tokens: NonNegInt | None = None
    points: list[PointEntry] = Field(min_length=1)
