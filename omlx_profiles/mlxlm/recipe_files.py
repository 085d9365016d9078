"""The module files of ``profiles/mlx_lm/``: loading and validating them, and the lookups other layers use.

Why apart from the interpreters (``recipes``): the peak model asks only for a module's compute traits
(``traits_of``) and coverage only for statuses; neither needs the extraction readers. No module name here.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from ..errors import ProfileError
from ..registry.paths import builtin_profiles_dir
from ..registry.yaml_safe import load_yaml_file
from ..schema.module import ModuleIndex, ModuleRecipe, Traits
from .facts import MODEL_REMAPPING

NOT_RECIPES = {"index.yaml", "sharding.yaml"}


def recipes_dir() -> Path:
    return builtin_profiles_dir() / "mlx_lm"


def _parse_recipe(path: Path) -> ModuleRecipe:
    data = load_yaml_file(path)
    try:
        rec = ModuleRecipe.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ProfileError(f"{path}: {loc}: {first['msg']}") from None
    if rec.module != path.stem:
        raise ProfileError(f"{path}: module {rec.module!r} must equal the file name {path.stem!r}")
    return rec


@lru_cache(maxsize=4)
def _load_all(root: str) -> dict[str, ModuleRecipe]:
    out: dict[str, ModuleRecipe] = {}
    d = Path(root)
    if d.is_dir():
        for p in sorted(d.glob("*.yaml")):
            if p.name not in NOT_RECIPES:
                rec = _parse_recipe(p)
                out[rec.module] = rec
    for m, rec in list(out.items()):  # a wrapper over another module's recipe reads the text config by it
        if rec.text is not None and rec.text.recipe:
            inner = out.get(rec.text.recipe)
            if inner is None or not inner.extracts or inner.text is not None:
                raise ProfileError(f"{d / (m + '.yaml')}: text.recipe {rec.text.recipe!r} names no plain module recipe")
            out[m] = inner.model_copy(update={
                "module": m, "checkpoint_model_type": rec.checkpoint_model_type, "text": rec.text, "traits": rec.traits, "sources": rec.sources, "to_config": rec.to_config,
                "notes": rec.notes + inner.notes, "live": rec.live if rec.live.config or rec.live.top else inner.live,
                "kv_bits_fails": rec.kv_bits_fails or inner.kv_bits_fails})
    return out


def module_files() -> dict[str, ModuleRecipe]:
    """Every module file shipped in ``profiles/mlx_lm/`` (extraction recipes and traits-only files)."""
    return _load_all(str(recipes_dir()))


def recipes() -> dict[str, ModuleRecipe]:
    """Every extraction recipe (args, layout, kinds) shipped in ``profiles/mlx_lm/``, by module name."""
    return {m: r for m, r in module_files().items() if r.extracts}


_LLAMA_SHAPE = Traits()


@lru_cache(maxsize=256)
def traits_of(model_type: str | None) -> Traits:
    """The compute traits of the mlx-lm module that builds ``model_type`` (mlx-lm's remapping applied);
    the llama shape (every trait off) for a module without a file."""
    if not model_type:
        return _LLAMA_SHAPE
    f = module_files().get(MODEL_REMAPPING.get(model_type, model_type))
    return f.traits if f is not None else _LLAMA_SHAPE


def recipe(module: str) -> ModuleRecipe | None:
    return recipes().get(module)


def recipe_verified() -> set[str]:
    """Modules whose recipe passed the live check (``LIVE_RESULTS.json``, kept current by
    ``tests/test_recipes_live.py``) and still has its file."""
    p = recipes_dir() / "LIVE_RESULTS.json"
    if not p.is_file():
        return set()
    import json

    return set(json.loads(p.read_text(encoding="utf-8")).get("verified", [])) & set(recipes())


def module_index() -> ModuleIndex | None:
    p = recipes_dir() / "index.yaml"
    if not p.is_file():
        return None
    return ModuleIndex.model_validate(load_yaml_file(p))
