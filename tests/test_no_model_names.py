"""Knowledge about an mlx-lm module lives in its data file (``profiles/mlx_lm/<module>.yaml``), not in Python.

Issue 13: after the port, ``omlx_profiles/`` names no mlx-lm model type or module in its logic. This test
parses every module of the package (``ast``, so comments and docstrings do not count) and fails on any string
literal equal to a name of ``profiles/mlx_lm/index.yaml`` (its modules, mlx-lm's remapping keys and targets,
and the RoPE types of ``rope_types`` but the plain words in ``PLAIN_WORDS``) outside ``ALLOWED``. Each
allowance has a ceiling (the count today) and the reason it is still Python; the ceiling only goes down: a new
name literal anywhere fails, and so does an allowance that is no longer needed.
"""
from __future__ import annotations

import ast
from pathlib import Path

from omlx_profiles.registry.yaml_safe import load_yaml_file

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "omlx_profiles"

#: path under omlx_profiles/ -> (most name literals allowed, why they are still Python)
ALLOWED: dict[str, tuple[int, str]] = {}

#: RoPE type names that are also plain words of the package (mlx-lm's own fallback ``rope_type`` is
#: "default", read as it reads it): not scanned; the distinctive ones (llama3, yarn, longrope, ...) are.
PLAIN_WORDS = {"default", "linear", "dynamic"}


def _names() -> set[str]:
    idx = load_yaml_file(ROOT / "profiles" / "mlx_lm" / "index.yaml")
    return (set(idx["modules"]) | set(idx["remapping"]) | set(idx["remapping"].values())
            | (set(idx["rope_types"]) - PLAIN_WORDS))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def name_literals() -> dict[str, list[tuple[int, str]]]:
    names = _names()
    found: dict[str, list[tuple[int, str]]] = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        docs = _docstrings(tree)
        hits = [(n.lineno, n.value) for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names and id(n) not in docs]
        if hits:
            found[p.relative_to(PACKAGE).as_posix()] = sorted(hits)
    return found


def test_the_index_names_many_modules():
    names = _names()
    assert len(names) > 120 and {"llama", "qwen3_next", "gemma3_text", "falcon_mamba"} <= names
    assert {"llama3", "yarn", "deepseek_yarn", "telechat3-yarn", "longrope", "mrope"} <= names  # RoPE types


def test_no_model_type_names_in_package_logic():
    found = name_literals()
    problems = []
    for path, hits in found.items():
        ceiling = ALLOWED.get(path, (0, ""))[0]
        if len(hits) > ceiling:
            shown = ", ".join(f"{line}:{name!r}" for line, name in hits[:12])
            problems.append(f"omlx_profiles/{path}: {len(hits)} model-type name literal(s) (allowed {ceiling}): {shown}")
    assert not problems, ("mlx-lm module knowledge belongs in profiles/mlx_lm/<module>.yaml (traits, layout, args), "
                          "not in Python:\n" + "\n".join(problems))


def test_allowances_are_still_needed():
    """An allowance above today's count is slack a new name could hide in: lower it (or delete it)."""
    found = name_literals()
    stale = {p: (c, len(found.get(p, []))) for p, (c, _) in ALLOWED.items() if len(found.get(p, [])) != c}
    assert not stale, f"lower these ceilings to the current counts (ceiling, now): {stale}"


def test_the_scan_sees_a_name(tmp_path):
    """The scanner is not blind: a literal module name is found, the same word in a docstring is not."""
    src = '"""llama is a word here."""\nX = {"qwen3_next": 1}\nif kind in ("linear", "yarn"): pass\n'
    tree = ast.parse(src)
    docs = _docstrings(tree)
    hits = [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in _names() and id(n) not in docs]
    assert hits == ["qwen3_next", "yarn"]


def test_the_plain_decoder_is_plain():
    """The oMLX facade's set_model_info profile (compat/uniform.py) names no model type of its own: it takes
    index.yaml's ``plain_decoder``, which must be a module with a recipe and every compute trait off."""
    from omlx_profiles.compat.uniform import uniform_profile
    from omlx_profiles.mlxlm.model_types import PLAIN_DECODER
    from omlx_profiles.mlxlm.recipe_files import module_files
    from omlx_profiles.schema.traits import Traits

    assert PLAIN_DECODER is not None and module_files()[PLAIN_DECODER].traits == Traits()
    prof = uniform_profile(4, 2, 64, n_q=8, act=2, rot=[], num_kv_cache_layers=None, hidden_size=None,
                           intermediate_size=None).profile
    assert prof.mlx_model_type == PLAIN_DECODER
