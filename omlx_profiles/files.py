"""Input files as found on disk: what is there, said plainly, never skipped and never blocked on.

Every reader of a user's files (config.json, ``model*.safetensors``, the index, profile YAML) asks
here first, so one rule holds everywhere:

* nothing there at all -> ``None`` (the caller decides whether that is an error);
* something there that is not a regular file -- a FIFO (``open`` would wait forever for a writer), a
  device (``/dev/zero`` never ends), a directory, a socket, a symbolic link to nothing -> an
  ``InputError`` naming the path and what it is, instead of the silent "no config.json" or a
  shard quietly left out of an "exact" sum;
* a directory listing that cannot be read -> an ``InputError`` (``pathlib.Path.glob`` would return
  nothing on a permission error, and an unreadable ``--profiles`` directory would look empty).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import InputError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def user_path(path: str | os.PathLike, what: str = "path") -> Path:
    """A path the user typed, as a ``Path``: ``~`` and ``~user`` expanded the way a shell does it.

    Every command reads its path arguments through here. ``pathlib.Path.expanduser`` raises
    ``RuntimeError`` for ``~nosuchuser/x`` (a traceback behind "internal error"); a shell leaves such a
    word as it is, and so does this. An embedded NUL cannot name a file on any system: an ``InputError``.
    """
    if not isinstance(path, (str, bytes, os.PathLike)):  # the API's typed error, not os.fspath's TypeError
        raise InputError(f"{what} must be a path (str or os.PathLike), got {type(path).__name__} {path!r:.40}")
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\x00" in text:
        raise InputError(f"{what} {shown_path(text)}: contains a NUL character; not a usable path")
    if not text.strip():
        raise InputError(f"{what}: empty path (Path('') is the current directory, which nobody meant)")
    return Path(os.path.expanduser(text))


def shown_path(path: str | os.PathLike, limit: int | None = None) -> str:
    """``path`` as text that can be encoded, printed and written into a YAML or JSON file.

    A file name is bytes: one that is not UTF-8 reaches Python as lone surrogates (``\\udcff``), which no
    encoder accepts (extract's YAML failed on it). Those bytes are written as ``\\xff``; control
    characters (a newline in a directory name would end a YAML comment and start a key) as escapes too.
    ``limit``: at most about that many characters, the middle cut (``a/b/.../file.yaml``: both ends say which
    file), for a path quoted in an issue line."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return s if limit is None or len(s) <= limit else s[: limit // 2] + "..." + s[-limit // 2:]


def kind_of(st: os.stat_result) -> str:
    for test, name in _KINDS:
        if test(st.st_mode):
            return name
    return "not a regular file"


def regular_file(path: str | os.PathLike, what: str = "file") -> Path | None:
    """``path`` if it is a regular file (symbolic links followed); ``None`` if nothing is there."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        try:
            target = os.readlink(p)
        except OSError:
            return None
        raise InputError(f"{p}: {what} is a symbolic link to {target}, which does not exist") from None
    except NotADirectoryError:
        return None
    except OSError as e:
        raise InputError(f"{p}: cannot read the {what} ({e.strerror or e})") from None
    except ValueError as e:  # an embedded NUL
        raise InputError(f"{p}: not a usable path ({e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p}: {what} is {kind_of(st)}, not a regular file")
    return p


def list_dir(directory: str | os.PathLike, what: str = "directory") -> list[Path]:
    """Every entry of ``directory`` (sorted); an unreadable directory is an ``InputError``, not ``[]``."""
    d = Path(directory)
    try:
        with os.scandir(d) as it:
            return sorted(d / e.name for e in it)
    except OSError as e:
        raise InputError(f"{d}: cannot read the {what} ({e.strerror or e})") from None
    except ValueError as e:
        raise InputError(f"{d}: not a usable path ({e})") from None


def matching(directory: str | os.PathLike, predicate, what: str = "directory") -> list[Path]:
    """Entries of ``directory`` whose *name* satisfies ``predicate``, whatever they are on disk (the
    caller passes each through ``regular_file`` so a FIFO or a dangling link is reported, not dropped)."""
    return [p for p in list_dir(directory, what) if predicate(p.name)]


YAML_SUFFIXES = (".yaml", ".yml")


def yaml_files(directory: str | os.PathLike, what: str = "profiles directory") -> list[Path]:
    """Profile files of a directory: every ``*.yaml`` / ``*.yml`` in any letter case (``Qwen.YAML`` is a
    profile file its author meant to load), directories excluded; FIFOs and dangling links included so
    the YAML reader reports them."""
    out = []
    for p in matching(directory, lambda n: n.lower().endswith(YAML_SUFFIXES), what):
        try:
            if p.is_dir():
                continue
        except OSError:
            pass
        out.append(p)
    return out
