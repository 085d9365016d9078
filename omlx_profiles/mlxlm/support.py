"""Which mlx-lm modules extraction can read, and the sentence for one it cannot.

Apart from ``to_layers`` (the hand-written rules) and ``recipes`` (the data-driven ones) because it needs
both: the recipes reuse to_layers' readers, so neither may import the other back.
"""
from __future__ import annotations

from .config import shown
from .model_types import MODULES
from .recipes import module_files, recipes
from .to_layers import RULES


def supported_modules() -> list[str]:
    """Modules with a hand-written rule, a module recipe (profiles/mlx_lm/), or a wrapper file whose
    ``text_by`` picks the recipe of its language model."""
    wrappers = {m for m, f in module_files().items() if f.text_by is not None}
    return sorted(set(RULES) | wrappers | set(recipes()))


def unsupported_reason(model_type: str, module: str) -> str:
    f = module_files().get(module)
    if f is not None and f.unsupported:  # profiles/mlx_lm/<module>.yaml says why it is not profiled
        why = f.unsupported
    elif model_type == "lfm2_vl":
        why = ("mlx-lm 0.32.2 has no module mlx_lm.models.lfm2_vl (its file is lfm2-vl.py, with a dash), so "
               "mlx_lm.load raises 'Model type lfm2_vl not supported'; a config saying model_type 'lfm2-vl' works")
    elif module in MODULES:
        why = (f"no extraction recipe for mlx-lm's {module}.py yet (profiles/mlx_lm/index.yaml: not yet); its layout: "
               f"{MODULES[module]}")
    else:
        why = ("no cache-layout rule for this mlx-lm module yet (supported: "
               + ", ".join(supported_modules()) + ")")
    what = shown(model_type) if model_type == module else f"{shown(model_type)} (mlx-lm module {shown(module)})"
    return f"unsupported: model_type {what}: {why}"
