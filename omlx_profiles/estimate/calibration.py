"""Measured prefill peaks the estimator is checked against: ``profiles/calibration/<backend>/*.yaml``.

One file per device run (``omlx-profiles calibrate`` writes CPU/CUDA/Metal files; the CUDA H200 file
comes from ``benchmarks/cuda/summarize.py``; the Metal file encodes a published ladder). Top level:
``backend``, ``device``, ``mlx``, ``mlx_lm``, ``dtype``, ``source``; then ``points``, each with

* ``model`` (a label), and the model as ``config`` (a path, from the repository root) or
  ``config_inline`` (the config dict itself), or ``profile`` (a registry id);
* ``tokens``, ``prefill_step_size``, ``cached_tokens`` (default 0);
* ``peak_over_baseline`` (one value per repeat: peak over what was held before the prompt, weights
  excluded) and ``peak_over_baseline_max``; or, for published numbers that include the weights,
  ``peak_total_bytes``;
* optionally ``kv_bytes``, ``chunks`` (per call: q_len, kv_len, before, peak over the baseline).

Tests rebuild each point's profile (``profile_for_point``) and compare ``prefill_peak`` with the max.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..units import normalize_dtype
from ..errors import InputError, ProfileError
from ..registry.paths import builtin_profiles_dir
from ..registry.profile import Profile
from ..schema.calibration import CalibrationRunFile
from ..registry.yaml_safe import load_yaml_text, read_text

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CalibrationPoint:
    model: str
    tokens: int
    chunk: int
    cached: int
    peaks: tuple[int, ...]
    peak_total: int | None
    kv_bytes: int | None
    config: dict | None
    config_path: str | None
    profile_id: str | None
    dtype: str | None
    raw: dict = field(repr=False, compare=False)
    # one rank of a sharded model (mlx.distributed): {"ranks", "rank", "parallel", "split"}; None for a whole model
    shard: dict | None = None

    @property
    def peak(self) -> int:
        """The highest repeat: the estimate must cover it."""
        return max(self.peaks) if self.peaks else 0


@dataclass(frozen=True)
class CalibrationFile:
    path: str
    backend: str
    device: str
    mlx: str
    dtype: str | None
    source: str | None
    points: tuple[CalibrationPoint, ...]
    # the points measured on one rank of a sharded model: kept apart, because a rank holds a slice of the
    # model and the whole-model checks (and the peak-basis survey) must never read one as the whole
    sharded_points: tuple[CalibrationPoint, ...] = ()


def calibration_dir() -> Path:
    return builtin_profiles_dir() / "calibration"


def load_calibration(path: Path | str) -> CalibrationFile:
    """One calibration file, validated by ``schema.calibration`` (errors name the file, line and key)."""
    from pydantic import ValidationError

    from ..registry.files import pydantic_issues
    from ..registry.yaml_safe import line_for, line_index

    path = Path(path)
    text = read_text(path)
    data = load_yaml_text(text, str(path))
    if not isinstance(data, dict) or "points" not in data:
        raise InputError(f"{path}: not a calibration file (needs 'backend' and 'points')")
    try:
        f = CalibrationRunFile.model_validate(data)
    except ValidationError as e:
        idx = line_index(text)
        raise ProfileError(pydantic_issues(e, str(path), lambda at: line_for(idx, at), data)) from None
    pts = tuple(CalibrationPoint(
        model=p.model,
        tokens=p.tokens,
        chunk=p.prefill_step_size,
        cached=p.cached_tokens,
        peaks=tuple(p.peak_over_baseline or ()),
        peak_total=p.peak_total_bytes,
        kv_bytes=p.kv_bytes,
        config=p.config_inline,
        config_path=p.config,
        profile_id=p.profile,
        dtype=_norm_dtype(p.dtype if p.dtype is not None else f.dtype),
        raw=data["points"][i],
        shard=None if p.ranks is None else {"ranks": p.ranks, "rank": p.rank, "parallel": p.parallel,
                                            "split": tuple(p.split) if p.split else None},
    ) for i, p in enumerate(f.points))
    return CalibrationFile(str(path), f.backend, f.device, f.mlx, _norm_dtype(f.dtype), f.source,
                           tuple(p for p in pts if p.shard is None), tuple(p for p in pts if p.shard is not None))


def calibration_files(backend: str | None = None) -> list[Path]:
    d = calibration_dir()
    dirs = [d / backend] if backend else sorted(x for x in d.iterdir() if x.is_dir()) if d.is_dir() else []
    out: list[Path] = []
    for x in dirs:
        if x.is_dir():
            out += sorted(x.glob("*.yaml"))
    return out


def _norm_dtype(d) -> str | None:
    return normalize_dtype(str(d)) if d else None


def profile_for_config(config: dict, dtype: str | None = None) -> Profile:
    """The profile of an mlx-lm config (config extraction), with the MLA ranks filled from the config
    when the extraction leaves them out (deepseek_v2's expanded cache: the SDPA widths are in the cache
    entries, but the latent projections need the ranks)."""
    from ..extraction.from_config import profile_from_config
    from ..schema.family import MLA

    dt = _norm_dtype(dtype)
    p = profile_from_config(config, dtype=dt)
    t = config.get("text_config", config) if isinstance(config.get("text_config"), dict) else config
    if p.mla is None and t.get("kv_lora_rank") and t.get("qk_rope_head_dim"):
        p = dataclasses.replace(p, mla=MLA(
            kv_lora_rank=t["kv_lora_rank"], qk_rope_head_dim=t["qk_rope_head_dim"],
            qk_nope_head_dim=t["qk_nope_head_dim"], v_head_dim=t["v_head_dim"],
            q_lora_rank=t.get("q_lora_rank") or None))
    return p


def profile_for_point(pt: CalibrationPoint) -> Profile:
    if pt.config is not None:
        return profile_for_config(pt.config, pt.dtype)
    if pt.config_path:
        cfg = json.loads((REPO / pt.config_path).read_text())
        return profile_for_config(cfg, pt.dtype)
    if pt.profile_id:
        from ..registry.index import load_registry

        return load_registry([]).resolve(pt.profile_id).profile
    raise InputError(f"calibration point {pt.model!r} names no config, config_inline or profile")
