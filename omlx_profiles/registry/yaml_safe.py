"""Safe YAML reading for files contributors wrote.

Every problem becomes a ``ProfileError`` naming the file and, where there is one, the line; nothing
else escapes (no ``ValueError`` from a constructor, no ``RecursionError``, no hang).

* libyaml (C) parses and composes the node graph; PyYAML's constructors are never used. One pass of
  our own (``_Builder``) checks and builds, with the core tags only (null, bool, int, float, str, seq,
  map): ``!!python/...``, ``!!binary``, ``!!set``, ``!!timestamp``... are errors, so no code runs and
  no object is built from a file.
* Aliases/anchors are refused *on the composed node graph, before anything is constructed*: an
  alias makes two places share one node, and walking (or constructing) a "billion laughs" document
  would visit 9**9 nodes. The walk visits each node object once, so it stops at the first reuse.
* The walk also bounds the nesting depth and the number of nodes, and checks every mapping key: keys
  must be plain strings (``on:``, ``1:``, ``~:`` are a bool, an int and a null in YAML 1.1: quote them),
  unique (PyYAML silently keeps the last one), and no merge keys (``<<``).
* Strings carry no raw control or bidi characters (keys: no invisible ones either): a double-quoted
  escape such as ``"\\e[2J"`` would otherwise reach a terminal through every message or table that
  quotes the name, and a zero-width space makes two keys look alike.
* Implicit typing is narrowed where YAML 1.1 surprises people: ``010`` (octal 8 in YAML 1.1, 10 in
  1.2) and ``1:20`` (base 60, i.e. 80) stay strings, so a count field rejects them instead of reading a
  number nobody wrote; dates stay strings; integer literals longer than ``MAX_INT_DIGITS`` are errors
  (Python refuses to convert more than 4300 digits anyway, and no count has 25 digits).
* Sizes are bounded before parsing, so a hostile file fails fast; only regular files are opened (a
  FIFO would block ``open()``, ``/dev/zero`` never ends).

``line_index`` maps a field path (``("variants", 2, "layers", "window")``) to its 1-based line; it is
only computed on the error and ``--explain`` paths, so the hot path stays at C speed.
"""
from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import yaml

from ..errors import Issue, ProfileError

try:
    _Base = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeLoader

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 50_000  # a real profile file has a few thousand
MAX_INT_DIGITS = 24

_T = "tag:yaml.org,2002:"
_STR, _MERGE = _T + "str", _T + "merge"

# YAML 1.1 resolvers minus the surprising forms (see the module docstring).
_INT_RE = re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


def _resolvers() -> dict:
    out: dict = {}
    for first, pairs in _Base.yaml_implicit_resolvers.items():
        kept = []
        for tag, rx in pairs:
            if tag in (_T + "timestamp", _T + "value", _T + "yaml"):
                continue
            if tag == _T + "int":
                rx = _INT_RE
            elif tag == _T + "float":
                rx = _FLOAT_RE
            kept.append((tag, rx))
        if kept:
            out[first] = kept
    return out


_NULL, _BOOL, _INT, _FLOAT = _T + "null", _T + "bool", _T + "int", _T + "float"
_SEQ, _MAP = _T + "seq", _T + "map"
_IMPLICIT = _resolvers()
_CTRL_VALUE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CTRL_KEY = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_BOOLS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}


class _Composer(_Base):  # type: ignore[misc, valid-type]
    """libyaml parses and composes the node graph (C speed); ``_build`` turns it into Python values.

    PyYAML's own constructors are not used at all: ``_build`` checks and builds in one pass over the
    nodes, which is both the security boundary (core tags only, no aliases, bounded depth and size,
    string keys without duplicates) and the hot path of a registry load.
    """

    def resolve(self, kind, value, implicit):  # called by the C composer for untagged nodes
        if kind is yaml.ScalarNode:
            if implicit[0]:  # a plain (unquoted) scalar: YAML 1.1 implicit typing, narrowed
                for tag, rx in _IMPLICIT.get(value[:1], ()):
                    if rx.match(value):
                        return tag
            return _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP


def _line(node) -> int:
    return node.start_mark.line + 1


def _key_name(node) -> str:
    v = node.value if isinstance(node, yaml.ScalarNode) else "<complex key>"
    return v if len(v) <= 60 else v[:57] + "..."


