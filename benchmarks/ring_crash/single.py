"""Control for ring_repro.py: the same cases (lazy load from disk, shard, evaluate, prefill) in ONE process with a
singleton group (no ring, no sockets), ``--rounds`` times over.  ``python -X faulthandler benchmarks/ring_crash/single.py
SPEC.json --rounds 3``: prints one line per case; a crash ends the process (faulthandler's stack on stderr)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import mlx.core as mx

    from omlx_profiles.live.sharded import run_case

    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    mx.set_default_device(mx.cpu)
    group = mx.distributed.init()  # no hostfile: a group of one
    cases = json.loads(Path(a.spec).read_text())["cases"]
    n, t = 0, time.monotonic()
    for r in range(a.rounds):
        for c in cases:
            print(f"case {r} {c['name']}", file=sys.stderr, flush=True)
            run_case(dict(c, split=None), group)  # a group of one: no explicit two-way split
            n += 1
    print(json.dumps({"cases": n, "size": group.size(), "wall_s": round(time.monotonic() - t, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
