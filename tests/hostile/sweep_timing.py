"""Resource bounds (#18, session 8): time every CLI command on every registry model x backend.

``python -m tests.hostile.sweep_timing [--models a,b] [--backends cpu,metal,cuda] [--out f.jsonl] [--all] [--no-once]``
runs, in-process under a CPU-time limit (``CASE_CPU``) with the catch-all spy of ``sweep_fourth``:

* per model x backend: ``estimate`` at 32k and at the model's max_context; ``fit`` at 192GiB and at
  1PiB (the search reaches past max_context);
* per model, on one backend in turn (every backend with ``--all``): ``chart`` (SVG), ``estimate`` at
  max_context and ``fit`` with ``--chunk 1``; sharded ``estimate`` / ``fit`` at 2, 8 and 64 ranks,
  tensor and pipeline;
* once: ``validate`` (the registry), ``coverage``, ``extract`` of every real config in tests/configs.

Each case prints ``cpu_s exit argv``; ``SLOW`` marks anything over ``SLOW_CPU`` CPU seconds that was
answered rather than refused, ``HANG`` anything killed at ``CASE_CPU``. It is not a test (an hour of
CPU on 2 cores); tests/test_hostile_fifth.py keeps a generated sample of it.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tests.hostile.sweep_fourth import CONFIGS, judge, run

CASE_CPU = 30.0
SLOW_CPU = 3.0
BACKENDS = ("cpu", "metal", "cuda")


def model_cases(name: str, backend: str, max_ctx: int | None, root: Path, heavy: bool):
    """The cheap cases on every backend; the heavy ones (chart, sharded, --chunk 1) when ``heavy``."""
    b = ["--backend", backend]
    top = str(max_ctx or 131072)
    svg = str(root / f"{name}-{backend}.svg")
    cases = [
        ["estimate", name, "--tokens", "32k", *b],
        ["estimate", name, "--tokens", top, *b],
        ["fit", name, "--budget", "192GiB", *b],
        ["fit", name, "--budget", "1PiB", *b],
    ]
    if heavy:
        cases += [
            ["chart", name, "-o", svg, "--force", "--budget", "192GiB", *b],
            ["estimate", name, "--tokens", top, "--chunk", "1", *b],
            ["fit", name, "--budget", "192GiB", "--chunk", "1", *b],
            ["estimate", name, "--tokens", "32k", "--ranks", "2", "--parallel", "tensor", *b],
            ["fit", name, "--budget", "64GiB", "--ranks", "8", "--parallel", "tensor", *b],
            ["fit", name, "--budget", "96GiB", "--ranks", "2", "--parallel", "pipeline", *b],
            ["estimate", name, "--tokens", top, "--ranks", "64", "--parallel", "pipeline", *b],
            ["estimate", name, "--tokens", "32k", "--ranks", "64", "--parallel", "tensor", *b],
            ["fit", name, "--budget", "1PiB", "--ranks", "64", "--parallel", "pipeline", *b],
        ]
    return cases


def once_cases(root: Path):
    cases = [["validate"], ["coverage"], ["coverage", "--json"], ["schema"], ["resolve", "qwen3-8b", "--explain"]]
    for c in sorted(CONFIGS.glob("*.json")):
        cases.append(["extract", str(c)])
        cases.append(["extract", str(c), "--json"])
    return cases


def main(argv: list[str]) -> int:
    import argparse

    from omlx_profiles.registry.index import load_registry

    ap = argparse.ArgumentParser()
    ap.add_argument("--models")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--out")
    ap.add_argument("--all", action="store_true", help="heavy cases on every backend, not one per model")
    ap.add_argument("--no-once", action="store_true")
    a = ap.parse_args(argv)
    reg = load_registry()
    names = a.models.split(",") if a.models else list(reg.profiles)
    dump = open(a.out, "a") if a.out else None
    slow = bad_n = n = 0
    worst: list[tuple[float, list[str]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases = [] if a.no_once else once_cases(root)
        backends = a.backends.split(",")
        for i, name in enumerate(names):
            mc = reg.profiles[name].max_context if name in reg.profiles else None
            for j, backend in enumerate(backends):
                # heavy cases: every backend with --all, else one backend per model, in turn
                cases += model_cases(name, backend, mc, root, a.all or (i % len(backends)) == j)
        for argv_ in cases:
            res = run(argv_, cpu=CASE_CPU)
            code, out, err, cpu, hit, timed_out = res
            bad = [b for b in judge(argv_, res) if not b.startswith("SLOW")]
            n += 1
            if timed_out:
                bad.append(f"HANG >{CASE_CPU}s")
            if cpu > SLOW_CPU and code == 0 or cpu > SLOW_CPU and "error" not in err and "unsupported" not in err:
                bad.append(f"SLOW {cpu:.1f}s")
                slow += 1
            bad_n += bool(bad)
            worst.append((cpu, argv_))
            line = f"{cpu:7.2f} {code!s:>4} {' '.join(argv_)}"
            if bad:
                line += f"   <-- {'; '.join(bad)} | {err.strip()[:200]!r}"
            elif code not in (0, 1):
                line += f"   [{err.strip()[:160]}]"
            print(line, flush=True)
            if dump:
                dump.write(json.dumps({"argv": argv_, "code": code if not isinstance(code, str) else str(code),
                                       "cpu": round(cpu, 3), "bad": bad, "err": err[:300]}) + "\n")
                dump.flush()
    worst.sort(reverse=True)
    print(f"== {n} cases, {bad_n} misbehaving, {slow} slow (> {SLOW_CPU} s CPU answered)")
    for cpu, argv_ in worst[:15]:
        print(f"   {cpu:6.2f} s  {' '.join(argv_)}")
    return 1 if bad_n else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
