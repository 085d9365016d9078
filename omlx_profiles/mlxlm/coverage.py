"""Which mlx-lm model types the registry covers: ``omlx-profiles coverage`` and ``profiles/COVERAGE.md``.

Every model module of mlx-lm 0.32 (``data_mlxlm_model_types.MODULES``) and every model_type mlx-lm
remaps onto one (``REMAPPING``) gets one row and one status:

* **verified** - the module's recipe (``profiles/mlx_lm/<module>.yaml``) passed the live check of
  ``tests/test_recipes_live.py`` (recorded in ``profiles/mlx_lm/LIVE_RESULTS.json``, which that test
  keeps equal to its run); or a registry variant is built by this module (``mlx_model_type``), so
  ``tests/test_kv_live.py`` compares its estimate with the live mlx-lm model, per layer (every
  variant is in that test); or, for a model_type no variant uses directly, the family that claims it
  is verified through the module mlx-lm really builds (``mistral`` -> llama.py).
* **unsupported** - the layout cannot be expressed by the profile schema, or cannot be verified live
  here; the reason says which (``unsupported:`` in the module's file).
* **not yet** - no profile; the row says what cache layout a profile would have to declare.

No mlx import: the list is data, derived once from the installed mlx-lm and checked against it by the
tests when mlx-lm is installed.
"""
from __future__ import annotations

from dataclasses import dataclass

from .model_types import MLXLM_VERSION, MODULES, REMAPPING
from .recipes import module_files, recipe_verified
from ..registry.index import Registry


def unsupported_modules() -> dict[str, str]:
    """Modules this project does not profile, and why (``unsupported:`` in ``profiles/mlx_lm/<module>.yaml``:
    cannot be expressed, or cannot be verified live here)."""
    return {m: f.unsupported for m, f in module_files().items() if f.unsupported}


@dataclass(frozen=True)
class Row:
    model_type: str
    module: str
    status: str  # verified | unsupported | not yet
    detail: str


def _families_by_type(reg: Registry) -> dict[str, list[str]]:
    """model_type -> sorted variant names whose family claims it (a family's ``model_types``)."""
    out: dict[str, set[str]] = {}
    fam_variants: dict[str, set[str]] = {}
    for p in reg:
        fam_variants.setdefault(p.family, set()).add(p.name)
    for lf in reg.files:
        for mt in lf.model.model_types:
            out.setdefault(mt, set()).update(fam_variants.get(lf.model.family, ()))
    return {k: sorted(v) for k, v in out.items()}


def coverage_rows(reg: Registry) -> list[Row]:
    by_module: dict[str, list[str]] = {}
    for p in reg:
        by_module.setdefault(p.mlx_model_type, []).append(p.name)
    claimed = _families_by_type(reg)
    rows: list[Row] = []

    live = recipe_verified()
    unsupported = unsupported_modules()

    def status_of(model_type: str, module: str) -> tuple[str, str]:
        variants = sorted(by_module.get(module, ()))
        if module in live and not variants:
            return "verified", (f"module recipe profiles/mlx_lm/{module}.yaml, checked against the live mlx-lm "
                                "model by tests/test_recipes_live.py")
        if module in live and model_type != module:  # the recipe's live check builds every remapped model_type
            return "verified", (f"module recipe profiles/mlx_lm/{module}.yaml; its live check in "
                                f"tests/test_recipes_live.py also builds the model as model_type {model_type}")
        if model_type == module and variants:
            return "verified", ", ".join(variants)
        if model_type != module and variants and model_type in claimed:
            return "verified", f"built by {module}.py like {', '.join(variants)}"
        if model_type != module and module in live:  # a remapped type builds the recipe-verified module
            return "verified", (f"module recipe profiles/mlx_lm/{module}.yaml, checked against the live mlx-lm "
                                "model by tests/test_recipes_live.py")
        if module in unsupported:
            return "unsupported", unsupported[module]
        if model_type in claimed:
            return "not yet", (f"claimed by the family of {', '.join(claimed[model_type])} but no variant is built "
                               f"by {module}.py; needs: {MODULES.get(module, '?')}")
        return "not yet", f"needs: {MODULES.get(module, '?')}"

    files = module_files()
    for module in sorted(MODULES, key=str.lower):
        f = files.get(module)
        mt = f.checkpoint_model_type if f is not None and f.checkpoint_model_type else module
        status, detail = status_of(mt, module)
        if mt != module:  # the checkpoints' model_type is not the module's file name (lfm2_vl vs lfm2-vl.py)
            detail += (f"; note: mlx_lm.load itself raises 'Model type {mt} not supported' (the module file is "
                       f"{module}.py), so these checkpoints do not load in mlx-lm {MLXLM_VERSION}; the test builds "
                       "the wrapper class directly")
        rows.append(Row(mt, module, status, detail))
    for mt, module in sorted(REMAPPING.items()):
        status, detail = status_of(mt, module)
        rows.append(Row(mt, module, status, f"remapped to {module}.py by mlx-lm; " + detail))
    return rows


def render_markdown(rows: list[Row]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in ("verified", "not yet", "unsupported")}
    lines = [
        "<!-- generated by `omlx-profiles coverage --write`; do not edit by hand -->",
        f"# Coverage of mlx-lm {MLXLM_VERSION} model types",
        "",
        f"{len(rows)} model types ({len(MODULES)} model modules of `mlx_lm/models/` plus {len(REMAPPING)} "
        f"model_types mlx-lm remaps onto them): **{counts['verified']} verified**, "
        f"{counts['not yet']} not yet, {counts['unsupported']} unsupported.",
        "",
        "* **verified**: a module recipe (`profiles/mlx_lm/<module>.yaml`) whose live check in "
        "`tests/test_recipes_live.py` passed, or a profile variant built by this module that "
        "`tests/test_kv_live.py` checks against the live mlx-lm model, per layer.",
        "* **not yet**: no profile; the cache layout a profile would have to declare is given.",
        "* **unsupported**: cannot be expressed by the profile schema or verified live here (why).",
        "",
        "| model_type | module | status | variants / layout / reason |",
        "|---|---|---|---|",
    ]
    for r in rows:
        detail = r.detail.replace("|", "\\|")
        lines.append(f"| `{r.model_type}` | `{r.module}.py` | {r.status} | {detail} |")
    return "\n".join(lines) + "\n"
