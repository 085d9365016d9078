"""The package's layers hold: import-linter's contracts in pyproject.toml ([tool.importlinter]).

* layers: cli | compat > sharding | hub > estimate | live > peak > kv > extraction > mlxlm > registry >
  schema > units | dtypes | validation | files | outputs | quantization | versions > errors; a module
  imports only from layers below its own (README "Architecture");
* forbidden: nothing outside ``live/`` imports mlx, mlx_lm, matplotlib or transformers directly; the
  documented exceptions (chart's matplotlib, calibrate's and the oMLX facade's lazy mlx) are listed in
  ``ignore_imports``;
* independence: no CLI command module imports another (shared flags in ``cli/common.py``, arithmetic in
  ``estimate/``).

tests/test_imports.py checks the runtime side (estimating loads no heavy module).
"""
from __future__ import annotations

from pathlib import Path

from importlinter import cli

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold(capsys):
    code = cli.lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True)
    out = capsys.readouterr().out
    assert code == 0, out
