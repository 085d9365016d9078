"""Shared fixtures. The real config.json corpus lives in tests/configs (a copy of shared/configs)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Hypothesis: the "ci" profile (default) keeps no example database (pytest-xdist workers would share one
# directory of writable files) and derandomizes, so every run checks the same examples and a failure
# reproduces anywhere. HYPOTHESIS_PROFILE=dev gives random examples and the usual .hypothesis/ database.
settings.register_profile("ci", database=None, derandomize=True)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# No test reaches the real Hugging Face Hub: ids the registry does not know fall back to the Hub only
# through its cache, which starts empty (tests/test_hub.py runs its own fake Hub and sets these itself).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_CACHE"] = tempfile.mkdtemp(prefix="omlx-test-hf-cache-")
os.environ.pop("HF_TOKEN", None)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
# The 26 real Hugging Face config.json files (sources in tests/configs/SOURCES.tsv), copied from the
# team's shared/configs so the suite runs the same in any clone.
CONFIGS = Path(__file__).resolve().parent / "configs"
PROFILES = REPO / "profiles"


@pytest.fixture
def profiles_copy(tmp_path) -> Path:
    """A writable copy of the built-in family files (kernel tables and calibration data left out)."""
    dst = tmp_path / "profiles"
    dst.mkdir()
    for p in PROFILES.glob("*.yaml"):
        shutil.copy(p, dst / p.name)
    return dst


def run_cli(*argv: str):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    import contextlib
    import io

    from omlx_profiles.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli():
    return run_cli


def python() -> str:
    return sys.executable


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Make ``@pytest.mark.xdist_group`` work under ``make test`` (``-n ... --dist loadgroup``).

    pytest-xdist (3.8) puts a group's tests on one worker by appending ``@group`` to each test's nodeid,
    and does it by assigning ``item._nodeid``; pytest >= 9.2 derives ``nodeid`` from ``item._id``, so
    that assignment is ignored and the groups are silently spread over the workers (measured: the
    shared live runs of tests/test_kv_live.py were built twice). Where xdist's own suffix did not take,
    set it the way this pytest reads it; with an older pytest (suffix present) this does nothing.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # a pytest where xdist's own ``_nodeid`` assignment works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working directory (the hostile suites': anything a command writes there is a failure)."""
    wd = tmp_path / "cwd"
    wd.mkdir()
    monkeypatch.chdir(wd)
    return wd
