"""JSON Schema for the data files (family, kernel-route and calibration files), generated from the
Pydantic models.

The files are committed under ``schema/v<SCHEMA_VERSION>/`` so editors validate YAML while people type
(every shipped YAML starts with ``# yaml-language-server: $schema=../schema/v1/profile.schema.json``)
and so repositories that keep their own profiles can vendor them. Each schema has a stable ``$id``
whose path is the same ``schema/v<N>/<name>``: the ``$id`` names a schema *version*, the relative hint
finds the file of that version next to the profiles. ``SCHEMA_VERSION`` changes only when a file valid
under the old schema stops being valid (a field removed, renamed or narrowed); adding an optional
field keeps it. ``omlx-profiles schema --check [DIR]`` fails when a committed or vendored copy drifted
from the models, and a test does the same for ``schema/``.

The ``$id`` is an identifier, not a download address: ``.invalid`` is reserved (RFC 2606), so no tool
fetches a stale copy from somewhere; the files travel with the package and the repository.
"""
from __future__ import annotations

import json
from pathlib import Path

from .calibration import CalibrationRunFile
from .family import ProfileFile
from .kernels import KernelRoutesFile

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_VERSION = 1
ID_BASE = "https://omlx-profiles.invalid/schema"

PROFILE, KERNELS, CALIBRATION = "profile.schema.json", "kernels.schema.json", "calibration.schema.json"
SHARDING, NAMING = "sharding.schema.json", "naming.schema.json"
MODULE, MODULE_INDEX = "module.schema.json", "module-index.schema.json"


def _models() -> dict:
    from .module import ModuleIndex, ModuleRecipe
    from .naming import NamingTable
    from .sharding import ShardingFile

    return {
        PROFILE: (ProfileFile, "omlx-profiles model family profile"),
        KERNELS: (KernelRoutesFile, "omlx-profiles SDPA kernel routes"),
        CALIBRATION: (CalibrationRunFile, "omlx-profiles measured prefill peaks (calibration file)"),
        SHARDING: (ShardingFile, "omlx-profiles mlx-lm sharding plan (tensor / pipeline, per module)"),
        NAMING: (NamingTable, "omlx-profiles model-id naming table"),
        MODULE: (ModuleRecipe, "omlx-profiles mlx-lm module recipe (args, cache layout, live check)"),
        MODULE_INDEX: (ModuleIndex, "omlx-profiles mlx-lm module index (remapping, every module's status)"),
    }


def version_dir() -> str:
    """The sub-directory of a schema directory holding this version's files (``v1``)."""
    return f"v{SCHEMA_VERSION}"


def schema_id(name: str) -> str:
    return f"{ID_BASE}/{version_dir()}/{name}"


def hint_line(name: str, depth: int) -> str:
    """The editor hint of a data file ``depth`` directories below the directory holding ``schema/``
    (``profiles/x.yaml`` is 1, ``profiles/kernels/cpu.yaml`` 2)."""
    return f"# yaml-language-server: $schema={'../' * depth}schema/{version_dir()}/{name}"


def _schema(model, name: str, title: str) -> dict:
    s = model.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": DIALECT, "$id": schema_id(name), "title": title, **s}


def schemas() -> dict[str, dict]:
    return {name: _schema(model, name, title) for name, (model, title) in _models().items()}


def render(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(directory: Path) -> list[Path]:
    """Write this version's schemas to ``directory/v<N>/`` (``directory`` is a ``schema/`` folder); each
    file is replaced atomically, a read-only place is an ``InputError`` naming it."""
    from ..outputs import write_output

    d = Path(directory) / version_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from ..errors import InputError

        raise InputError(f"cannot create the schema directory {d}: {e.strerror or e}") from None
    out = []
    for name, s in schemas().items():
        out.append(write_output(d / name, render(s), suffixes=(".json",), replace=True, what="schema"))
    return out


def drifted(directory: Path) -> list[str]:
    """Files of ``directory/v<N>/`` that are missing or differ from what the models generate now."""
    d = Path(directory) / version_dir()
    bad = []
    for name, s in schemas().items():
        p = d / name
        try:
            same = p.is_file() and p.read_text(encoding="utf-8") == render(s)
        except (OSError, UnicodeDecodeError):
            same = False
        if not same:
            bad.append(f"{version_dir()}/{name}")
    return bad