class _Builder:
    """One pass over the composed graph: refuse what profiles must not contain, build the rest."""

    __slots__ = ("filename", "seen", "count")

    def __init__(self, filename: str):
        self.filename = filename
        self.seen: set[int] = set()
        self.count = 0

    def fail(self, node, msg: str, yaml_error: bool = False):
        raise ProfileError([Issue(self.filename, _line(node), "", f"YAML error: {msg}" if yaml_error else msg)])

    def build(self, node, depth: int = 0) -> Any:
        if id(node) in self.seen:
            self.fail(node, "YAML aliases/anchors are not allowed in profiles (this node is reused through an alias)")
        self.seen.add(id(node))
        self.count += 1
        if self.count > MAX_NODES:
            self.fail(node, f"more than {MAX_NODES} YAML nodes: not a profile file")
        if depth > MAX_DEPTH:
            self.fail(node, f"nesting deeper than {MAX_DEPTH} levels")
        tag = node.tag
        if isinstance(node, yaml.ScalarNode):
            if tag == _STR:
                self.text(node, node.value)
                return node.value
            if tag == _INT:
                return self.integer(node)
            if tag == _FLOAT:
                return self.number(node)
            if tag == _BOOL:
                b = _BOOLS.get(node.value.lower())
                if b is None:
                    self.fail(node, f"{node.value!r} is not a boolean", True)
                return b
            if tag == _NULL:
                return None
        elif isinstance(node, yaml.SequenceNode):
            if tag == _SEQ:
                return [self.build(v, depth + 1) for v in node.value]
        elif isinstance(node, yaml.MappingNode):
            if tag == _MAP:
                return self.mapping(node, depth)
        self.fail(node, f"the tag {tag!r} is not allowed in profiles (plain YAML only)", True)

    def text(self, node, value: str, *, key: bool = False) -> None:
        """No raw control or bidi characters: a double-quoted ``"\\e[2J"`` would reach a terminal through
        every message (or table) that quotes the name; tabs and newlines are fine in prose values."""
        m = (_CTRL_KEY if key else _CTRL_VALUE).search(value)
        if m:
            where = "key" if key else "string"
            self.fail(node, f"control or invisible character U+{ord(m.group()):04X} in a {where} "
                            f"({_key_name(node)!r}): not allowed in profiles")

    def mapping(self, node, depth: int) -> dict:
        out: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for k, v in node.value:
            if k.tag == _MERGE:
                self.fail(k, "YAML merge keys ('<<') are not allowed in profiles")
            if not isinstance(k, yaml.ScalarNode):
                self.fail(k, "mapping keys must be plain strings, not lists or mappings")
            if k.tag != _STR:
                kind = k.tag[len(_T):] if k.tag.startswith(_T) else k.tag
                self.fail(k, f"key {_key_name(k)!r} is read by YAML as {kind}, not a string; quote it")
            if id(k) in self.seen:
                self.fail(k, "YAML aliases/anchors are not allowed in profiles (this node is reused through an alias)")
            self.seen.add(id(k))
            key = k.value
            self.text(k, key, key=True)
            if key in lines:
                self.fail(k, f"duplicate key {_key_name(k)!r} (first on line {lines[key]})")
            lines[key] = _line(k)
            out[key] = self.build(v, depth + 1)
        return out

    def integer(self, node) -> int:
        text = node.value
        if text.isdigit() and len(text) <= MAX_INT_DIGITS:  # the common case: a plain decimal count
            return int(text)
        text = text.replace("_", "")
        if len(text.lstrip("+-")) > MAX_INT_DIGITS + 2:
            self.fail(node, f"integer literal of {len(text)} characters is out of range", True)
        try:
            sign = -1 if text[:1] == "-" else 1
            body = text.lstrip("+-")
            if body[:2] in ("0b", "0B"):
                return sign * int(body[2:], 2)
            if body[:2] in ("0x", "0X"):
                return sign * int(body[2:], 16)
            if len(body) > 1 and body[0] == "0":  # only through an explicit !!int: YAML 1.1 octal
                return sign * int(body, 8)
            return sign * int(body)
        except ValueError:
            self.fail(node, f"{node.value!r} is not an integer", True)

    def number(self, node) -> float:
        text = node.value.replace("_", "").lower()
        if len(text) > 100:
            self.fail(node, f"number literal of {len(text)} characters is out of range", True)
        if text in (".inf", "+.inf"):
            return float("inf")
        if text == "-.inf":
            return float("-inf")
        if text == ".nan":
            return float("nan")
        try:
            return float(text)
        except ValueError:
            self.fail(node, f"{node.value!r} is not a number", True)


