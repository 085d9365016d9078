"""The package's layers hold: import-linter's contracts in pyproject.toml ([tool.importlinter]).

* layers: cli | compat > sharding | hub > estimate | live > peak > kv > extraction > mlxlm > registry >
  schema > units | outputs | quantization | versions > files > errors; a module
  imports only from layers below its own (README "Architecture");
* forbidden: nothing outside ``live/`` imports mlx, mlx_lm, matplotlib or transformers directly; the
  documented exceptions (chart's matplotlib, calibrate's and the oMLX facade's lazy mlx) are listed in
  ``ignore_imports``;
* layers inside the oMLX facade (``compat/``): ``from_model | guard`` > ``monitor`` > ``kv_terms | sdpa | seed |
  uniform`` > ``read``;
* independence: ``units/``' three modules (sizes, counts, dtypes) import none of each other;
* independence: no CLI command module imports another (shared flags in ``cli/common.py``, arithmetic in
  ``estimate/``).

tests/test_imports.py checks the runtime side (estimating loads no heavy module).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    # In a child process: import-linter configures logging with dictConfig, which disables every logger
    # that already exists in this process (the oMLX facade's log assertions then see nothing).
    pytest.importorskip("importlinter")
    r = subprocess.run([sys.executable, "-c", "import sys; from importlinter import cli; "
                        f"sys.exit(cli.lint_imports(config_filename={str(REPO / 'pyproject.toml')!r}, no_cache=True))"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
