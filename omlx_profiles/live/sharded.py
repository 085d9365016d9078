"""One rank of a sharded mlx-lm model, measured: ``python -m omlx_profiles.live.sharded SPEC.json OUT.json``.

Why a separate process per rank: ``mx.distributed`` gives one group per process, and MLX's ring backend
connects processes over TCP (here loopback only). The launcher (``tests/test_sharded_live.py``, or
``mlx.launch --backend ring``) sets ``MLX_RANK`` and ``MLX_HOSTFILE``; every rank runs the same cases in
the same order, because every collective (``all_sum``, ``send`` / ``recv``, ``all_gather``) must be
matched by the other ranks.

Per case the rank does what ``mlx_lm.utils.sharded_load`` does to a local model directory: load it
lazily, ``model.shard(group)`` (tensor) or ``model.model.pipeline(group)`` (pipeline), evaluate the
parameters (only the rank's share is ever materialized), then prefill a prompt exactly as
``generate_step`` does (``live.peak.measure_prefill_peak``). It reports its weight bytes (sum of
``nbytes`` of its parameters), its cache bytes (``sum(c.nbytes for c in cache)``) and its peak over the
baseline (``mx.get_peak_memory()``), per call.
"""
from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def _stage(what: str) -> None:
    # stderr's tail is what the launcher shows when a rank fails: it names the case and the step
    print(what, file=sys.stderr, flush=True)


def run_case(case: dict, group) -> dict:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    from .build import load_local
    from .measure import measure_prefill_peak

    model, _ = load_local(case["path"], lazy=True)
    _stage("loaded")
    if case["parallel"] == "tensor":
        model.shard(group)
    else:
        split = case.get("split")
        if split:
            model.model.pipeline(group, split)
        else:
            model.model.pipeline(group)
    _stage("sharded")
    mx.eval(model.parameters())
    _stage("evaluated")
    inner = getattr(model, "model", None)
    layers = [int(getattr(inner, "start_idx", 0) or 0), int(getattr(inner, "end_idx", None) or len(model.layers))]
    weights = sum(p.nbytes for _, p in tree_flatten(model.parameters()))
    best = None
    for _ in range(case.get("repeats", 1)):
        r = measure_prefill_peak(model, case["tokens"], case["chunk"])
        rows = [row["peak_over_baseline"] for row in r["rows"]]
        best = rows if best is None else [max(a, b) for a, b in zip(best, rows)]
    out = {"name": case["name"], "rank": group.rank(), "size": group.size(), "weights_nbytes": int(weights), "layers": layers,
           "cache_nbytes": r["cache_nbytes"], "peak_over_baseline": max(best), "call_peaks": best,
           "q_lens": [row["q_len"] for row in r["rows"]]}
    del model
    gc.collect()
    mx.clear_cache()
    return out


