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

from ..errors import InputError

#: Calls one CLI command may replay in all: ~3-5 s of CPU at 6-10 us a call. An ordinary command stays far
#: below it (a default chart replays ~5,000 calls; ``fit`` at --chunk 512 on a 1M-token model ~200,000).
COMMAND_CALLS = 500_000

_left: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("omlx_profiles_work_left", default=None)


@contextlib.contextmanager
def work_limit(calls: int | None = None):
    """Within the block, replays may charge at most ``calls`` (default ``COMMAND_CALLS``) prefill calls."""
    calls = COMMAND_CALLS if calls is None else calls
    token = _left.set([calls, calls])
    try:
        yield
    finally:
        _left.reset(token)


def charge(calls: int, chunk: int) -> None:
    """Count ``calls`` replayed calls of ``chunk`` tokens against the budget (no budget set: nothing)."""
    box = _left.get()
    if box is None:
        return
    box[0] -= calls
    if box[0] < 0:
        raise InputError(f"this command would replay more than {box[1]:,} prefill calls in all (prompts fed in "
                         f"chunks of {chunk:,} tokens); use a larger --chunk (mlx-lm's default is 2048) or fewer "
                         "tokens / points")


__all__ = ["COMMAND_CALLS", "charge", "work_limit"]
