"""Argument checks for the public API: integers only (a bool is not a count here), no negatives,
no NaN; a clear ``InputError`` (a ``ValueError``) naming the argument, never a silent 0."""
from __future__ import annotations

import math
import numbers

from ..errors import InputError

MAX_COUNT = 1 << 40  # a trillion tokens / a terabyte: anything larger is a typo, not a request


def check_count(name: str, value: object, *, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    if type(value) is int and minimum <= value <= maximum:  # the per-request common case, without ABC checks
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and math.isnan(value):
            raise InputError(f"{name} must be an integer, got NaN")
        raise InputError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if v < minimum:
        raise InputError(f"{name} must be >= {minimum}, got {v}")
    if v > maximum:
        raise InputError(f"{name} must be <= {maximum}, got {v}")
    return v


def check_flag(name: str, value: object) -> bool:
    """A yes/no argument (``nax``) is ``True`` or ``False``: ``"no"`` is truthy, and a list reached a memo key
    (``TypeError: unhashable type``); either was a wrong answer or an untyped error (hostile pass 6)."""
    if value is True or value is False:
        return value
    raise InputError(f"{name} must be True or False, got {type(value).__name__} {value!r:.40}")
