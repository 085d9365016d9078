"""pytest plugin: CPU seconds per test and per file, so CI time can be watched on a loaded machine.

Wall time (``--durations``) depends on how many other processes share the cores; CPU time (user + sys of
this process and of the children it reaped, from ``os.times``) does not, so it is what to compare when
deciding which test to make cheaper. Load it with ``-p tools.cpu_durations`` (``PYTHONPATH`` = the repo);
it writes ``$OMLX_CPU_DURATIONS`` (default ``cpu_durations.tsv`` in the working directory, git-ignored): one line per
test phase-summed (``cpu_s<TAB>nodeid``), and prints the 25 largest files and tests at the end. Under
pytest-xdist each worker appends its own lines (the file is opened in append mode).
"""
from __future__ import annotations

import os
from collections import defaultdict

import pytest

_CPU: dict[str, float] = defaultdict(float)


def _now() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    t0 = _now()
    yield
    _CPU[item.nodeid] += _now() - t0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    t0 = _now()
    yield
    _CPU[item.nodeid] += _now() - t0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    t0 = _now()
    yield
    _CPU[item.nodeid] += _now() - t0


def pytest_sessionfinish(session):
    if not _CPU:
        return
    path = os.environ.get("OMLX_CPU_DURATIONS", "cpu_durations.tsv")
    with open(path, "a", encoding="utf-8") as f:
        for nodeid, s in _CPU.items():
            f.write(f"{s:.3f}\t{nodeid}\n")


def pytest_terminal_summary(terminalreporter):
    if not _CPU:
        return
    files: dict[str, float] = defaultdict(float)
    for nodeid, s in _CPU.items():
        files[nodeid.split("::")[0]] += s
    w = terminalreporter
    w.write_sep("=", f"CPU seconds: {sum(_CPU.values()):.1f} in {len(_CPU)} tests")
    for name, s in sorted(files.items(), key=lambda kv: -kv[1])[:25]:
        w.write_line(f"{s:9.2f}  {name}")
    w.write_sep("-", "largest tests")
    for name, s in sorted(_CPU.items(), key=lambda kv: -kv[1])[:25]:
        w.write_line(f"{s:9.2f}  {name}")
