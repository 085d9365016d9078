"""How a hostile case is run and judged (shared by tests/test_hostile*.py).

A case passes when the command:

* exits with the expected non-zero code (1: a profile is invalid / does not fit; 2: usage or input),
* says what is wrong and where (a fragment of the message, the file, the option or the id),
* shows no traceback and no ``internal error`` (the CLI's last line of defence: reaching it means an
  exception nobody turned into a sentence),
* writes nothing (the working directory is a fresh temporary one and must stay empty) and runs nothing
  (``MARKER`` in a case becomes a path that must not appear),
* finishes within ``CASE_SECONDS`` of this process's CPU time (an interval timer interrupts slow work; the CPU
  time is checked too) and within ``WALL_SECONDS`` of wall time (a hang that burns no CPU: a blocked read).
  CPU, not wall time, for the work: on a loaded CI box (2 cores, load 12) a 5 s wall alarm failed cases that did
  their work in ~1.5 s of CPU (session 12's baseline: test_generated_big_yaml[keys_60k] at 5.65 s wall, a sharded
  deepseek-v3 verdict interrupted inside ``fit``), and interrupted imports poisoned later tests (session 11).

Most cases run in-process through ``omlx_profiles.cli.main.main`` (fast); a few run in a subprocess to
prove no traceback reaches a real terminal.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
YAML_DIR = HERE / "yaml"
CONFIG_DIR = HERE / "config"
OK_DIR = HERE / "ok"

CASE_SECONDS = 5.0
#: The wall-clock backstop: only a case that WAITS (a FIFO, ``/dev/stdin`` on an open pipe) gets near it; work is
#: bounded by the CPU limit. At least this, and at least 12 x the CPU limit (a 12-load box gives a case ~1/12 core).
WALL_SECONDS = 60.0
# What must never reach a terminal raw: C0/C1 controls (ESC sequences repaint or hide text) and bidi
# overrides (they reorder what the user reads). Newline and tab are how messages are laid out.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
EXIT_INVALID, EXIT_USAGE = 1, 2


class CaseTimeout(BaseException):
    """Raised by the interval timer; a BaseException so the CLI's ``except Exception`` cannot swallow it."""


@contextlib.contextmanager
def deadline(seconds: float = CASE_SECONDS, wall: float | None = None):
    """At most ``seconds`` of this process's CPU time (``ITIMER_PROF``; the CLI's own per-command deadline,
    ``kv.work.deadline``, keeps this timer's end under its own and hands it back) and ``wall`` seconds of wall time
    (default: the larger of ``WALL_SECONDS`` and 12 x ``seconds``); past either, ``CaseTimeout``."""
    wall = max(WALL_SECONDS, 12 * seconds) if wall is None else wall

    def on_prof(signum, frame):
        raise CaseTimeout(f"case used more than {seconds} s of CPU")

    def on_alarm(signum, frame):
        raise CaseTimeout(f"case did not finish within {wall} s of wall time (blocked, not working)")

    old_prof = signal.signal(signal.SIGPROF, on_prof)
    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, wall)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alarm)


@dataclass
class Result:
    code: int
    out: str
    err: str
    seconds: float  # CPU seconds of this process (user + system): what the case's work cost, whatever the load
    wall: float = 0.0


def run_main(*argv: str, seconds: float = CASE_SECONDS) -> Result:
    """``omlx-profiles ARGV`` in-process, under a deadline."""
    from omlx_profiles.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    t0, w0 = time.process_time(), time.perf_counter()
    with deadline(seconds), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Result(code, out.getvalue(), err.getvalue(), time.process_time() - t0, time.perf_counter() - w0)


def run_subprocess(*argv: str, seconds: float = 20.0, cwd: Path | None = None, env: dict | None = None) -> Result:
    """``python -m omlx_profiles.cli.main ARGV`` in a child process (start-up included in the limit)."""
    full_env = dict(os.environ)
    full_env.pop("OMLX_PROFILES_DEBUG", None)
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    t0, c0 = time.perf_counter(), _children_cpu()
    p = subprocess.run([sys.executable, "-m", "omlx_profiles.cli.main", *argv], capture_output=True, text=True,
                       timeout=seconds, cwd=cwd, env=full_env)
    return Result(p.returncode, p.stdout, p.stderr, _children_cpu() - c0, time.perf_counter() - t0)


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the child's own cost, start-up included)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def assert_clean_failure(r: Result, codes, *fragments: str, where: str | None = None) -> None:
    """Non-zero expected exit, a sentence naming what (fragments) and where, no traceback, in time."""
    codes = (codes,) if isinstance(codes, int) else tuple(codes)
    text = r.err + r.out
    assert r.code in codes, f"exit {r.code}, expected {codes}; stderr: {r.err[:2000]}"
    assert "Traceback" not in text, text[:3000]
    assert "internal error" not in text, text[:3000]
    assert r.err.strip(), "no message on stderr"
    assert len(r.err) < 20_000, f"{len(r.err)} characters of error output: messages must stay readable"
    raw = CONTROL.search(r.err)
    assert raw is None, f"raw control character {raw.group()!r} reaches the terminal: {r.err[:2000]!r}"
    for f in fragments:
        assert f.lower() in r.err.lower(), f"{f!r} not in stderr: {r.err[:2000]}"
    if where is not None:
        assert where in r.err, f"{where!r} (where) not in stderr: {r.err[:2000]}"
    assert r.seconds < CASE_SECONDS, f"took {r.seconds:.2f} s of CPU"


def assert_nothing_written(directory: Path, before: set[str]) -> None:
    after = {p.name for p in directory.iterdir()}
    assert after == before, f"files appeared: {sorted(after - before)}"


def model_dir(root: Path, name: str = "m", config: dict | None = None) -> Path:
    """A model directory ``root/name`` holding ``config`` as its config.json (none when ``config`` is None)."""
    import json

    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    return d


def refusal_problems(calls, allowed=None, cpu: float | None = None) -> list[str]:
    """For ``(label, call)`` pairs that must each be refused: what was answered, refused with an exception
    that is not one of ``allowed`` (default: the typed ``OmlxProfilesError``), or took more than ``cpu``
    seconds of CPU. Empty when every call was refused as it should be."""
    if allowed is None:
        from omlx_profiles.errors import OmlxProfilesError as allowed
    bad = []
    for label, call in calls:
        t0 = time.process_time()
        try:
            call()
            bad.append(f"{label}: answered")
        except allowed:
            pass
        except Exception as e:  # noqa: BLE001 - what the judge is about
            bad.append(f"{label}: {type(e).__name__}: {e}")
        if cpu is not None and time.process_time() - t0 > cpu:
            bad.append(f"{label}: {time.process_time() - t0:.1f} s")
    return bad
