"""mlx-lm 0.32.2's model types, read from data (``profiles/mlx_lm/index.yaml``) so that ``omlx-profiles
coverage`` works without mlx.

The index lists every model module of the installed ``mlx_lm/models/*.py`` (a module is a model when it
defines or imports both ``Model`` and ``ModelArgs``; the rest are helpers) with its status, and
``mlx_lm.utils.MODEL_REMAPPING``, the RoPE types ``initialize_rope`` builds; a module without a recipe keeps the text of how mlx-lm lays out its
prompt cache (first derived from ``shared/reference/mlxlm_caches.json``, measured on mlx-lm 0.32.2).
``tools/gen_module_index.py`` rewrites the statuses from the module files and keeps the list;
``tests/test_profiles_corpus.py`` compares the module list and the remapping with the installed mlx-lm.
No module name is written here.
"""
from __future__ import annotations

from ..registry.paths import builtin_profiles_dir
from ..registry.yaml_safe import load_yaml_file
from ..schema.module import ModuleIndex, RopeType


def _index() -> ModuleIndex:
    return ModuleIndex.model_validate(load_yaml_file(builtin_profiles_dir() / "mlx_lm" / "index.yaml"))


_IDX = _index()

MLXLM_VERSION: str = _IDX.mlx_lm

#: model module -> how mlx-lm lays out its prompt cache, where no recipe says it (else "")
MODULES: dict[str, str] = {m: (e.reason or "") if e.status == "not yet" else "" for m, e in _IDX.modules.items()}

#: config model_type -> the module mlx-lm builds it with (mlx_lm.utils.MODEL_REMAPPING)
REMAPPING: dict[str, str] = dict(_IDX.remapping)

#: (config model_type, architecture) -> module (mlx_lm.utils.MODEL_ARCHITECTURE_REMAPPING, checked first)
ARCHITECTURE_REMAPPING: dict[tuple[str, str], str] = {
    (mt, arch): module for mt, by_arch in _IDX.architecture_remapping.items() for arch, module in by_arch.items()}

#: RoPE type -> what the config reader checks and derives (mlx-lm's ``initialize_rope`` builds exactly these)
ROPE_TYPES: dict[str, RopeType] = dict(_IDX.rope_types)

#: the module of a plain decoder stack (no compute traits): the oMLX facade's set_model_info profile uses it
PLAIN_DECODER: str | None = _IDX.plain_decoder
