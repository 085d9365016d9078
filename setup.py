"""Build hook: ship the built-in registry (profiles/) and the JSON Schema (schema/) inside the wheel.

The user fixed the layout (profiles/ and schema/ at the repository root), but a plain
``pip install .`` must still find them, so they are copied into ``omlx_profiles/data/`` at build time.
An editable install reads them from the repository root instead (see ``omlx_profiles.paths``).
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithRegistry(build_py):
    def run(self):
        super().run()
        data = Path(self.build_lib) / "omlx_profiles" / "data"
        for name in ("profiles", "schema"):
            target = data / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(ROOT / name, target, ignore=shutil.ignore_patterns("*.md", "__pycache__"))


setup(cmdclass={"build_py": BuildWithRegistry})