def read_text(path: Path) -> str:
    """Read a UTF-8 text file with a size bound; errors name the file."""
    try:
        st = path.stat()
    except (OSError, ValueError) as e:
        raise ProfileError([Issue(str(path), None, "", f"cannot read file: {getattr(e, 'strerror', None) or e}")]) from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block open(), /dev/zero never ends
        raise ProfileError([Issue(str(path), None, "", "not a regular file")])
    size = st.st_size
    if size > MAX_FILE_BYTES:
        raise ProfileError([Issue(str(path), None, "", f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")])
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # bounded even if the file grew (or is not a regular file)
    except OSError as e:
        raise ProfileError([Issue(str(path), None, "", f"cannot read file: {e.strerror or e}")]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ProfileError([Issue(str(path), None, "", f"file is larger than the limit of {MAX_FILE_BYTES} bytes")])
    if b"\x00" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\x00")) + 1
        raise ProfileError([Issue(str(path), line, "", "binary content (NUL bytes): not a YAML text file")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ProfileError([Issue(str(path), line, "", f"not UTF-8 text (byte {e.start})")]) from None


def load_yaml_text(text: str, filename: str) -> Any:
    """Parse YAML text safely; any problem becomes a ``ProfileError`` with ``file:line``."""
    if not isinstance(text, str):
        raise ProfileError([Issue(filename, None, "", f"expected YAML text, got {type(text).__name__}")])
    loader = _Composer(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ProfileError([Issue(filename, None, "", "empty file: expected a mapping with 'family' and 'variants'")])
        return _Builder(filename).build(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        what = e.problem or e.context or "invalid YAML"
        raise ProfileError([Issue(filename, line, "", f"YAML error: {what}")]) from None
    except yaml.reader.ReaderError as e:
        pos = getattr(e, "position", None)
        line = text.count("\n", 0, pos) + 1 if isinstance(pos, int) else None
        ch = getattr(e, "character", None)
        what = f"unacceptable character U+{ord(ch) if isinstance(ch, str) else ch:04X}" if ch is not None else "unreadable character"
        raise ProfileError([Issue(filename, line, "", f"YAML error: {what} (control characters are not allowed)")]) from None
    except yaml.YAMLError as e:
        raise ProfileError([Issue(filename, None, "", f"YAML error: {_short(str(e))}")]) from None
    except RecursionError:
        raise ProfileError([Issue(filename, None, "", "YAML nesting too deep")]) from None
    except (ValueError, TypeError, OverflowError) as e:  # a constructor we did not wrap: still the file's fault
        raise ProfileError([Issue(filename, None, "", f"YAML error: {_short(str(e))}")]) from None
    finally:
        loader.dispose()


def _short(s: str, n: int = 200) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def load_yaml_file(path: Path) -> Any:
    return load_yaml_text(read_text(path), str(path))


def line_index(text: str) -> dict[tuple, int]:
    """Map every field path of a YAML document to the 1-based line where it starts.

    Only called for files that already parsed (or on the error path); any failure gives an empty map,
    never an exception: a missing line number must not hide the error being reported.
    """
    try:
        root = yaml.compose(text, Loader=_Composer)
    except (yaml.YAMLError, ValueError, RecursionError):
        return {}
    index: dict[tuple, int] = {}
    if root is None:
        return index
    seen: set[int] = set()
    stack = [(root, ())]
    while stack:
        node, path = stack.pop()
        if id(node) in seen or len(path) > MAX_DEPTH or len(index) > MAX_NODES:
            continue
        seen.add(id(node))
        index.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(id(k))
                index.setdefault(path + (key,), k.start_mark.line + 1)
                if isinstance(v, (yaml.MappingNode, yaml.SequenceNode)):
                    stack.append((v, path + (key,)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                stack.append((v, path + (i,)))
    return index


def line_for(index: dict[tuple, int], path: tuple) -> int | None:
    """The line of ``path``, or of its nearest ancestor present in the file."""
    p = tuple(path)
    while p:
        if p in index:
            return index[p]
        p = p[:-1]
    return index.get(())
