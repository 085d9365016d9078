#!/usr/bin/env python3
"""Run oMLX's own memory-monitor tests against ``omlx_profiles.compat`` (issue 16). Not part of CI.

Why: the facade claims to be a drop-in for oMLX's ``omlx/memory_monitor.py``; the way to check that is the
way an oMLX maintainer would -- oMLX's source at a given commit, its ``memory_monitor.py`` replaced by a
module that re-exports the facade, and oMLX's own tests for the monitor and its callers, unedited.

What it does:
1. lays out oMLX's tree at ``--commit`` from a local git copy (``--omlx-repo``: a bare or normal git
   directory of github.com/jasonpaulso/omlx, e.g. the one the ``fetch`` tool brings), skipping blobs the
   copy does not hold (large eval data files, never imported by these tests);
2. ``--mode facade`` (default) replaces ``omlx/memory_monitor.py`` with the one line
   ``from omlx_profiles.compat import *`` (README, "Using it in oMLX"); ``--mode original`` keeps oMLX's
   module, as the reference run;
3. makes a venv OUTSIDE the project's venv (``--venv``, default ``~/.cache/omlx-profiles/omlx-venv``) and
   installs oMLX's pinned test dependencies from PyPI (oMLX pins mlx-lm / mlx-vlm / dflash-mlx to git
   commits; PyPI carries the same releases: mlx-lm 0.31.3 is the pinned commit's version);
4. runs pytest on oMLX's monitor, scheduler-guard, DFlash-guard, engine-preflight and server-handler
   tests with this project on ``PYTHONPATH`` and writes a JSON summary (``--out``).

Usage::

    python benchmarks/omlx/run_omlx_tests.py --omlx-repo /work/.mirror/jasonpaulso+omlx/repo \\
        [--commit 70fa3482] [--mode facade|original] [--venv DIR] [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = [
    "tests/test_memory_monitor.py",
    "tests/test_memory_monitor_vlm_config.py",
    "tests/test_scheduler_prefill_memory_guard.py",
    "tests/test_dflash_prefill_memory_guard.py",
    "tests/test_engine_preflight.py",
    "tests/test_server_prefill_memory_handler.py",
]

# oMLX's test dependencies, from PyPI (oMLX 70fa3482 pins mlx 0.32.0, mlx-lm at v0.31.3's commit, mlx-vlm
# and dflash-mlx at git commits; the imports these tests reach are covered by these releases).
DEPS = [
    "mlx[cpu]==0.32.0",
    "mlx-lm==0.31.3",
    "mlx-vlm",
    "transformers>=5.7.0,<5.13",
    "fastapi>=0.108.0",
    "starlette",
    "httpx>=0.27.0,<1",
    "uvicorn>=0.23.0",
    "python-multipart>=0.0.5",
    "openai-harmony",
    "jsonschema>=4.0.0",
    "psutil>=5.9.0",
    "pydantic>=2",
    "pyyaml>=6.0",
    "numpy>=1.24.0,<2.4",
    "tokenizers>=0.19.0",
    "huggingface-hub>=0.23.0",
    "tqdm",
    "jinja2",
    "itsdangerous>=2.0",
    "regex",
    "tabulate",
    "requests",
    "pytest>=8",
    "pytest-asyncio",
]

SHIM = '''"""oMLX's memory monitor, replaced by omlx-profiles' facade (benchmarks/omlx/run_omlx_tests.py)."""
from omlx_profiles.compat import *  # noqa: F401,F403
'''


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def layout(repo: Path, commit: str, dest: Path) -> list[str]:
    """Write every blob of ``commit`` the local copy holds under ``dest``; return the paths it lacks."""
    git = ["git", f"--git-dir={repo}"]
    tree = subprocess.run(git + ["ls-tree", "-r", "-z", commit], check=True, capture_output=True).stdout
    missing = []
    entries = []
    for rec in tree.split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, kind, obj = meta.split()
        if kind != b"blob":
            continue
        entries.append((mode.decode(), obj.decode(), path.decode()))
    check = subprocess.run(git + ["cat-file", "--batch-check"], input="\n".join(o for _, o, _ in entries) + "\n",
                           check=True, capture_output=True, text=True).stdout.splitlines()
    present = {line.split()[0] for line in check if not line.endswith("missing")}
    for mode, obj, path in entries:
        if obj not in present:
            missing.append(path)
            continue
        out = dest / path
        out.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            continue  # symlinks are not needed by the tests
        data = subprocess.run(git + ["cat-file", "blob", obj], check=True, capture_output=True).stdout
        out.write_bytes(data)
        if mode == "100755":
            out.chmod(0o755)
    return missing


def make_venv(venv: Path) -> Path:
    py = venv / "bin" / "python"
    stamp = venv / ".deps"
    want = "\n".join(DEPS)
    if py.exists() and stamp.exists() and stamp.read_text() == want:
        return py
    if not py.exists():
        sh([sys.executable, "-m", "venv", str(venv)])
    sh([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"])
    sh([str(py), "-m", "pip", "install", "-q", *DEPS])
    stamp.write_text(want)
    return py


def run(py: Path, src: Path, junit: Path, extra: list[str], backend: str | None) -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT)])
    env.pop("OMLX_PROFILES_BACKEND", None)
    if backend:
        env["OMLX_PROFILES_BACKEND"] = backend
    cmd = [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"--junitxml={junit}",
           "--continue-on-collection-errors",
           "-W", "ignore::DeprecationWarning", *TESTS, *extra]
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=src, env=env).returncode


def summarize(junit: Path) -> dict:
    root = ET.parse(junit).getroot()
    cases = root.iter("testcase")
    res = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "failures": []}
    for c in cases:
        name = f"{c.get('classname')}::{c.get('name')}"
        bad = c.find("failure")
        if bad is None:
            bad = c.find("error")
            kind = "error" if bad is not None else None
        else:
            kind = "failed"
        if kind:
            res[kind] += 1
            msg = (bad.get("message") or "").strip().splitlines()
            res["failures"].append({"test": name, "kind": kind, "message": msg[0][:400] if msg else ""})
        elif c.find("skipped") is not None:
            res["skipped"] += 1
        else:
            res["passed"] += 1
    res["total"] = res["passed"] + res["failed"] + res["error"] + res["skipped"]
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--omlx-repo", required=True, type=Path, help="git directory of a copy of oMLX's repository")
    ap.add_argument("--commit", default="70fa3482")
    ap.add_argument("--mode", choices=("facade", "original"), default="facade")
    ap.add_argument("--backend", choices=("cpu", "metal", "cuda"), default=None,
                    help="backend the facade models (OMLX_PROFILES_BACKEND); default: the running MLX's (cpu here)")
    ap.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "omlx-profiles" / "omlx-venv")
    ap.add_argument("--workdir", type=Path, default=None, help="where to lay oMLX out (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON summary here")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    a = ap.parse_args(argv)
    repo = a.omlx_repo
    if (repo / ".git").is_dir():
        repo = repo / ".git"
    work = a.workdir or Path(tempfile.mkdtemp(prefix="omlx-src-"))
    src = work / "omlx-src"
    if src.exists():
        subprocess.run(["rm", "-rf", str(src)], check=True)
    src.mkdir(parents=True)
    missing = layout(repo, a.commit, src)
    if missing:
        print(f"note: {len(missing)} blobs absent from the local copy (not needed by these tests): "
              + ", ".join(missing), flush=True)
    if a.mode == "facade":
        (src / "omlx" / "memory_monitor.py").write_text(SHIM)
    py = make_venv(a.venv)
    junit = work / f"junit-{a.mode}.xml"
    rc = run(py, src, junit, a.pytest_args, a.backend)
    res = summarize(junit)
    res.update(mode=a.mode, commit=a.commit, returncode=rc, backend=a.backend or "default",
               mlx_lm=subprocess.run([str(py), "-c", "import mlx_lm; print(mlx_lm.__version__)"],
                                     capture_output=True, text=True).stdout.strip())
    print(json.dumps({k: v for k, v in res.items() if k != "failures"}, indent=1))
    for f in res["failures"]:
        print(f"  {f['kind']}: {f['test']}: {f['message']}")
    if a.out:
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0 if rc in (0, 1) else rc


if __name__ == "__main__":
    sys.exit(main())
