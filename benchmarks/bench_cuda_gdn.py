#!/usr/bin/env python3
"""CPU seconds of the CUDA CLI commands that were slow for recurrent (gated-DeltaNet / conv / SSM) models (issue 18,
"every command finishes or refuses within seconds"; session 12's sweep: GDN charts 6.6-14.6 s, fits 3.5-6 s,
after-prefix estimates 4-5 s).

Each command runs in a FRESH process (as a user runs it: imports and every table cold), and the row is that
process's user + system CPU seconds (``resource.getrusage(RUSAGE_CHILDREN)``), not wall time: the box this was
written on has 2 cores shared by several processes, where wall time means nothing. ``--repeat N`` runs each command
N times and reports the minimum (the least disturbed by the load) and the maximum.

Usage: ``python benchmarks/bench_cuda_gdn.py [--repeat N] [--only SUBSTR] [--json]``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from omlx_profiles.cli.main import main; sys.exit(main())"

CU = ["--backend", "cuda"]
CHART = ["-o", "{tmp}/x.svg", "--force", "--budget", "192GiB"]
COMMANDS = [
    ["chart", "qwen3.5-27b", *CHART, *CU],
    ["chart", "qwen3.5-35b-a3b", *CHART, *CU],
    ["chart", "qwen3.5-397b-a17b", *CHART, *CU],
    ["chart", "qwen3.5-9b", *CHART, *CU],
    ["chart", "qwen3-next-80b-a3b-thinking", *CHART, *CU],
    ["chart", "lfm2-1.2b", *CHART, "--weights", "2.4GB", *CU],
    ["chart", "nemotron-3-nano-30b-a3b", *CHART, *CU],
    ["fit", "qwen3.5-27b", "--budget", "192GiB", *CU],
    ["fit", "qwen3.5-27b", "--budget", "1PiB", *CU],
    ["fit", "qwen3-next-80b-a3b-thinking", "--budget", "192GiB", *CU],
    ["fit", "qwen3.5-27b", "--budget", "96GiB", "--ranks", "2", "--parallel", "pipeline", *CU],
    ["fit", "qwen3.5-35b-a3b", "--budget", "192GiB", "--chunk", "1", *CU],
    ["estimate", "qwen3.5-27b", "--tokens", "32k", *CU],
    ["estimate", "qwen3.5-27b", "--tokens", "262144", *CU],
    ["estimate", "qwen3.5-35b-a3b", "--tokens", "30000", "--cached", "20000", *CU],
    ["estimate", "qwen3.5-35b-a3b", "--tokens", "110000", "--cached", "100000", *CU],
    ["estimate", "qwen3.5-35b-a3b", "--tokens", "4900", "--chunk", "1", *CU],
]


def cpu_of(argv: list[str], root: Path = ROOT) -> tuple[float, int, str]:
    """(user + system CPU seconds, exit code, its output) of one fresh CLI process (the package of ``root``; the CLI's
    own CPU deadline lifted, so a slow command is timed, not stopped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(root), OMLX_PROFILES_CPU_SECONDS="0")
    p = subprocess.run([sys.executable, "-c", CLI, *argv], cwd=root, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, p.returncode, p.stdout + p.stderr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--base", type=Path, default=None,
                    help="another checkout (e.g. `git archive main`) run before each command, in turn: before / after "
                         "under the same load")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for cmd in COMMANDS:
            argv = [x.replace("{tmp}", tmp) for x in cmd]
            label = " ".join(x for x in cmd if "{tmp}" not in x and x not in ("-o", "--force"))
            if a.only and a.only not in label:
                continue
            base, runs = [], []
            for _ in range(a.repeat):
                if a.base is not None:
                    base.append(cpu_of(argv, a.base))
                runs.append(cpu_of(argv))
            cpus = [r[0] for r in runs]
            row = {"command": label, "cpu_min": round(min(cpus), 2), "cpu_max": round(max(cpus), 2),
                   "exit": runs[-1][1], "out": (runs[-1][2].strip().splitlines() or [""])[-1][:100]}
            if base:
                row["base_min"] = round(min(r[0] for r in base), 2)
                row["same_output"] = all(r[1:] == runs[-1][1:] for r in base + runs)
            rows.append(row)
            if not a.json:
                r = rows[-1]
                b = f"base {r['base_min']:6.2f}  same={r['same_output']!s:5}  " if base else ""
                print(f"{b}{r['cpu_min']:6.2f} {r['cpu_max']:6.2f}  rc={r['exit']}  {label}", flush=True)
    if a.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
