"""Integer formulas over config keys, as module recipes write state-cache shapes.

Why: a state cache's arrays (Mamba's conv window ``(conv_kernel - 1, intermediate_size + 2 * n_groups *
state_size)``, a recurrent state ``(heads, head_dim, state)``) are arithmetic over config keys. A recipe
writes that arithmetic as a short string, so a new type needs data, not a Python rule per module.

The grammar is deliberately tiny and parsed with ``ast`` (never ``eval``): integer literals, config keys
(``a.b`` = key ``b`` of the dict under key ``a``), ``+ - * //``, parentheses, and ``a or b`` (the first
operand that is not null/absent - mlx-lm's ``x if x is not None else y`` defaults).
"""
from __future__ import annotations

import ast
from functools import lru_cache
from typing import Callable

MAX_LEN = 200

_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b}


class FormulaError(ValueError):
    """A formula outside the grammar (raised at recipe validation, so a recipe never ships one)."""


def _key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _key(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _check(node: ast.AST, text: str) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise FormulaError(f"formula {text!r}: only integer literals, got {node.value!r}")
    elif isinstance(node, (ast.Name, ast.Attribute)):
        if _key(node) is None:
            raise FormulaError(f"formula {text!r}: a key is a name or dotted names (a.b)")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise FormulaError(f"formula {text!r}: only + - * // are allowed")
        _check(node.left, text)
        _check(node.right, text)
    elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        for v in node.values:
            _check(v, text)
    else:
        raise FormulaError(f"formula {text!r}: {type(node).__name__} is not allowed (integers, keys, + - * //, "
                           "parentheses, 'or')")


@lru_cache(maxsize=1024)
def parse(text: str) -> ast.expr:
    """The checked syntax tree of ``text`` (``FormulaError`` when outside the grammar)."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_LEN:
        raise FormulaError(f"formula must be a non-empty string of at most {MAX_LEN} characters, got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise FormulaError(f"formula {text!r} is not an expression") from None
    _check(tree.body, text)
    return tree.body


def keys(text: str | int) -> list[str]:
    """The config keys a formula reads (dotted for nested ones), in order of appearance."""
    if isinstance(text, int):
        return []
    out: list[str] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.Name, ast.Attribute)):
            k = _key(node)
            if k not in out:
                out.append(k)
            return
        for ch in ast.iter_child_nodes(node):
            walk(ch)

    walk(parse(text))
    return out


def evaluate(text: str | int, lookup: Callable[[str], int | None]) -> int | None:
    """The formula's value; ``lookup(key)`` gives a key's integer (None = null/absent). A key that is
    None outside an ``or`` makes the whole value None (the caller says which key)."""
    if isinstance(text, int):
        return text
    return _eval(parse(text), lookup)


def _eval(node: ast.AST, lookup: Callable[[str], int | None]) -> int | None:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return lookup(_key(node))
    if isinstance(node, ast.BoolOp):
        for v in node.values:
            x = _eval(v, lookup)
            if x is not None:
                return x
        return None
    a, b = _eval(node.left, lookup), _eval(node.right, lookup)
    if a is None or b is None:
        return None
    if isinstance(node.op, ast.FloorDiv) and b == 0:
        raise ZeroDivisionError("division by zero")
    return _BINOPS[type(node.op)](a, b)