ATTEMPTS = 3


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _launch_once(spec_path: Path, tmp: Path, attempt: int, ranks: int, timeout_s: float) -> list[dict]:
    ports = _free_ports(ranks)
    hostfile = tmp / f"hosts-{attempt}.json"
    hostfile.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in ports]))
    procs, outs = [], []
    for r in range(ranks):
        out = tmp / f"rank{r}-{attempt}.json"
        outs.append(out)
        env = dict(os.environ, MLX_RANK=str(r), MLX_HOSTFILE=str(hostfile), MLX_WORLD_SIZE=str(ranks))
        # -X faulthandler: a rank that segfaults prints its Python stacks, so a failed launch's stderr tail says
        # which case and step it died in (benchmarks/ring_crash/ finds the native frame with a core file)
        procs.append(subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "omlx_profiles.live.sharded",
                                       str(spec_path), str(out)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + timeout_s
    errs = []
    try:
        for p in procs:
            try:
                _, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                err = f"timed out after {timeout_s} s\n{err}"
            # the surviving rank repeats "[ring] Sending to socket N failed" hundreds of times: keep what says more
            err = "\n".join(x for x in err.splitlines() if not x.startswith("[ring] Sending to socket"))
            errs.append((p.returncode, err[-3000:]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(rc != 0 for rc, _ in errs):
        raise _LaunchFailed("rank processes failed: " + " | ".join(f"rc={rc}: {e}" for rc, e in errs),
                            _finished_by_all(outs))
    return [json.loads(o.read_text()) for o in outs]


class _LaunchFailed(RuntimeError):
    """A launch whose rank died; ``done`` holds, per rank, the results of the cases every rank finished."""

    def __init__(self, message: str, done: list[list[dict]]):
        super().__init__(message)
        self.done = done


def _finished_by_all(outs: list[Path]) -> list[list[dict]]:
    """Per rank, the results of the leading cases that every rank wrote before the launch failed."""
    got = []
    for o in outs:
        try:
            got.append(json.loads(o.read_text())["results"])
        except (OSError, ValueError, KeyError):
            got.append([])
    n = min(len(g) for g in got) if got else 0
    return [g[:n] for g in got]


def launch_ring(spec_path: Path, tmp: Path, *, ranks: int = 2, timeout_s: float = 300) -> dict[int, dict[str, dict]]:
    """Run ``spec_path``'s cases on ``ranks`` processes over loopback, as ``mlx.launch --backend ring -n N``
    would on one host (a hostfile of free loopback ports, ``MLX_RANK`` / ``MLX_HOSTFILE`` per process).
    Launches on fresh ports until every case is done, giving up after ``ATTEMPTS`` failed launches in a row that
    finished no case (a failed launch resumes after the cases every rank finished): a port can be taken between
    picking and binding, and on MLX
    0.32.x's CPU ring a rank process sometimes dies with SIGSEGV during a case (session 11: about 1
    launch in 5 under load average 8-15, at varying cases, tensor and pipeline; each case alone passes; the peer
    then reports "[ring] connection to a peer was lost"; session 13, benchmarks/ring_crash/: the crashing thread is
    MLX's CPU stream thread in a ``gather`` reading an unmapped heap address, during the last token's eval). Returns ``{rank: {case name: result}}``; the last
    failure is raised with every attempt's rank stderr tails."""
    errors = []
    spec = json.loads(Path(spec_path).read_text())
    todo = list(spec["cases"])
    done: dict[int, dict[str, dict]] = {r: {} for r in range(ranks)}
    attempt = failures = 0
    while failures < ATTEMPTS:
        # a failed launch is resumed after the cases every rank finished (each case loads its own model and
        # measures from its own baseline, so a case run in a fresh launch is the same measurement): a crash late
        # in a 45-case launch then costs one case, not the launch (run 1 of session 12's fresh clone: 3 crashes)
        part = tmp / f"spec-{attempt}.json"
        part.write_text(json.dumps(dict(spec, cases=todo)))
        try:
            got = _launch_once(part, tmp, attempt, ranks, timeout_s)
            for r in got:
                done[r["rank"]].update({x["name"]: x for x in r["results"]})
            return done
        except _LaunchFailed as e:
            errors.append(f"attempt {attempt}: {e}")
            for r, results in enumerate(e.done):
                done[r].update({x["name"]: x for x in results})
            n = len(e.done[0]) if e.done else 0
            failures = 0 if n else failures + 1  # ATTEMPTS launches in a row with no case finished: give up
            todo = todo[n:]
        except RuntimeError as e:
            errors.append(f"attempt {attempt}: {e}")
            failures += 1
        attempt += 1
    raise RuntimeError("\n".join(errors))


def main(argv: list[str]) -> int:
    import mlx.core as mx

    spec = json.loads(Path(argv[0]).read_text())
    mx.set_default_device(mx.cpu)
    group = mx.distributed.init(backend="ring", strict=True)
    _stage("ring up")
    t0 = time.monotonic()
    results = []
    out = Path(argv[1])
    for c in spec["cases"]:
        _stage(f"case {c['name']}")
        results.append(run_case(c, group))
        # written after every case (replace, not append: a crash leaves the last whole file), so that a launch
        # whose rank dies later resumes after the cases every rank finished (``launch_ring``)
        part = out.with_suffix(".part")
        part.write_text(json.dumps({"rank": group.rank(), "size": group.size(),
                                    "seconds": time.monotonic() - t0, "results": results}))
        os.replace(part, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
