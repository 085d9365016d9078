"""Every printed estimate is byte-identical to the committed golden file (tests/golden/estimates.json).

A regression oracle for refactors (issue 12: the layered restructure must not move a byte). When a change
alters numbers on purpose, regenerate the file in the same commit and say why in the message:

    .venv/bin/python tests/golden/generate.py --write

Never regenerate it to make an accidental difference go away: the diff below names the entries.

Why it is split into one test per registry variant (+ calibration, facade, grid): the dump is ~100 variants
of independent work, and one test holding all of it was the longest single item of the suite; split, the
pytest-xdist workers share it. The comparison stays byte-for-byte: every section is rendered with the
same ``dumps`` at the depth it has in the file, and ``test_golden_file_is_canonical`` proves the committed
file is exactly the concatenation of those renderings, so all sections equal <=> the whole file equals
``generate.py``'s output (what ``generate.py --check`` compares in one go).
"""
from __future__ import annotations

import json
from functools import lru_cache

import pytest

from .golden.generate import GOLDEN, GRID, _api, calibration, dumps, facade_entry, facade_keys, variant


@lru_cache(maxsize=None)
def _committed() -> tuple[str, dict]:
    text = GOLDEN.read_text()
    return text, json.loads(text)


@lru_cache(maxsize=None)
def _env():
    api = _api()
    return api, api.load_registry([], include_env=False)


def _diff(old, new, path: str = "", out: list | None = None) -> list[str]:
    out = [] if out is None else out
    if not (isinstance(old, dict) and isinstance(new, dict)):
        if old != new:
            out.append(f"{path}: {json.dumps(old)[:200]} -> {json.dumps(new)[:200]}")
        return out
    for k in sorted(set(old) | set(new)):
        p = f"{path}/{k}"
        if k not in old or k not in new:
            out.append(f"{p}: {'added' if k in new else 'removed'}")
        else:
            _diff(old[k], new[k], p, out)
    return out


def _same(path: str, committed, new, depth: int):
    """``new`` rendered at its depth in the file is byte-identical to the committed section."""
    if dumps(new, depth) != dumps(committed, depth):
        changes = _diff(committed, new, path) or [f"{path}: same values, different rendering"]
        raise AssertionError(f"{len(changes)} golden entries changed (regenerate only on purpose: "
                             "tests/golden/README.md):\n" + "\n".join(changes[:40]))


def test_golden_file_is_canonical():
    """The committed text is exactly ``dumps`` of its own content: comparing sections == comparing bytes."""
    text, doc = _committed()
    assert set(doc) == {"grid", "variants", "calibration", "facade"}
    assert dumps(doc) == text, "estimates.json is not in generate.py's format: regenerate it (README)"


def test_grid_is_the_generators():
    _same("/grid", _committed()[1]["grid"], json.loads(json.dumps(GRID)), 1)


def test_same_variants_as_the_registry():
    _, reg = _env()
    _same("/variants", sorted(_committed()[1]["variants"]), sorted(reg.profiles), 1)


def _variant_names() -> list[str]:
    return sorted(_env()[1].profiles)


def _variant_params() -> list:
    """One param per variant; variants of one shape (``peak.fast_cuda._shape_key``: they differ only in names,
    weights, context) run on one pytest-xdist worker, one after the other. Why: most of a variant's time is the
    exact CUDA replay of every full chunk call, kept per shape in ``fast_cuda.full_call_totals``'s tables, so the
    second variant of a shape finds them built (llama-3.1-8b after llama-3.1-8b-instruct: 2.1 -> 0.6 s CPU;
    deepseek-r1 after deepseek-v3: 7.3 -> 1.8 s). Only where the tests run; what they compare is unchanged."""
    from omlx_profiles.peak.fast_cuda import _shape_key

    reg = _env()[1]
    names = _variant_names()
    shapes: dict = {}
    for n in names:
        shapes.setdefault(_shape_key(reg.profiles[n]), []).append(n)
    group = {n: f"golden-{same[0]}" for same in shapes.values() if len(same) > 1 for n in same}
    return [pytest.param(n, marks=pytest.mark.xdist_group(group[n])) if n in group else n for n in names]


@pytest.mark.parametrize("name", _variant_params())
def test_variant_is_byte_identical(name):
    api, reg = _env()
    committed = _committed()[1]["variants"]
    if name not in committed:
        pytest.fail(f"/variants/{name}: added (regenerate only on purpose: tests/golden/README.md)")
    _same(f"/variants/{name}", committed[name], variant(api, reg, name), 2)


def test_calibration_is_byte_identical():
    api, _ = _env()
    _same("/calibration", _committed()[1]["calibration"], calibration(api), 1)


def test_same_facade_entries():
    _same("/facade", sorted(_committed()[1]["facade"]), sorted(facade_keys()), 1)


@pytest.mark.parametrize("key", facade_keys())
def test_facade_is_byte_identical(key):
    """One facade entry (a backend x variant's or seed's monitor grid); split per entry because the section was
    the longest single test of the suite (pytest-xdist shares the entries)."""
    api, reg = _env()
    committed = _committed()[1]["facade"]
    if key not in committed:
        pytest.fail(f"/facade/{key}: added (regenerate only on purpose: tests/golden/README.md)")
    _same(f"/facade/{key}", committed[key], facade_entry(api, reg, key), 2)
