"""An ``ast`` scan of the package's raise sites: which rule ids they name and how (a catalogue ``rules.X``, or a
free-standing string). Used by tests/core/test_rule_catalogue.py and the per-format rule tables' tests."""

from __future__ import annotations

import ast
from pathlib import Path

from gguf_construct.core import rules

PACKAGE = Path(rules.__file__).parents[1]
ERRORS = set(rules.CLASSES)
CONSTRUCTS = {"CheckedArray", "LegacyName", "NumpyArray", "Float32Values", "AlignPadding", "UntilEOF", "required_int"}


def _name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _rule_of(node: ast.expr) -> str | None:
    """The id a ``rules.X`` attribute names (None for anything else)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "rules" and node.attr.isupper():
        return getattr(rules, node.attr).id
    return None


def issue_rules(path: str | Path) -> set[str]:
    """The rule ids of the ``Issue(...)`` calls in one module (``rules.X`` or a string)."""
    out = set()
    for n in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
        if isinstance(n, ast.Call) and _name(n.func) == "Issue" and n.args:
            a = n.args[0]
            rid = a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else _rule_of(a)
            if rid:
                out.add(rid)
    return out


def raise_sites() -> list[tuple[str, int, str, str, ast.expr]]:
    """(module, line, callee, how, rule argument) for every call that names a rule: FormatError subclasses,
    ``Issue``, ``need`` and the schema's construct classes; ``how`` is 'string' or 'catalogue' or 'other'."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(n, ast.Call):
                continue
            name = _name(n.func)
            if name in ERRORS or name == "Issue":
                args = n.args[:1]
            elif name == "need":
                args = n.args[1:2]
            elif name in CONSTRUCTS:  # their other string arguments are field or key names
                args = [a for a in n.args if _rule_of(a) is not None or (isinstance(a, ast.Constant) and a.value in rules.catalogue())]
            else:
                continue
            for a in args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str):
                    out.append((rel, n.lineno, name, "string", a))
                elif _rule_of(a) is not None:
                    out.append((rel, n.lineno, name, "catalogue", a))
    return out
