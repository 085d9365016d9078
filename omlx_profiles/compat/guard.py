"""oMLX's prefill guard: ``raise_if_prefill_exceeds`` and the errors the facade's callers catch.

Kept apart from the monitor because it is oMLX's *policy* around the estimate (whether a request may start,
and the sentence that says why not), not the estimate: the monitor answers "how many bytes", the guard
compares them with oMLX's ceiling and raises an error oMLX's server maps to HTTP 400.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import OmlxProfilesError
from ..units import format_bytes

if TYPE_CHECKING:
    from .monitor import MemoryMonitor

# the facade's one logger, named as the module oMLX swapped in (its log configuration names it)
logger = logging.getLogger(__package__)


class ModelInfoMissingError(OmlxProfilesError, RuntimeError):
    """Kept for callers that catch it; the facade no longer raises it (no model info is a logged no-op,
    as oMLX expects). The project's own API raises its own typed errors."""


class PrefillMemoryExceededError(OmlxProfilesError):
    """A prompt's prefill peak would pass the memory limit: ``message``, ``request_id``,
    ``estimated_bytes``, ``limit_bytes``. ``raise_if_prefill_exceeds`` raises a subclass that is also
    oMLX's ``omlx.exceptions.PrefillMemoryExceededError`` when that is importable."""

    def __init__(self, message: str, request_id: str | None = None, estimated_bytes: int = 0,
                 limit_bytes: int = 0, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.estimated_bytes = int(estimated_bytes)
        self.limit_bytes = int(limit_bytes)
        self.details = details or {}


_BOTH: dict[type, type] = {}


def prefill_error_class() -> type:
    """The class ``raise_if_prefill_exceeds`` raises: oMLX's ``PrefillMemoryExceededError`` and ours at
    once when ``omlx.exceptions`` is importable (oMLX's server maps its class to HTTP 400; anything else
    becomes a 500), else ours."""
    try:
        from omlx.exceptions import PrefillMemoryExceededError as theirs  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - not running inside oMLX (or an oMLX without the class)
        return PrefillMemoryExceededError
    if not isinstance(theirs, type) or not issubclass(theirs, BaseException):
        return PrefillMemoryExceededError
    if issubclass(theirs, PrefillMemoryExceededError):
        return theirs
    both = _BOTH.get(theirs)
    if both is None:
        def __init__(self, message, request_id=None, estimated_bytes=0, limit_bytes=0, details=None):
            try:
                theirs.__init__(self, message, request_id=request_id, estimated_bytes=estimated_bytes,
                                limit_bytes=limit_bytes)
            except TypeError:  # an oMLX whose class takes other arguments: the message is enough for it
                theirs.__init__(self, message)
            self.message = message
            self.request_id = request_id
            self.estimated_bytes = int(estimated_bytes)
            self.limit_bytes = int(limit_bytes)
            if details is not None or not hasattr(self, "details"):
                self.details = details or {}

        try:
            both = type("PrefillMemoryExceededError", (theirs, PrefillMemoryExceededError),
                        {"__init__": __init__, "__module__": __package__,
                         "__doc__": PrefillMemoryExceededError.__doc__})
        except TypeError:  # layouts that cannot be combined: oMLX's class is the one its server maps
            both = theirs
        _BOTH[theirs] = both
    return both



def _ceiling_words(current: int, **ceilings: Any) -> tuple[str, str]:
    """Which ceiling binds and what to change, from newer oMLX's helper when it is there."""
    try:
        from omlx.exceptions import describe_ceiling_binding  # type: ignore[import-not-found]

        return describe_ceiling_binding(static=ceilings.get("static_ceiling_bytes", 0),
                                        dynamic=ceilings.get("dynamic_ceiling_bytes", 0),
                                        metal_cap=ceilings.get("metal_cap_bytes", 0),
                                        tier=ceilings.get("memory_guard_tier", ""), current=current,
                                        fmt=format_bytes, tail="reduce context length")
    except Exception:  # noqa: BLE001 - an oMLX without it, or none at all
        return "", "free memory, or loosen memory_guard_tier (safe -> balanced -> aggressive)"


def raise_if_prefill_exceeds(monitor: MemoryMonitor | None, *, prefill_memory_guard: bool, hard_limit_bytes: int,
                             current_usage_bytes: int, prefill_step_size: int, num_prompt_tokens: int,
                             cached_tokens: int = 0, request_id: str | None = None, **ceilings: Any) -> None:
    """Raise ``PrefillMemoryExceededError`` (oMLX's class too, when importable) if ``current + prefill
    peak`` would pass ``hard_limit_bytes``.

    ``cached_tokens``: prompt KV already resident in ``current_usage_bytes`` (a paged prefix hit); a cache
    that re-allocates KV on a hit must pass 0. No-op when the guard is disabled, no limit is set, no
    monitor, or the monitor has no model info (logged: it cannot guard), as in oMLX. Newer oMLX's ceiling
    breakdown (``static_ceiling_bytes``, ``dynamic_ceiling_bytes``, ``metal_cap_bytes``,
    ``memory_guard_tier``) words the message when given. The message names the numbers and what to
    change: fewer tokens, a smaller prefill step, or more memory."""
    if not prefill_memory_guard or hard_limit_bytes <= 0 or monitor is None:
        return
    new_tokens = max(int(num_prompt_tokens) - max(int(cached_tokens), 0), 0)
    if new_tokens == 0:
        return
    cached = max(int(cached_tokens), 0)
    peak = int(monitor.estimate_prefill_peak_bytes(new_tokens, prefill_step_size, cached_tokens=cached))
    if peak <= 0:
        return  # no model info: logged by the monitor
    current = max(0, int(current_usage_bytes))
    if current + peak <= hard_limit_bytes:
        return
    over = current + peak - hard_limit_bytes
    smaller = ""
    if prefill_step_size > 256:
        half = max(256, prefill_step_size // 2)
        try:
            alt = int(monitor.estimate_prefill_peak_bytes(new_tokens, half, cached_tokens=cached))
            if current + alt <= hard_limit_bytes:
                smaller = f"; a prefill step of {half} would fit (peak {format_bytes(alt)})"
        except (OmlxProfilesError, ValueError):
            pass
    binding, advice = _ceiling_words(current, **ceilings)
    message = (f"Prefill would require ~{format_bytes(current + peak)} peak (current {format_bytes(current)} + "
               f"KV+SDPA and activations {format_bytes(peak)} for {new_tokens} new tokens, {cached} cached) but "
               f"{binding + ' ' if binding else ''}ceiling is {format_bytes(hard_limit_bytes)}, over by "
               f"{format_bytes(over)} (usage {current / 1024**3:.1f} GB, ceiling {hard_limit_bytes / 1024**3:.1f} GB)."
               f" Shorten the prompt, lower prefill_step_size (now {prefill_step_size}){smaller}, or {advice}.")
    if not request_id:
        import uuid

        request_id = f"preflight-{uuid.uuid4().hex[:8]}"
    logger.warning("Preflight rejected (%d tokens, cached=%d, request_id=%s): %s",
                   num_prompt_tokens, cached_tokens, request_id, message)
    raise prefill_error_class()(message=message, request_id=request_id, estimated_bytes=current + peak,
                                limit_bytes=int(hard_limit_bytes))
