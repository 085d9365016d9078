"""(Re)write the editor hint line of every data file the repository ships.

    python tools/schema_hints.py          # rewrite profiles/**/*.yaml in place
    python tools/schema_hints.py --check  # exit 1 (and list them) when a file's first line is not its hint

Each YAML under ``profiles/`` starts with ``# yaml-language-server: $schema=<relative path>`` pointing
at the versioned schema of its kind (``schema_export.hint_line``); an old hint line is replaced, a
missing one inserted. Run it after adding data files or bumping ``SCHEMA_VERSION``;
``tests/test_schema.py`` fails until it was run.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from omlx_profiles.registry.paths import data_file_kind  # noqa: E402
from omlx_profiles.schema.export import (CALIBRATION, KERNELS, MODULE, MODULE_INDEX, NAMING, PROFILE,  # noqa: E402
                                         SHARDING, hint_line)

SCHEMA_OF_KIND = {"family": PROFILE, "kernels": KERNELS, "calibration": CALIBRATION, "sharding": SHARDING, "naming": NAMING,
                  "module": MODULE, "module_index": MODULE_INDEX}
PREFIX = "# yaml-language-server:"


def expected_hint(path: Path, root: Path = ROOT) -> str | None:
    name = SCHEMA_OF_KIND.get(data_file_kind(path))
    return hint_line(name, len(path.resolve().relative_to(root.resolve()).parts) - 1) if name else None


def data_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in (root / "profiles").rglob("*.yaml") if p.is_file())


def fixed_text(path: Path, root: Path = ROOT) -> str | None:
    """The file's text with its hint line in place, or None when it has no schema."""
    hint = expected_hint(path, root)
    if hint is None:
        return None
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [ln for ln in lines if not ln.startswith(PREFIX)]
    return hint + "\n" + "".join(lines)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    bad = []
    for p in data_files():
        new = fixed_text(p)
        if new is None or new == p.read_text(encoding="utf-8"):
            continue
        bad.append(p)
        if not check:
            p.write_text(new, encoding="utf-8")
    for p in bad:
        print(f"{'stale hint' if check else 'rewrote'}: {p.relative_to(ROOT)}")
    return 1 if check and bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
