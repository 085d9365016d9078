"""The pre-commit hook of ``.pre-commit-hooks.yaml``, run by the real ``pre-commit`` tool.

A downstream repository (a temporary git repository with its own ``my-profiles/``) uses the hook with
the one config block the README shows, pointing at a snapshot of this repository (its tracked and
untracked-but-not-ignored files, committed in a temporary clone, so the test checks the working tree).
pre-commit builds the hook's environment from that snapshot exactly as it would from a git URL: a
virtualenv, ``pip install .`` (dependencies from PyPI or the pip cache; no Hugging Face access). The
environment is built once for the module (~20-45 s on 2 busy cores) and reused by every run.

What it proves: the manifest is valid; staged good files pass, including a ``base:`` naming a built-in
variant and one naming a variant of an unchanged, already committed sibling file; staged bad files
fail with ``file:line: field: sentence`` for a schema error, an id also claimed by the committed
sibling, a bad calibration file and a bad kernel table; YAML outside a profiles directory is not
passed to the hook; and ``git commit`` with the installed hook refuses a bad file.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                                reason="needs git and a git checkout of this repository")

LAB = """\
family: lab_llama
model_types: [llama]
variants:
  - name: lab-llama-1b-ft
    base: llama-3.2-1b-instruct
    ids: [example-lab/llama-1b-ft]
"""
LAB_CHILD = """\
family: lab_llama_child
model_types: [llama]
variants:
  - name: lab-llama-1b-ft-long
    base: lab-llama-1b-ft
    ids: [example-lab/llama-1b-ft-long]
"""
BAD_SCHEMA = """\
family: lab_bad
model_types: [llama]
variants:
  - name: lab-bad
    base: lab-llama-1b-ft
    ids: [example-lab/bad]
    num_layers: zero
"""
BAD_DUP = """\
family: lab_dup
model_types: [llama]
variants:
  - name: lab-dup
    base: llama-3.2-1b-instruct
    ids: [example-lab/llama-1b-ft]
"""
BAD_CALIBRATION = """\
backend: cpu
device: Device(cpu, 0)
mlx: 0.32.4
points:
  - {model: x, profile: lab-llama-1b-ft, prefill_step_size: 512, tokens: 1024, peak_over_baseline: [-5]}
"""
BAD_KERNELS = "backend: npu\n"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _env(home: Path) -> dict:
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid", PRE_COMMIT_COLOR="never")
    env.pop("OMLX_PROFILES_PATH", None)
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):  # pytest may run inside a git hook
        env.pop(k, None)
    return env


@pytest.fixture(scope="module")
def downstream(tmp_path_factory):
    """(run, repo): ``run(*args)`` runs pre-commit in a downstream repository whose config uses the hook."""
    root = tmp_path_factory.mktemp("precommit")
    snap = root / "omlx-profiles"
    files = _git(REPO, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for f in filter(None, files):
        src = REPO / f
        if src.is_file() and not src.is_symlink():
            (snap / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, snap / f)
    env = _env(root / "home")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(["git", *args], cwd=snap, check=True, env=env, capture_output=True)
    rev = _git(snap, "rev-parse", "HEAD").strip()

    ds = root / "lab"
    (ds / "my-profiles").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=ds, check=True, env=env)
    (ds / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {snap.as_posix()}\n    rev: {rev}\n    hooks:\n      - id: omlx-profiles-validate\n")

    def run(*args: str, check_env=env):
        return subprocess.run(args, cwd=ds, env=check_env, capture_output=True, text=True, timeout=600)

    return run, ds


def test_manifest_is_valid():
    r = subprocess.run([*PRE_COMMIT, "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hook_end_to_end(downstream):
    run, ds = downstream
    prof = ds / "my-profiles"

    # 1. good files (a base in the built-in registry) plus YAML the hook must not see
    (prof / "lab.yaml").write_text(LAB)
    (ds / "ci.yaml").write_text("on: [push]\nfamily: not a profile\n")
    run("git", "add", "-A")
    r = run(*PRE_COMMIT, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "omlx-profiles validate" in r.stdout and "Passed" in r.stdout
    r = run("git", "commit", "-q", "-m", "lab profiles")
    assert r.returncode == 0, r.stdout + r.stderr

    # 2. a staged file whose base is a variant of the unchanged, committed sibling: resolves
    (prof / "lab_child.yaml").write_text(LAB_CHILD)
    run("git", "add", "-A")
    r = run(*PRE_COMMIT, "run")
    assert r.returncode == 0, r.stdout + r.stderr

    # 3. staged bad files: every one is reported with file:line and field; the exit code fails the commit
    (prof / "bad.yaml").write_text(BAD_SCHEMA)
    (prof / "dup.yaml").write_text(BAD_DUP)
    (prof / "calibration" / "cpu").mkdir(parents=True)
    (prof / "calibration" / "cpu" / "run.yaml").write_text(BAD_CALIBRATION)
    (prof / "kernels").mkdir()
    (prof / "kernels" / "npu.yaml").write_text(BAD_KERNELS)
    run("git", "add", "-A")
    r = run(*PRE_COMMIT, "run")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "Failed" in out and "- hook id: omlx-profiles-validate" in out
    assert "my-profiles/bad.yaml:7: variants.0.num_layers: Input should be a valid integer" in out
    # the id is also claimed by lab.yaml, which is committed and not staged: checked all the same (the
    # registry loads a directory in name order, so the later file, lab.yaml, carries the error)
    assert ("my-profiles/lab.yaml:6: variants.0.ids.0: id 'example-lab/llama-1b-ft' is already claimed by "
            "variant 'lab-dup' at my-profiles/dup.yaml:6") in out
    assert "my-profiles/calibration/cpu/run.yaml:5: points.0.peak_over_baseline.0: Input should be greater than or equal to 0" in out
    assert "my-profiles/kernels/npu.yaml:1: backend: Input should be 'metal', 'cuda' or 'cpu'" in out
    assert "ci.yaml" not in out and "Traceback" not in out

    # 4. the installed git hook refuses the commit
    r = run(*PRE_COMMIT, "install")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("git", "commit", "-q", "-m", "bad profiles")
    assert r.returncode != 0
    assert "my-profiles/bad.yaml:7" in r.stdout + r.stderr
    assert _git(ds, "log", "--format=%s") == "lab profiles\n"
