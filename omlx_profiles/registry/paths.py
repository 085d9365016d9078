"""Where the built-in registry lives: inside the wheel (``omlx_profiles/data``) after ``pip install .``,
or at the repository root (``profiles/``, ``schema/``) in a checkout / editable install."""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parents[1]  # omlx_profiles/
_REPO = _PKG.parent

ENV_PROFILES_PATH = "OMLX_PROFILES_PATH"


def _first_existing(*candidates: Path) -> Path:
    for c in candidates:
        if c.is_dir():
            return c
    return candidates[-1]


def builtin_profiles_dir() -> Path:
    return _first_existing(_PKG / "data" / "profiles", _REPO / "profiles")


def schema_dir() -> Path:
    return _first_existing(_PKG / "data" / "schema", _REPO / "schema")


def kernels_dir() -> Path:
    return builtin_profiles_dir() / "kernels"


def env_profile_dirs() -> list[Path]:
    """User profile directories from ``OMLX_PROFILES_PATH`` (os.pathsep-separated)."""
    raw = os.environ.get(ENV_PROFILES_PATH, "")
    from ..files import user_path

    return [user_path(p, ENV_PROFILES_PATH) for p in raw.split(os.pathsep) if p.strip()]


def data_file_kind(path: Path) -> str:
    """What a data file under a profiles directory is, from where it sits (the layout ``profiles/`` uses):
    ``kernels/<backend>.yaml`` a kernel-route table, ``calibration/<backend>/*.yaml`` measured peaks,
    ``mlx_lm/sharding.yaml`` the sharding plan, ``mlx_lm/index.yaml`` the module index, other
    ``mlx_lm/*.yaml`` mlx-lm module recipes,
    ``naming/*.yaml`` the model-id naming table, ``calibration/*.yaml`` a table derived from the
    calibration files, anything else a family file."""
    p = Path(path)
    if p.parent.name == "kernels":
        return "kernels"
    if p.parent.parent.name == "calibration":
        return "calibration"
    if p.parent.name == "calibration":
        return "derived"  # calibration/measured_traits.yaml: generated from the calibration files
    if p.parent.name == "mlx_lm":
        return {"sharding": "sharding", "index": "module_index"}.get(p.stem, "module")
    if p.parent.name == "naming":
        return "naming"
    return "family"
