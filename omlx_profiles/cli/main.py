"""``omlx-profiles``: entry point. Exit codes: 0 ok, 1 does not fit / invalid profile, 2 usage or input error.

Every expected failure is printed as one ``error: ...`` line (or one line per profile issue); a
traceback only ever appears with ``OMLX_PROFILES_DEBUG=1``.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from .. import __version__
from ..errors import InputError, OmlxProfilesError, ProfileError, UnknownModelError, UnsupportedError, terminal_safe

# Each name is a module cmd_<name>.py exposing register(subparsers).
COMMANDS = ("estimate", "fit", "chart", "resolve", "validate", "extract", "calibrate", "coverage", "schema",
            "verify_module")

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

EPILOG = """exit codes: 0 ok; 1 does not fit, or a profile is invalid; 2 usage or input error.
examples:
  omlx-profiles estimate meta-llama/Llama-3.1-8B-Instruct --tokens 32k
  omlx-profiles resolve mlx-community/Llama-3.1-8B-Instruct-4bit --json
  omlx-profiles validate profiles/
"""


class _Parser(argparse.ArgumentParser):
    def _get_value(self, action, arg_string):
        """An ``InputError`` from a type function keeps its sentence (argparse would print only
        "invalid _token_list value"), and an integer of 5,000 digits is a usage error, not a crash.

        Two rules hold for every option and argument here, so no command can forget them:

        * an empty (or blank) value is refused: ``--config ''``, ``--profiles ''``, ``--out ''``,
          ``schema --write ''`` used to mean "not given" (the default file, the current directory, the
          installed package) without a word;
        * ``type=int`` reads ASCII digits only: ``int()`` also takes ``٢`` and ``８``.
        """
        _GIVEN.add(action.dest)
        if isinstance(arg_string, str) and not arg_string.strip() and action.nargs not in (argparse.PARSER,
                                                                                             argparse.REMAINDER):
            raise argparse.ArgumentError(action, "empty value; leave the option out instead" if action.option_strings
                                         else f"empty {_POSITIONAL.get(action.dest, 'value')}")
        convert = self._registry_get("type", action.type, action.type)
        if convert is int:
            convert = _ascii_int
        if callable(convert):
            try:
                return convert(arg_string)
            except (InputError, argparse.ArgumentTypeError) as e:
                raise argparse.ArgumentError(action, str(e)) from None
            except Exception:  # noqa: BLE001 - argparse's own handling below says it (ArgumentTypeError, ...)
                pass
        return super()._get_value(action, arg_string)

    def error(self, message):  # argparse's own usage errors: exit 2, one line, no traceback
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


#: Options that mean something only with another one: given alone they were dropped without a word
#: (``estimate --reserve 1PiB`` with no budget; ``--kv-start`` with no ``--kv-bits``). ``_GIVEN`` holds the
#: options the command line set (``_Parser._get_value`` sees each value given; defaults never reach it).
REQUIRES = {"reserve": ("budget", "--reserve only applies with --budget (it is kept free inside the budget)"),
            "kv_start": ("kv_bits", "--kv-start only applies with --kv-bits (it is when KV quantization starts)"),
            "kv_group_size": ("kv_bits", "--kv-group-size only applies with --kv-bits")}
_GIVEN: set[str] = set()
_POSITIONAL = {"model": "model id (give a model id, a model directory or --config PATH)", "path": "path",
               "paths": "path", "modules": "module name"}


def _check_requires(args) -> None:
    for dest, (needed, sentence) in REQUIRES.items():
        if dest in _GIVEN and hasattr(args, needed) and getattr(args, needed) is None:
            raise InputError(sentence)


def _ascii_int(text: str) -> int:
    t = text.strip()
    digits = t[1:] if t[:1] in "+-" else t
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 12):
        raise argparse.ArgumentTypeError(f"expected a whole number in ASCII digits, got {text!r}")
    return int(t)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="omlx-profiles",
        description="Model memory profiles for MLX inference engines: exact KV bytes, prefill peak, fit.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f".cmd_{name}", __package__).register(sub)
    return parser


#: Optional packages a command may need (import name -> the extra that installs it): a missing one is
#: the user's install, said as such; any other missing module is a real bug (internal error).
OPTIONAL_MODULES = {"mlx": "mlx", "mlx_lm": "mlx", "matplotlib": "chart", "huggingface_hub": "hub",
                    "transformers": "mlx", "jsonschema": "test", "hypothesis": "test"}


def main(argv: list[str] | None = None) -> int:
    """Run one command. Everything it prints goes through ``terminal_safe`` (see ``_SafeStream``)."""
    out, err = sys.stdout, sys.stderr
    for s in (out, err):  # LANG=C with a non-ASCII path: print an escape, never die on the encoding
        reconf = getattr(s, "reconfigure", None)
        if reconf is not None:
            try:
                reconf(errors="backslashreplace")
            except (ValueError, OSError, AttributeError):
                pass
    # a closed stream (``>&-``, ``2>&-``) is None: the command still runs and its exit code still says how
    # it went (stdout closed: nothing could be delivered, exit 2); messages to a stderr that cannot take
    # them (closed, ``2>/dev/full``) are dropped, never a second failure that changes the exit code
    sys.stdout = _SafeStream(out if out is not None else _Sink(closed=True))
    sys.stderr = _SafeStream(err if err is not None else _Sink(), quiet=True)
    try:
        code = _run(argv)
        try:
            sys.stdout.flush()  # a full disk (/dev/full) must fail here, inside the contract, not at exit
            if sys.stdout.failed and code == EXIT_OK:
                raise sys.stdout.error
        except OSError as e:
            code = _output_failed(out, e)
        if sys.stderr.failed:
            _silence(2)  # the interpreter's final flush of stderr would fail again (exit 120)
        return code
    finally:
        sys.stdout, sys.stderr = out, err


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    _GIVEN.clear()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    from ..kv.work import OutOfTime, deadline, work_limit

    seconds = None
    try:
        seconds = command_seconds(args)
        # every command finishes or refuses within seconds (kv/work.py): a budget of replayed calls, priced
        # per backend, refuses what is known to be too much up front; the CPU deadline stops the rest
        with work_limit(), deadline(seconds):
            _check_requires(args)
            return int(args.func(args) or 0)
    except OutOfTime:
        _say(f"error: this command took more than {seconds:g} s of CPU and was stopped (the CLI's resource "
             f"bound, docs/errors.md){_slow_hint(args)}; {SECONDS_ENV}=0 lifts the bound")
        return EXIT_USAGE
    except ProfileError as e:
        for issue in e.issues[:MAX_ISSUES]:
            _say(f"error: {issue}")
        if len(e.issues) > MAX_ISSUES:
            _say(f"error: ... and {len(e.issues) - MAX_ISSUES} more issue(s)")
        return EXIT_FAIL
    except UnsupportedError as e:
        _say(str(e))  # "unsupported: <why>": the class owns the prefix
        return EXIT_FAIL
    except (InputError, UnknownModelError) as e:
        _say(f"error: {e}")
        return EXIT_USAGE
    except OmlxProfilesError as e:
        _say(f"error: {e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top not in OPTIONAL_MODULES or os.environ.get("OMLX_PROFILES_DEBUG"):
            return _internal(e)
        print(f"unsupported: this needs the optional package {top!r}, which is not installed "
              f"(pip install 'omlx-profiles[{OPTIONAL_MODULES[top]}]')", file=sys.stderr)
        return EXIT_FAIL
    except OSError as e:  # the environment refused: permission, read-only, full disk, stdout gone
        if os.environ.get("OMLX_PROFILES_DEBUG"):
            raise
        if _is_stdout(e):
            return _output_failed(sys.stdout, e)
        where = e.filename if e.filename is not None else "a file"
        also = f" -> {e.filename2}" if e.filename2 is not None else ""
        print(f"error: {where}{also}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # the last line of defence: no traceback for users
        return _internal(e)


#: CPU seconds one command may take (``kv.work.deadline``). The answered commands of the registry sweep take
#: at most a few (docs/errors.md, "Limits"); past it the command stops with a sentence, never a hang. The
#: commands that run MLX (``calibrate``, ``verify-module``, ``--verify``) measure real prefills and are not
#: bounded. ``OMLX_PROFILES_CPU_SECONDS`` changes it (0: no bound).
COMMAND_SECONDS = 15.0
SECONDS_ENV = "OMLX_PROFILES_CPU_SECONDS"
UNBOUNDED_COMMANDS = ("calibrate", "verify-module")


def command_seconds(args) -> float | None:
    if getattr(args, "command", None) in UNBOUNDED_COMMANDS or getattr(args, "verify", False):
        return None
    raw = os.environ.get(SECONDS_ENV, "").strip()
    if not raw:
        return COMMAND_SECONDS
    import re

    # ASCII digits only (float() also reads "inf", "1e999", "١" and "1_0"), at most a day: setitimer overflows
    if not re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,6})?", raw) or float(raw) > 86400:
        raise InputError(f"{SECONDS_ENV} must be a number of seconds from 0 to 86400 (0: no bound), got {raw!r:.40}")
    return float(raw) or None


def _slow_hint(args) -> str:
    """What makes a command slow, from its own options: where to cut."""
    from ..peak.request import KEYED_AS_GIVEN

    hints = []
    chunk = getattr(args, "chunk", None)
    tokens = getattr(args, "tokens", None)
    if isinstance(chunk, int) and chunk < 512:
        hints.append(f"a larger --chunk than {chunk}")
    if isinstance(chunk, int) and chunk > KEYED_AS_GIVEN:
        # a large chunk costs its bounds, built per query count up to the chunk (or the prompt, when shorter:
        # peak.request.table_chunk), not its calls: "fewer tokens" was the advice for a chunk of 2^30 (session 12)
        hints.append(f"a --chunk of at most {KEYED_AS_GIVEN:,} (the bounds of a chunk are built for every query "
                     "count up to it)")
    if getattr(args, "backend", None) == "cuda" and not (isinstance(chunk, int) and isinstance(tokens, int)
                                                         and tokens // chunk < 64):
        hints.append("fewer tokens (on cuda every prefill call walks its graph commits, ~3 ms each)")
    if getattr(args, "command", None) == "chart":
        hints.append("fewer models, ranks or --max-tokens")
    return ("; try " + ", ".join(hints)) if hints else ""


#: One message is one readable line: a value quoted from a hostile file (a 1 MB tensor name, a dtype that
#: is a list of a million items) is cut, with the count of what was left out.
MAX_MESSAGE = 2000
MAX_ISSUES = 200


def _say(text: str) -> None:
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + f"... ({len(text) - MAX_MESSAGE:,} more characters)"
    print(text, file=sys.stderr)


def _internal(e: BaseException) -> int:
    if os.environ.get("OMLX_PROFILES_DEBUG"):
        raise e
    print(f"error: internal error ({type(e).__name__}: {e}); rerun with OMLX_PROFILES_DEBUG=1 for details",
          file=sys.stderr)
    return EXIT_USAGE


def _is_stdout(e: OSError) -> bool:
    return e.filename is None and e.errno in (errno.ENOSPC, errno.EIO, errno.EPIPE, errno.EFBIG, errno.EDQUOT, errno.EBADF)


def _output_failed(stream, e: OSError) -> int:
    """Standard output could not take what was printed: say so on stderr, exit 2 (not "ok")."""
    _silence_stdout()
    print(f"error: cannot write to standard output: {e.strerror or e}", file=sys.stderr)
    return EXIT_USAGE


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail a second time."""
    _silence(1)


