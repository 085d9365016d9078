"""``action.yml``, the composite GitHub Action: its definition, and its validation step run by bash the way
a runner runs it (inputs through ``env:``, ``$GITHUB_OUTPUT``), with this checkout's ``omlx-profiles``
on PATH in place of the install step (which is ``pip install <action path>``, i.e. what ``make install``
does). The step's annotations and SARIF file must be exactly the CLI's (the goldens of
``test_validate_formats``), and a problem must fail the step.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from omlx_profiles import __version__

REPO = Path(__file__).resolve().parents[1]
CASES = Path(__file__).resolve().parent / "validate_cases"


def _action() -> dict:
    return yaml.safe_load((REPO / "action.yml").read_text())


def _expr(value: str, inputs: dict) -> str:
    """The two expressions the action uses: ``${{ inputs.X }}`` and ``${{ github.action_path }}``."""
    def sub(m):
        ref = m.group(1)
        if ref.startswith("inputs."):
            return inputs[ref.removeprefix("inputs.")]
        assert ref == "github.action_path", ref
        return str(REPO)
    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", sub, value)


def test_definition():
    a = _action()
    assert a["runs"]["using"] == "composite" and a["name"] and a["description"]
    declared = set(a["inputs"])
    text = (REPO / "action.yml").read_text()
    used = set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", text))
    assert used <= declared, used - declared
    for step in a["runs"]["steps"]:
        if "run" in step:
            assert step["shell"] == "bash"
            # inputs reach scripts through env:, never pasted into the script (no injection)
            assert "${{" not in step["run"], step["name"]
    assert any("pip install" in s.get("run", "") for s in a["runs"]["steps"])


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("sarif", [True, False])
def test_validate_step_runs_like_a_runner(tmp_path, sarif):
    a = _action()
    step = next(s for s in a["runs"]["steps"] if s.get("id") == "validate")
    inputs = {k: v.get("default", "") for k, v in a["inputs"].items()}
    inputs.update(paths="profiles\n  missing.yaml", format="github")
    inputs["sarif-file"] = str(tmp_path / "out.sarif") if sarif else ""
    env = dict(os.environ, GITHUB_OUTPUT=str(tmp_path / "gh_output"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("OMLX_PROFILES_PATH", None)
    env.update({k: _expr(v, inputs) for k, v in step["env"].items()})
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=CASES, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr  # problems fail the step
    assert r.stdout == (CASES / "expected" / "validate.github.txt").read_text()
    out = (tmp_path / "gh_output").read_text() if (tmp_path / "gh_output").exists() else ""
    if sarif:
        got = (tmp_path / "out.sarif").read_text().replace(f'"version": "{__version__}"', '"version": "<version>"')
        assert got == (CASES / "expected" / "validate.sarif").read_text()
        assert out == f"sarif-file={tmp_path / 'out.sarif'}\n"
    else:
        assert out == ""


def test_validate_step_passes_clean_files(tmp_path):
    a = _action()
    step = next(s for s in a["runs"]["steps"] if s.get("id") == "validate")
    inputs = {k: v.get("default", "") for k, v in a["inputs"].items()}
    env = dict(os.environ, GITHUB_OUTPUT=str(tmp_path / "gh_output"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("OMLX_PROFILES_PATH", None)
    env.update({k: _expr(v, inputs) for k, v in step["env"].items()})
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=120)  # default paths: profiles (this repository's own)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "" and r.stderr.startswith("ok:")
