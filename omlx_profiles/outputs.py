"""Writing a file the user named (``chart -o``, ``extract --write``, ``calibrate --out``, ``schema --write``).

One mechanism for every command, so they all refuse the same things with the same sentence:

* a name that cannot be what is asked for: empty, a directory, an extension the writer cannot produce
  (``chart -o mem.txt``; ``chart -o mem`` would make the writer pick ``mem.png`` behind the user's back);
* a symbolic link (writing through it changes a file somewhere else) or anything that is not a regular
  file (``/dev/full``, a FIFO: a "wrote" line for bytes nobody stored);
* an existing file, unless the command replaces on purpose (``--force``, or regenerated files such as
  ``schema --write``);
* a missing parent directory (nothing here creates directories).

A new file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: two processes writing the same name at
once cannot both succeed (the loser is told the file exists). A replacement is written to a temporary
file in the same directory and renamed over the old one, so a reader never sees half a file. Every
failure is an ``InputError`` naming the path; no partial file is left behind.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import InputError
from .files import user_path


def check_output(path: str | os.PathLike, *, suffixes: tuple[str, ...] = (), replace: bool = False,
                 what: str = "output file") -> Path:
    """Refuse a destination that cannot be written as asked (see the module docstring); returns it."""
    text = os.fspath(path)
    if not text or not text.strip():
        raise InputError(f"{what}: empty file name")
    dest = user_path(text, what)
    if text.endswith(("/", os.sep)):
        raise InputError(f"{dest}: names a directory; give a file name")
    if suffixes and dest.suffix.lower() not in suffixes:
        got = f"extension {dest.suffix!r}" if dest.suffix else "no extension"
        raise InputError(f"{dest}: {what} has {got}; use one of {', '.join(suffixes)}")
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputError(f"{dest}: cannot check the {what} ({e.strerror or e})") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"{dest}: is a symbolic link; refusing to write through it")
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{dest}: is a directory; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{dest}: is not a regular file (a device, FIFO or socket); refusing to write to it")
        if not replace:
            raise InputError(f"{dest}: already exists; pass --force to replace it")
    parent = dest.parent
    if not parent.is_dir():
        raise InputError(f"{dest}: cannot write: {parent} is no such directory (nothing here creates directories)")
    return dest


def write_output(path: str | os.PathLike, data: bytes | str, *, suffixes: tuple[str, ...] = (),
                 replace: bool = False, what: str = "output file") -> Path:
    """Write ``data`` to ``path`` after ``check_output``: exclusive create, or an atomic replace."""
    dest = check_output(path, suffixes=suffixes, replace=replace, what=what)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if replace:
        _replace(dest, raw)
    else:
        _create(dest, raw)
    return dest


def _create(dest: Path, raw: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(dest, flags, 0o666)
    except FileExistsError:
        raise InputError(f"{dest}: already exists (created meanwhile?); pass --force to replace it") from None
    except OSError as e:
        raise InputError(f"{dest}: cannot create ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
    except OSError as e:
        try:
            os.unlink(dest)
        except OSError:
            pass
        raise InputError(f"{dest}: cannot write ({e.strerror or e})") from None


def _replace(dest: Path, raw: bytes) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as e:
        raise InputError(f"{dest.parent}: cannot write there ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600; these are ordinary files
        os.replace(tmp, dest)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise InputError(f"{dest}: cannot write ({e.strerror or e})") from None
