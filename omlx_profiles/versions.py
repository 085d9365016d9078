"""MLX version ranges of the kernel tables (``mlx_versions: ">=0.32.3,<0.33"``), read with ``packaging``.

A range that cannot be read, or that no version satisfies, used to be skipped or to match nothing in
silence: the table then never applied (or ``*`` matched everything). ``check_range`` refuses, with a
sentence, anything but a non-empty PEP 440 specifier set without arbitrary equality (``===`` compares
strings, not versions) that at least one version satisfies. The schema runs it on every table, so a
bad range is a validation error with ``file:line``, never a route quietly not taken.
"""
from __future__ import annotations

from functools import lru_cache

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


@lru_cache(maxsize=256)
def check_range(spec: str) -> SpecifierSet:
    """The ``SpecifierSet`` of ``spec``; ``ValueError`` naming the problem when it is not a usable range."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("empty version range: write one such as '>=0.32.3,<0.33'")
    if "===" in spec:
        raise ValueError(f"{spec!r}: '===' is arbitrary string equality, not a version range; use '=='")
    try:
        ss = SpecifierSet(spec)
    except InvalidSpecifier as e:
        raise ValueError(f"{spec!r} is not a PEP 440 version range such as '>=0.32.3,<0.33' ({e})") from None
    if not len(ss):
        raise ValueError(f"{spec!r} has no clause: write one such as '>=0.32.3,<0.33'")
    if not any(ss.contains(v, prereleases=True) for v in _candidates(ss)):
        raise ValueError(f"{spec!r}: no version satisfies every clause (an empty range)")
    return ss


def _candidates(ss: SpecifierSet) -> list[Version]:
    """Versions at and just around every boundary the clauses name: if none is inside, nothing is."""
    out = [Version("0"), Version("9999")]
    for s in ss:
        try:
            v = Version(s.version.replace(".*", ""))
        except InvalidVersion:
            continue
        rel = list(v.release) + [0, 0, 0]
        out.append(v)
        for i in range(len(v.release) + 1):
            up = rel[: i + 1]
            up[i] += 1
            out.append(Version(".".join(map(str, up))))
            if rel[i] > 0:
                down = rel[: i + 1]
                down[i] -= 1
                out.append(Version(".".join(map(str, down + [9999]))))
        out.append(Version(f"{v.base_version}.post1"))
    return out


def in_range(version: str, spec: str) -> bool:
    """Does ``version`` (``"0.32.4"``) lie in ``spec``? (``ValueError`` for a bad range, as ``check_range``.)"""
    return check_range(spec).contains(Version(version), prereleases=True)