def _silence(fd: int) -> None:
    stream = {1: sys.__stdout__, 2: sys.__stderr__}[fd]
    if stream is None:
        return
    try:
        stream.flush()
    except (OSError, ValueError):
        pass
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


class _Sink:
    """Stands in for a closed standard stream. Writing the answer to a closed stdout is a failure to
    deliver it (``_output_failed``); a closed stderr just drops the message."""

    encoding = "utf-8"

    def __init__(self, closed: bool = False):
        self.closed_stream = closed

    def write(self, text: str) -> int:
        if self.closed_stream and text:
            raise OSError(errno.EBADF, "standard output is closed")
        return len(text)

    def flush(self) -> None:
        pass


class _SafeStream:
    """A text stream that escapes terminal control characters in everything written through it.

    Paths, shard names, ids and config values come from users and files; the escape happens here, once,
    instead of at each ``print``. ``unfiltered`` is the wrapped stream (calibrate's progress bar
    redraws its line with a carriage return on purpose)."""

    def __init__(self, stream, quiet: bool = False):
        self.unfiltered = stream
        self.quiet = quiet  # stderr: a message that cannot be written is dropped (there is nowhere to say so)
        self.failed, self.error = False, None

    def write(self, text: str) -> int:
        try:
            self.unfiltered.write(terminal_safe(text))
        except OSError as e:
            self.failed, self.error = True, e  # argparse's --help / --version swallow this: main() still sees it
            if not self.quiet:
                raise
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.unfiltered.flush()
        except OSError:
            if not self.quiet:
                raise
            self.failed = True

    def __getattr__(self, name):
        return getattr(self.unfiltered, name)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
