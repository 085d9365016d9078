"""Safe YAML reading for files contributors wrote.

* Only ``CSafeLoader``/``SafeLoader`` (no tags that build Python objects, no code runs from a file).
* Duplicate keys are an error with both lines (PyYAML silently keeps the last one).
* Aliases/anchors are refused: profiles do not need them, and alias bombs ("billion laughs") would
  otherwise expand into gigantic structures downstream.
* Sizes are bounded before parsing, so a hostile file fails fast.

``line_index`` maps a field path (``("variants", 2, "layers", "window")``) to its 1-based line; it is
only computed on the error and ``--explain`` paths, so the hot path stays at C speed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import Issue, ProfileError

try:
    _Base = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Base = yaml.SafeLoader

MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 32


class _StrictLoader(_Base):  # type: ignore[misc, valid-type]
    """Safe loader that refuses duplicate keys, aliases and deep nesting."""

    def construct_object(self, node, deep=False):
        if node in self.constructed_objects or node in self.recursive_objects:
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases/anchors are not allowed in profiles", node.start_mark
            )
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(
                        None, None, "YAML merge keys ('<<') are not allowed in profiles", key_node.start_mark
                    )
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _depth_ok(node, depth=0) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(node, yaml.MappingNode):
        return all(_depth_ok(k, depth + 1) and _depth_ok(v, depth + 1) for k, v in node.value)
    if isinstance(node, yaml.SequenceNode):
        return all(_depth_ok(v, depth + 1) for v in node.value)
    return True


def read_text(path: Path) -> str:
    """Read a UTF-8 text file with a size bound; errors name the file."""
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ProfileError([Issue(str(path), None, "", f"cannot read file: {e.strerror or e}")]) from None
    if size > MAX_FILE_BYTES:
        raise ProfileError([Issue(str(path), None, "", f"file is {size} bytes; the limit is {MAX_FILE_BYTES}")])
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ProfileError([Issue(str(path), None, "", f"cannot read file: {e.strerror or e}")]) from None
    if b"\x00" in raw:
        raise ProfileError([Issue(str(path), None, "", "binary content (NUL bytes): not a YAML text file")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError([Issue(str(path), None, "", f"not UTF-8 text (byte {e.start})")]) from None


def load_yaml_text(text: str, filename: str) -> Any:
    """Parse YAML text safely; any problem becomes a ``ProfileError`` with ``file:line``."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ProfileError([Issue(filename, None, "", "empty file: expected a mapping with 'family' and 'variants'")])
        if not _depth_ok(node):
            raise ProfileError([Issue(filename, node.start_mark.line + 1, "", f"nesting deeper than {MAX_DEPTH} levels")])
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        what = e.problem or e.context or "invalid YAML"
        raise ProfileError([Issue(filename, line, "", f"YAML error: {what}")]) from None
    except yaml.YAMLError as e:
        raise ProfileError([Issue(filename, None, "", f"YAML error: {e}")]) from None
    except RecursionError:
        raise ProfileError([Issue(filename, None, "", "YAML nesting too deep")]) from None
    finally:
        loader.dispose()


def load_yaml_file(path: Path) -> Any:
    return load_yaml_text(read_text(path), str(path))


def line_index(text: str) -> dict[tuple, int]:
    """Map every field path of a YAML document to the 1-based line where it starts."""
    try:
        root = yaml.compose(text, Loader=_Base)
    except yaml.YAMLError:
        return {}
    index: dict[tuple, int] = {}

    def walk(node, path: tuple):
        index[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                index[path + (key,)] = k.start_mark.line + 1
                if isinstance(v, (yaml.MappingNode, yaml.SequenceNode)):
                    walk(v, path + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, path + (i,))

    if root is not None:
        walk(root, ())
    return index


def line_for(index: dict[tuple, int], path: tuple) -> int | None:
    """The line of ``path``, or of its nearest ancestor present in the file."""
    p = tuple(path)
    while p:
        if p in index:
            return index[p]
        p = p[:-1]
    return index.get(())
