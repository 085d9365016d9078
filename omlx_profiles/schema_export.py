"""JSON Schema for profile and kernel-route files, generated from the Pydantic models.

The files in ``schema/`` are committed so editors can validate YAML while people type
(``# yaml-language-server: $schema=../schema/profile.schema.json``); a test regenerates them and fails
when they drift from the models.
"""
from __future__ import annotations

import json
from pathlib import Path

from .schema_models import KernelRoutesFile, ProfileFile

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _schema(model, name: str, title: str) -> dict:
    s = model.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": DIALECT, "$id": f"https://omlx-profiles.invalid/schema/{name}", "title": title, **s}


def schemas() -> dict[str, dict]:
    from .sharding.schema import ShardingFile

    return {
        "sharding.schema.json": _schema(ShardingFile, "sharding.schema.json",
                                        "omlx-profiles mlx-lm sharding plan (tensor / pipeline, per module)"),
        "profile.schema.json": _schema(ProfileFile, "profile.schema.json", "omlx-profiles model family profile"),
        "kernels.schema.json": _schema(KernelRoutesFile, "kernels.schema.json", "omlx-profiles SDPA kernel routes"),
    }


def render(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path) -> list[Path]:
    """Regenerate the files (replaced atomically; a read-only install is an ``InputError`` naming it)."""
    from .outputs import write_output

    out = []
    for name, s in schemas().items():
        out.append(write_output(directory / name, render(s), suffixes=(".json",), replace=True, what="schema"))
    return out


def drifted(directory: Path) -> list[str]:
    """Names of committed schema files that differ from what the models generate now."""
    bad = []
    for name, s in schemas().items():
        p = directory / name
        if not p.is_file() or p.read_text(encoding="utf-8") != render(s):
            bad.append(name)
    return bad
