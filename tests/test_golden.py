"""Every printed estimate is byte-identical to the committed golden file (tests/golden/estimates.json).

A regression oracle for refactors (issue 12: the layered restructure must not move a byte). When a change
alters numbers on purpose, regenerate the file in the same commit and say why in the message:

    .venv/bin/python tests/golden/generate.py --write

Never regenerate it to make an accidental difference go away: the diff below names the entries.
"""
from __future__ import annotations

import json

from .golden.generate import GOLDEN, build, dumps


def _diff(old: dict, new: dict, path: str = "", out: list | None = None) -> list[str]:
    out = [] if out is None else out
    for k in sorted(set(old) | set(new)):
        p = f"{path}/{k}"
        if k not in old or k not in new:
            out.append(f"{p}: {'added' if k in new else 'removed'}")
        elif isinstance(old[k], dict) and isinstance(new[k], dict):
            _diff(old[k], new[k], p, out)
        elif old[k] != new[k]:
            out.append(f"{p}: {json.dumps(old[k])[:200]} -> {json.dumps(new[k])[:200]}")
    return out


def test_every_estimate_is_byte_identical_to_the_golden_file():
    text = dumps(build())
    committed = GOLDEN.read_text()
    if text != committed:
        changes = _diff(json.loads(committed), json.loads(text))
        raise AssertionError(f"{len(changes)} golden entries changed (regenerate only on purpose: "
                             "tests/golden/README.md):\n" + "\n".join(changes[:40]))
