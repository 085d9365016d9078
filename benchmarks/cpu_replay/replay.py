"""Replay MLX's CPU executor from a ``gdb_record.py`` recording: the live bytes of one prefill call for the host's
run-ahead, and what they are made of.

MLX's CPU executor (mlx 0.32.4: transforms.cpp eval_impl, backend/cpu/encoder.h, eval.cpp): the host thread
evaluates the tape op by op, allocating each op's output in ``eval_cpu`` and dispatching its work plus one release
lambda that holds the op's inputs (``cpu::eval``) to the stream's worker; every 10th dispatch of the stream ends a
task, and after an op the host waits while more than 10 tasks are pending (``MAX_ACTIVE_TASKS``). With a worker
that stays behind (the measured case at these shapes: the peaks are byte-identical pinned to one core,
benchmarks/notes/session11/s11-band.md), when the host allocates the op whose first dispatch is ``g`` the worker has
run the first ``g - W`` dispatches. A buffer is freed when its last holder goes: on the worker after a release, or on
the host. So the live bytes at that op = every host-side change up to it + every worker-side change after the
releases already run. ``W`` = 113 (default) reproduces the two measured peaks checked (session 12, mlx 0.32.4 CPU):
the tiny qwen2 of tests/test_sharded_live.py, call 3 of 513/128 tokens, 3,837,408 B replayed vs 3,836,960 measured
(+448 B), and tests/test_peak_live.py's hd256 call 4 of 1281/256, 13,446,544 vs 13,446,704 (-160 B); 110-115 read
the same for both. (MLX's task rule taken literally, ``10 * (floor(g / 10) - 10)`` dispatches run, leaves 107-109
in flight and reads 65 KB / 790 KB low: the worker is further behind than that by about one task.)

Output: the call's peak over its start (what ``live.measure`` reports as the call's peak over the baseline, less
what the call's start held), where it is, and the bytes alive there: carried from before the window, and allocated
per op inside it.
"""
import argparse
import json


def load(path):
    ev = json.load(open(path))
    marks = [e for e in ev if e[0] == "MARK"]
    disp, rel_pos, host, work = [], [], [], []
    for e in ev:
        if e[0] == "D":
            disp.append(e[2])
            if e[2] == "R":
                rel_pos.append(e[1])
    for e in ev:
        if e[0] == "M":
            _, thread, delta, d, r = e
            if thread == 1:  # the main (host) thread
                host.append((d, delta))
            else:
                work.append((rel_pos[r - 1] if r > 0 else -1, delta))
    return disp, host, work, marks


def ops_of(disp):
    """(first dispatch, release dispatch, work names) per op, in tape order."""
    out, start = [], 0
    for i, k in enumerate(disp):
        if k == "R":
            out.append((start, i, disp[start:i]))
            start = i + 1
    return out


def replay(disp, host, work, lo, hi, window=113):
    """(peak over the live bytes at dispatch ``lo``, op index at the peak, worker progress there) for the ops whose
    first dispatch is in [lo, hi)."""
    n = len(disp) + 1
    hd, wd = [0] * (n + 1), [0] * (n + 1)
    for d, x in host:
        hd[min(d, n)] += x
    for p, x in work:
        wd[max(p, 0)] += x
    ch, cw = [0] * (n + 1), [0] * (n + 1)
    a = b = 0
    for i in range(n + 1):
        a += hd[i]; b += wd[i]
        ch[i], cw[i] = a, b

    def done(g):  # dispatches the worker has run when the host starts the op whose first dispatch is g
        return max(0, g - window)

    def live(g):
        k = done(g)
        return ch[g] + (cw[k - 1] if k > 0 else 0)

    base = ch[lo] + (cw[lo - 1] if lo > 0 else 0)  # the worker is idle at the call's start (run_call.py)
    best, at = None, lo
    for s, r, _ in ops_of(disp):
        if lo <= s < hi:
            v = live(s)
            if best is None or v > best:
                best, at = v, s
    return best - base, at, done(at)


def composition(disp, host, work, at, done):
    """Bytes allocated per op between the worker's position and the peak, and the carried rest."""
    rows = []
    for s, r, names in ops_of(disp):
        if done <= s <= at:
            a = sum(x for d, x in host if s <= d <= r and x > 0 and d <= at)
            if a:
                rows.append((s, "+".join(names) or "view", a))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("events")
    ap.add_argument("--window", type=int, default=113, help="dispatches in flight (issued, not run by the worker)")
    ap.add_argument("--show", action="store_true", help="list the ops allocating inside the window at the peak")
    a = ap.parse_args()
    disp, host, work, marks = load(a.events)
    lo, hi = marks[1][1], marks[2][1]
    peak, at, done = replay(disp, host, work, lo, hi, a.window)
    print(f"call dispatches {hi - lo} (stream {lo}..{hi}); peak over the call's start {peak} at dispatch {at} "
          f"({disp[at]}), worker at {done} ({at - done} dispatches in flight)")
    if a.show:
        rows = composition(disp, host, work, at, done)
        for s, name, b in rows:
            print(f"  {s:6d} {name[:50]:50s} {b:10d}")
        print(f"  allocated in the window {sum(b for _, _, b in rows)}")


if __name__ == "__main__":
    main()
