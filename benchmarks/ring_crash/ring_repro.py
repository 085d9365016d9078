"""Reproduce MLX 0.32.x's CPU-ring rank segfault (session 11/12: a rank dies with SIGSEGV inside a case, the peer
reports "[ring] connection to a peer was lost"); count crashes per case and say where each one happened.

    python benchmarks/ring_crash/ring_repro.py cases SPEC.json --launches 5      # the real rank code (live.sharded)
    python benchmarks/ring_crash/ring_repro.py collectives --iters 2000 --launches 5   # ring collectives alone

Every rank runs under ``python -X faulthandler``: a segfault prints every thread's Python stack to stderr, so
the crash is placed at a Python line (which case, which step: load / shard / eval / prefill / free) without a
debugger. ``--gdb`` runs each rank under ``gdb -batch`` and keeps its native backtrace instead (slower).
Each launch runs every case from the start (no resume: a crash ends the launch); the summary counts
launches, cases finished, crashes, and the frames of the crashing thread. Load: whatever the machine has
(``os.getloadavg`` is printed with each launch).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ports(n):
    sys.path.insert(0, str(ROOT))
    from omlx_profiles.live.sharded import _free_ports
    return _free_ports(n)


COLLECTIVES = r'''
import sys, mlx.core as mx
mx.set_default_device(mx.cpu)
g = mx.distributed.init(backend="ring", strict=True)
iters, size = int(sys.argv[1]), int(sys.argv[2])
for i in range(iters):
    # one collective per eval: two in one graph may be ordered differently on the two ranks (a deadlock)
    x = mx.random.normal((size,))
    y = mx.distributed.all_sum(x * 2, group=g) + 1   # a fresh, donatable input; a consumer of the output
    mx.eval(y)
    z = mx.distributed.all_gather(y[:16], group=g)
    mx.eval(z)
    if g.rank() == 0:
        mx.eval(mx.distributed.send(y[:64], 1, group=g))
    else:
        mx.eval(mx.distributed.recv_like(y[:64], 0, group=g))
    del x, y, z
    if i % 500 == 0:
        print(f"iter {i}", file=sys.stderr, flush=True)
print("done", file=sys.stderr, flush=True)
'''


def _core_on():
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _core_bt(tmp: Path, pid: int) -> list[str]:
    """The crashing thread's native frames from the rank's core file (kernel.core_pattern "core": cwd/core[.pid])."""
    cores = [c for c in (tmp / f"core.{pid}", tmp / "core") if c.exists()]
    if not cores:
        return []
    out = subprocess.run(["gdb", "-q", "-batch", "-ex", "bt 30", sys.executable, str(cores[0])],
                         capture_output=True, text=True, timeout=300).stdout
    cores[0].rename(tmp / f"core-kept-{pid}")
    return [x for x in out.splitlines() if re.match(r"#\d+ ", x)]


def _launch(cmd_for_rank, ranks, tmp: Path, tag: str, timeout: float, env_extra: dict, core: bool = False):
    ports = _ports(ranks)
    host = tmp / f"hosts-{tag}.json"
    host.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in ports]))
    procs = []
    for r in range(ranks):
        env = dict(os.environ, MLX_RANK=str(r), MLX_HOSTFILE=str(host), MLX_WORLD_SIZE=str(ranks),
                   PYTHONPATH=str(ROOT), **env_extra)
        procs.append(subprocess.Popen(cmd_for_rank(r), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=tmp, preexec_fn=_core_on if core else None))
    out = []
    end = time.monotonic() + timeout
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            err += "\nTIMEOUT"
        out.append((p.returncode, err, p.pid))
    return out


def _where(err: str) -> dict:
    """The last stage line and the crashing thread's frames (faulthandler's "Current thread" block)."""
    stages = [x for x in err.splitlines() if x.startswith("case ") or x in ("loaded", "sharded", "evaluated", "ring up")]
    case = next((x[5:] for x in reversed(stages) if x.startswith("case ")), None)
    step = stages[-1] if stages else None
    m = re.search(r"Fatal Python error: (\w+).*?\n\n(?:Thread|Current thread) [^\n]*\n((?:  File [^\n]*\n)+)", err, re.S)
    frames = [f.strip() for f in m.group(2).splitlines()][:6] if m else []
    gdb = [x for x in err.splitlines() if re.match(r"#\d+ ", x)][:25]
    return {"case": case, "step": step, "frames": frames, "gdb": gdb,
            "ring": sum("[ring]" in x for x in err.splitlines())}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("cases", "collectives"))
    ap.add_argument("spec", nargs="?")
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--gdb", action="store_true")
    ap.add_argument("--core", action="store_true", help="let a crashing rank dump core; print its native backtrace")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for every rank (a workaround under test)")
    ap.add_argument("--jsonl", default=None, help="append one line per launch here")
    a = ap.parse_args()
    env_extra = dict(kv.split("=", 1) for kv in a.env)
    tmp = Path(tempfile.mkdtemp(prefix="ringrepro-"))
    py = [sys.executable, "-X", "faulthandler"]
    pre = ["gdb", "-q", "-batch", "-ex", "set pagination off", "-ex", "handle SIGPIPE nostop noprint",
           "-ex", "run", "-ex", "bt 25", "-ex", "info threads", "--args"] if a.gdb else []
    crashes = cases_done = 0
    for i in range(a.launches):
        if a.mode == "cases":
            cmd = lambda r: pre + py + ["-m", "omlx_profiles.live.sharded", a.spec, str(tmp / f"out{i}-{r}.json")]
        else:
            cmd = lambda r: pre + py + ["-c", COLLECTIVES, str(a.iters), str(a.size)]
        t = time.monotonic()
        res = _launch(cmd, a.ranks, tmp, str(i), a.timeout, env_extra, a.core)
        wall = time.monotonic() - t
        n = None
        if a.mode == "cases":
            got = []
            for r in range(a.ranks):
                try:
                    got.append(len(json.loads((tmp / f"out{i}-{r}.json").read_text())["results"]))
                except (OSError, ValueError, KeyError):
                    got.append(0)
            n = min(got)
            cases_done += n
        bad = [(r, rc, _where(err)) for r, (rc, err, _) in enumerate(res)
               if rc != 0 or "SIGSEGV" in err or "Segmentation" in err]
        for r, rc, w in bad:
            if a.core and rc == -11:
                w["gdb"] = _core_bt(tmp, res[r][2])
        crashes += bool(bad)
        line = {"launch": i, "wall_s": round(wall, 1), "load": os.getloadavg()[0], "rcs": [x[0] for x in res],
                "cases_finished": n, "bad": [{"rank": r, "rc": rc, **w} for r, rc, w in bad],
                "env": env_extra, "mode": a.mode}
        print(json.dumps(line), flush=True)
        if a.jsonl:
            with open(a.jsonl, "a") as f:
                f.write(json.dumps(line) + "\n")
        if bad:
            for r, (rc, err, _) in enumerate(res):
                (tmp / f"err{i}-{r}.txt").write_text(err)
            print(f"stderr kept in {tmp}", flush=True)
    print(json.dumps({"launches": a.launches, "failed_launches": crashes, "cases_finished": cases_done}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
