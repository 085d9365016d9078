"""How every generated hostile pass runs and judges its cases (sweeps four to seven, the timing sweep).

One place for what each pass used to repeat (session 10's review found the fifth's and the sixth's
case-running blocks written twice):

* ``run`` / ``judge`` / ``report``: a CLI case in-process with a spy on the catch-all
  (``cli.main._internal``) and a CPU-time limit; misbehaving = a hang, the catch-all, a traceback, a raw
  control character, an exit code outside 0/1/2, a non-zero exit with nothing said, a wrong answer (the
  case's own ``expect``) or more than ``SLOW_CPU`` seconds of CPU;
* ``report_calls``: a Python API / facade call under the same CPU limit; misbehaving = an exception not of
  the allowed (typed) kinds, a negative or non-finite number, or the call's own ``check``;
* ``in_groups``: a fresh temporary working directory, one sub-directory per group, permissions restored
  so it can be removed.

``OMLX_SWEEP_DUMP=file.jsonl`` keeps every CLI case (exit code, output, CPU time) for reading the silent ones.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import stat
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIGS = REPO / "tests" / "configs"
CASE_CPU = 6.0
SLOW_CPU = 3.0
DUMP = open(os.environ["OMLX_SWEEP_DUMP"], "a") if os.environ.get("OMLX_SWEEP_DUMP") else None


class Timeout(BaseException):
    """Raised by the CPU timer; a BaseException so no ``except Exception`` in the code under test eats it."""


def model_dir(root: Path, name: str, cfg: dict | None = None) -> Path:
    """A directory ``root/name`` (created), with ``cfg`` written as its config.json when given: the sweeps'
    local "model" directories."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    if cfg is not None:
        (d / "config.json").write_text(json.dumps(cfg))
    return d


@contextlib.contextmanager
def cpu_limit(seconds: float):
    """Raise ``Timeout`` in this process after ``seconds`` of its CPU time (SIGPROF)."""
    def on_prof(signum, frame):
        raise Timeout()

    old = signal.signal(signal.SIGPROF, on_prof)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def run(argv: list[str], cpu: float = CASE_CPU):
    """``(code, stdout, stderr, cpu_s, catch-all hits, timed_out)`` of ``omlx-profiles ARGV`` in-process."""
    from omlx_profiles.cli import main as cli_main

    hit: list[str] = []
    real = cli_main._internal
    cli_main._internal = lambda e: hit.append(repr(e)[:300]) or real(e)
    out, err = io.StringIO(), io.StringIO()
    t0 = time.process_time()
    timed_out = False
    try:
        with cpu_limit(cpu), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main.main(list(argv))
    except Timeout:
        code, timed_out = None, True
    except BaseException as e:  # noqa: BLE001 - a sweep reports everything
        code = f"raised {e!r}"[:200]
    finally:
        cli_main._internal = real
    return code, out.getvalue(), err.getvalue(), time.process_time() - t0, hit, timed_out


def judge(argv, res, expect=None) -> list[str]:
    from tests.hostile.harness import CONTROL

    code, out, err, cpu, hit, timed_out = res
    bad = []
    if timed_out:
        bad.append(f"HANG >{CASE_CPU}s cpu")
    if hit:
        bad.append(f"INTERNAL {hit[0]}")
    if isinstance(code, str):
        bad.append(code)
    if "Traceback" in out + err:
        bad.append("TRACEBACK")
    if CONTROL.search(out + err):
        bad.append(f"CONTROL {CONTROL.search(out + err).group()!r}")
    if code not in (0, 1, 2, None) and not isinstance(code, str):
        bad.append(f"EXIT {code}")
    if code in (1, 2) and not err.strip() and not any(w in out.lower() for w in ("does not fit", "unknown", "past",
                                                                                  "nothing fits")):
        bad.append("SILENT FAILURE")
    if expect is not None:
        why = expect(code, out, err)
        if why:
            bad.append(f"WRONG {why}")
    if cpu > SLOW_CPU and not timed_out:
        bad.append(f"SLOW {cpu:.1f}s")
    return bad


def report(group: str, cases, cpu: float = CASE_CPU) -> int:
    """Run and judge ``(argv, expect)`` cases; print each misbehaving one; return how many misbehaved."""
    n = found = 0
    for argv, expect in cases:
        n += 1
        res = run(argv, cpu=cpu)
        bad = judge(argv, res, expect)
        if DUMP is not None:
            DUMP.write(json.dumps({"group": group, "argv": argv, "code": res[0], "out": res[1][:1500],
                                   "err": res[2][:600], "cpu": round(res[3], 2), "bad": bad}) + "\n")
            DUMP.flush()
        if bad:
            found += 1
            shown = [a if len(a) < 120 else a[:120] + "..." for a in argv]
            print(f"[{group}] {shown!r}: {'; '.join(bad)} | exit={res[0]} err={res[2][:300]!r}", flush=True)
    print(f"== {group}: {n} cases, {found} misbehaving", flush=True)
    return found


def number_problem(v) -> str | None:
    """A byte count or length that no answer may be: negative, NaN or infinite (bools and None are not numbers)."""
    if isinstance(v, bool) or v is None or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return f"NON-FINITE {v}"
    return f"NEGATIVE {v}" if v < 0 else None


def call_problems(label: str, fn, allowed, check=None, cpu: float = 5.0) -> list[str]:
    """What is wrong with one API call: an untyped exception, a hang, a bad number, or ``check(label, out)``.

    ``allowed`` is the exception types a refusal may have, or a function of the label giving them."""
    allowed = allowed(label) if callable(allowed) and not isinstance(allowed, type) else allowed
    bad: list[str] = []
    out = None
    t0 = time.process_time()
    try:
        with cpu_limit(cpu), contextlib.redirect_stderr(io.StringIO()):
            out = fn()
    except Timeout:
        bad.append(f"HANG > {cpu} s")
    except allowed:
        return bad
    except BaseException as e:  # noqa: BLE001 - what the judge is about
        bad.append(f"UNTYPED {type(e).__name__}: {str(e)[:150]}")
    spent = time.process_time() - t0
    if bad:
        return bad
    why = number_problem(out)
    if why:
        bad.append(why)
    if check is not None:
        bad += check(label, out)
    if spent > SLOW_CPU * 2 / 3:
        bad.append(f"SLOW {spent:.1f}s")
    return bad


def report_calls(group: str, calls, allowed=(), check=None, problems=None) -> int:
    """``call_problems`` (or the group's own ``problems(label, item)``) over ``(label, item)`` pairs; print
    each misbehaving one; return how many."""
    problems = problems or (lambda label, fn: call_problems(label, fn, allowed, check))
    n = found = 0
    for label, item in calls:
        n += 1
        bad = problems(label, item)
        if bad:
            found += 1
            print(f"[{group}] {label}: {'; '.join(bad)}", flush=True)
    print(f"== {group}: {n} cases, {found} misbehaving", flush=True)
    return found


@contextlib.contextmanager
def env_var(name: str, value: str | None):
    """``os.environ[name] = value`` (None: unset) for the block, restored after."""
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def in_groups(groups, run_group) -> int:
    """``run_group(name, directory)`` for each group in a fresh temporary working directory; the sum of
    what they return (misbehaving cases). Permissions are restored so the directory can be removed."""
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        old = os.getcwd()
        os.chdir(root)
        try:
            for g in groups:
                sub = root / g
                sub.mkdir()
                total += run_group(g, sub)
        finally:
            os.chdir(old)
            for p in root.rglob("*"):
                with contextlib.suppress(OSError):
                    if not p.is_symlink():
                        p.chmod(stat.S_IRWXU)
    return total
