"""Which mlx-lm modules extraction can read, and the sentence for one it cannot.

Apart from ``recipes`` (the interpreter) because it also reads the module index and the files' reasons;
kept out of ``recipe_files`` so the loader stays free of messages.
"""
from __future__ import annotations

from .config import shown
from .model_types import MLXLM_VERSION, MODULES
from .recipes import module_files, recipes


def supported_modules() -> list[str]:
    """Modules with a module recipe (profiles/mlx_lm/), or a wrapper file whose ``text_by`` picks the recipe
    of its language model."""
    wrappers = {m for m, f in module_files().items() if f.text_by is not None}
    return sorted(wrappers | set(recipes()))


def unsupported_reason(model_type: str, module: str) -> str:
    f = module_files().get(module)
    named = [m for m, g in module_files().items() if g.checkpoint_model_type == model_type]
    if f is not None and f.unsupported:  # profiles/mlx_lm/<module>.yaml says why it is not profiled
        why = f.unsupported
    elif named:  # checkpoints name the module by a model_type mlx-lm cannot import (lfm2_vl: lfm2-vl.py)
        why = (f"mlx-lm {MLXLM_VERSION} has no module mlx_lm.models.{model_type} (its file is {named[0]}.py), so "
               f"mlx_lm.load raises 'Model type {model_type} not supported'; a config saying model_type "
               f"{named[0]!r} works")
    elif module in MODULES:
        why = (f"no extraction recipe for mlx-lm's {module}.py yet (profiles/mlx_lm/index.yaml: not yet); its layout: "
               f"{MODULES[module]}")
    else:
        why = ("no cache-layout rule for this mlx-lm module yet (supported: "
               + ", ".join(supported_modules()) + ")")
    what = shown(model_type) if model_type == module else f"{shown(model_type)} (mlx-lm module {shown(module)})"
    return f"unsupported: model_type {what}: {why}"
