"""Errors the package raises. Every one carries a plain sentence naming *what* and *where*.

The CLI turns them into one-line messages and an exit code; nothing reaches the user as a traceback.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


class OmlxProfilesError(Exception):
    """Base class: an expected, explainable failure (bad input, unknown model, unsupported case)."""


@dataclass(frozen=True)
class Issue:
    """One problem found in a profile file: ``file:line``, the field path, and a sentence."""

    file: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{_printable(self.file)}:{self.line}" if self.line else _printable(self.file)
        field = f" {_printable(self.path)}:" if self.path else ""
        return f"{where}:{field} {_printable(self.message)}"


def _printable(text: str, limit: int = 500) -> str:
    """Escape control/bidi characters and cut very long text: messages go to a terminal."""
    out = "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in str(text))
    return out if len(out) <= limit else out[:limit] + f"... ({len(out) - limit} more characters)"


# C0/C1 controls (an ESC sequence repaints or hides text, a CR overwrites the line) and the bidi
# overrides/isolates (they reorder what the user reads). Newline and tab are how output is laid out.
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def quoted(value: object, limit: int = 80) -> str:
    """A value from the input, quoted in a message: its ``repr`` (quotes, escapes for control characters), cut to
    ``limit`` characters with ``...`` (a 1 MB string or a 100 KB tensor name must not fill the terminal). The one
    quoter of the readers (config.json, profile YAML, safetensors headers, quantization blocks)."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def terminal_safe(text: str) -> str:
    """``text`` with every character that could drive a terminal written as a visible escape (``\\x1b``).

    The CLI passes everything it prints through this (paths, shard names, ids and config values come
    from users and from files on disk), so one mechanism covers every message, not each call site."""
    return _TERMINAL_UNSAFE.sub(lambda m: repr(m.group())[1:-1], text)


class ProfileError(OmlxProfilesError):
    """A profile file (or a set of them) is invalid. ``issues`` lists every problem found."""

    def __init__(self, issues: list[Issue]):
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))


class UnknownModelError(OmlxProfilesError, LookupError):
    """No profile answers to this id. ``suggestions`` holds the closest known ids."""

    def __init__(self, query: str, suggestions: list[str], reason: str = ""):
        self.query = query
        self.suggestions = suggestions
        msg = f"unknown model {query!r}"
        if reason:
            msg += f": {reason}"
        if suggestions:
            msg += "; closest known ids: " + ", ".join(suggestions)
        super().__init__(msg)


class UnsupportedError(OmlxProfilesError):
    """The case is real but cannot be answered with a number (mlx-lm would crash, or it is not modelled).

    Reported as ``unsupported: <why>``, never replaced by a guess. The class owns that prefix: ``str(e)``
    always starts with it (a ``why`` that already does is taken as is, so older call sites keep working) and
    ``e.reason`` is the why alone, for a caller that adds where it happened (``UnsupportedError(f"{where}:
    {e.reason}")``) without stripping and re-adding the prefix.
    """

    PREFIX = "unsupported: "

    def __init__(self, why: object):
        why = str(why)
        self.reason = why[len(self.PREFIX):] if why.startswith(self.PREFIX) else why
        super().__init__(self.PREFIX + self.reason)


class InputError(OmlxProfilesError, ValueError):
    """An argument is out of range or of the wrong type (negative tokens, a bool, NaN, ...)."""


class NotMLXCheckpointError(UnknownModelError):
    """An id that names something mlx-lm cannot load (an Ollama tag, a GGUF quant type): ``what`` and ``why``.

    A ``LookupError`` like any unknown id (so a caller that falls back to a local path still does), but
    the message says what the id is and what to use instead, never "closest known ids".
    """

    def __init__(self, query: str, what: str, why: str):
        self.query, self.what, self.why, self.suggestions = query, what, why, []
        OmlxProfilesError.__init__(self, f"{query!r} is {what}, not an MLX checkpoint: {why}")


class HubError(OmlxProfilesError):
    """Reading a model from the Hugging Face Hub failed; the message names the repo and what to do."""


class HubAccessError(HubError):
    """401 / 403 / gated: the repo exists but this token (or none) may not read it."""


class HubNotFoundError(HubError, LookupError):
    """404: no such repo, revision or file."""


class HubUnavailableError(HubError):
    """No network, a timeout, ``HF_HUB_OFFLINE`` with nothing cached, or the hub extra not installed."""
