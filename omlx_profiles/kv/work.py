"""A ceiling on the replay work one command may do, so every command finishes or refuses within seconds.

The peak model replays a prompt call by call (``calls_of``); a call costs 6-10 us whatever the depth (the
layers are grouped by type). One replay is bounded (``MAX_CALLS``), but a command may run many: ``chart``
replays each of its points, ``fit`` searches with ~25 replays, a sharded estimate one per rank. At
``--chunk 1`` a 160-point chart over 128k tokens was 107 s of CPU, ``fit --chunk 8`` 7 s: no single replay
was too long, their sum was. So the CLI gives each command a budget of calls (``work_limit``) and every
replay charges it (``charge``); past it the command stops with a sentence naming the chunk to raise.
The Python API sets no budget (an engine asks its own questions, one replay each, memoized).
"""
from __future__ import annotations

import contextlib
import contextvars
import signal
import threading
import time

from ..errors import InputError

#: Calls one CLI command may replay in all: ~3-5 s of CPU at 6-10 us a call. An ordinary command stays far
#: below it (a default chart replays ~5,000 calls; ``fit`` at --chunk 512 on a 1M-token model ~200,000).
COMMAND_CALLS = 500_000

_left: contextvars.ContextVar[tuple[list[int], ...]] = contextvars.ContextVar("omlx_profiles_work_left", default=())


class WorkExceeded(InputError):
    """A ``work_limit`` ran out; ``box`` is the one that did (an inner limit's owner absorbs it, an outer
    one's passes through)."""

    def __init__(self, message: str, box: list[int]):
        super().__init__(message)
        self.box = box


@contextlib.contextmanager
def work_limit(calls: int | None = None):
    """Within the block, replays may charge at most ``calls`` (default ``COMMAND_CALLS``) prefill calls. Nested
    limits all charge: an inner one (fit's search past the context) bounds a part of the command's work."""
    calls = COMMAND_CALLS if calls is None else calls
    box = [calls, calls]
    token = _left.set(_left.get() + (box,))
    try:
        yield box
    finally:
        _left.reset(token)


#: What one replayed call costs on a backend whose executor commits graphs (CUDA), in CPU-backend calls: the
#: replay and its monotone envelope walk the call's graph commits (``peak.executor.graph_ends``), ~2.6 ms a
#: call where a CPU / Metal call costs 6-10 us (llama-3.1-8b, chunk 1: 4,096 tokens 10.7 s of CPU on CUDA,
#: 0.4 s on CPU). Priced at 100, a command may replay ~5,000 CUDA calls (~13 s): ``--chunk 1`` past ~5k tokens
#: is refused before it starts (it ran until killed); the command deadline (``deadline``) bounds the rest.
GRAPH_CALL_COST = 100


def charge(calls: int, chunk: int, cost: int = 1) -> None:
    """Count ``calls`` replayed calls of ``chunk`` tokens, ``cost`` CPU-backend calls each, against every
    budget set (none set: nothing). Deterministic: the same request is refused on every machine."""
    boxes = _left.get()
    if not boxes:
        return
    for box in boxes:
        box[0] -= calls * cost
    for box in boxes:  # the outermost exhausted one speaks: the command's own budget wins over a part's
        if box[0] < 0:
            each = "" if cost == 1 else f"; a CUDA call counts as {GRAPH_CALL_COST}: it walks the call's graph commits"
            raise WorkExceeded(f"this command would replay more than {box[1]:,} prefill calls in all (prompts fed "
                               f"in chunks of {chunk:,} tokens{each}); use a larger --chunk (mlx-lm's default is "
                               "2048) or fewer tokens / points", box)


# -- CPU deadlines ------------------------------------------------------------------------------------
class OutOfTime(BaseException):
    """A ``deadline`` block ran past its CPU seconds. A ``BaseException``, so that no ``except Exception`` in the
    code it interrupts can swallow it; ``owner`` is the ``deadline`` that expired (an outer one passes through
    an inner ``except``)."""

    def __init__(self, owner: "Deadline"):
        super().__init__(f"more than {owner.seconds:g} s of CPU")
        self.owner = owner


class Deadline:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.process_time() + seconds
        self.expired = False


_deadlines: list[Deadline] = []
_saved_handler = None
#: a profiling timer someone else had armed when the first deadline began (a test harness's CPU limit): its
#: end (process time) and handler; it keeps its end under ours and gets its signal back afterwards
_foreign: tuple[float, object] | None = None


def _arm() -> None:
    ends = [d.end for d in _deadlines] + ([_foreign[0]] if _foreign else [])
    if not ends:
        signal.setitimer(signal.ITIMER_PROF, 0)
        return
    signal.setitimer(signal.ITIMER_PROF, max(min(ends) - time.process_time(), 0.001))


def _on_prof(signum, frame) -> None:
    now = time.process_time()
    global _foreign
    if _foreign is not None and _foreign[0] <= now + 0.002:
        fired, _foreign = _foreign, None  # it fires once, as it would have without us
        if callable(fired[1]):
            fired[1](signum, frame)  # the outer timer's own handler (it raises what its owner catches)
    due = [d for d in _deadlines if d.end <= now + 0.002]
    if not due:  # the interval timer and process_time differ by a tick: wait for the rest
        _arm()
        return
    first = due[0]  # the outermost expired one: its handler (an except further out) is where control goes
    first.expired = True
    # again soon, in case this one is lost: raised inside a weakref callback or a __del__ (the garbage
    # collector runs them anywhere) it is "unraisable", printed and dropped, and the command would run on
    signal.setitimer(signal.ITIMER_PROF, 0.05)
    raise OutOfTime(first)


@contextlib.contextmanager
def deadline(seconds: float | None):
    """Within the block, at most ``seconds`` of this process's CPU time (user + system: the answer does not
    depend on how loaded the machine is); past it ``OutOfTime`` is raised wherever the code is. Nested blocks
    each keep their own end. Only where signals can be used (the main thread of a POSIX process; elsewhere,
    or with ``seconds`` None / <= 0, no deadline). The CLI sets one per command (``cli.main``); ``fit`` a
    shorter one for the search past the model's context. Interrupted code may leave a cache half built: the
    caller discards what the block was computing."""
    usable = (seconds is not None and 0 < seconds < 1e7 and hasattr(signal, "setitimer")  # inf: setitimer overflows
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield None
        return
    global _saved_handler, _foreign
    d = Deadline(seconds)
    if not _deadlines:
        left, _ = signal.getitimer(signal.ITIMER_PROF)
        _saved_handler = signal.signal(signal.SIGPROF, _on_prof)
        _foreign = (time.process_time() + left, _saved_handler) if left > 0 else None
    _deadlines.append(d)
    try:
        _arm()
        yield d
    finally:
        _deadlines.remove(d)
        if _deadlines:
            _arm()
        else:
            foreign, _foreign = _foreign, None
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, _saved_handler if _saved_handler is not None else signal.SIG_DFL)
            if foreign is not None:  # give the outer timer back what is left of it
                signal.setitimer(signal.ITIMER_PROF, max(foreign[0] - time.process_time(), 0.001))


__all__ = ["COMMAND_CALLS", "GRAPH_CALL_COST", "Deadline", "OutOfTime", "WorkExceeded", "charge", "deadline",
           "work_limit"]
