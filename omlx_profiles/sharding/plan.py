"""Load the sharding plan (``profiles/mlx_lm/sharding.yaml``) and answer "can module M be sharded so?"."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from ..errors import ProfileError, UnsupportedError
from ..registry.paths import builtin_profiles_dir
from ..registry.yaml_safe import load_yaml_text, read_text
from ..schema.sharding import ModulePlan, ShardingFile

PARALLEL = ("tensor", "pipeline")


def plan_path() -> Path:
    return builtin_profiles_dir() / "mlx_lm" / "sharding.yaml"


@lru_cache(maxsize=4)
def load_plan(path: Path | None = None) -> ShardingFile:
    from ..registry.files import pydantic_issues
    from ..registry.yaml_safe import line_for, line_index

    p = path or plan_path()
    text = read_text(p)
    data = load_yaml_text(text, str(p))
    try:
        return ShardingFile.model_validate(data)
    except ValidationError as e:
        idx = line_index(text)
        raise ProfileError(pydantic_issues(e, str(p), lambda path: line_for(idx, path), data)) from None


def plan_for(module: str, parallel: str, plan: ShardingFile | None = None) -> ModulePlan:
    """The module's plan, or ``UnsupportedError`` naming what mlx-lm lacks for this kind of sharding."""
    if parallel not in PARALLEL:
        raise UnsupportedError(f"--parallel {parallel!r}; choose tensor or pipeline")
    f = plan or load_plan()
    mp = f.modules.get(module)
    if parallel == "tensor" and (mp is None or mp.tensor is None):
        alt = " (it supports --parallel pipeline)" if mp is not None and mp.pipeline else ""
        raise UnsupportedError(f"mlx-lm {f.mlx_lm} module {module!r} has no Model.shard, so it cannot be "
                               f"tensor-sharded{alt}")
    if parallel == "pipeline" and (mp is None or not mp.pipeline):
        alt = " (it supports --parallel tensor)" if mp is not None and mp.tensor is not None else ""
        raise UnsupportedError(f"mlx-lm {f.mlx_lm} module {module!r} has no model.model.pipeline, so it "
                               f"cannot be pipeline-sharded{alt}")
    return mp
