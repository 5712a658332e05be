"""Every operation of a template checked against the known-safe subset (``table``), in one walk of the syntax tree.

Why an allowlist: a list of what is dangerous must foresee every route to an attribute (a path given by position
as by keyword, a format string, a method taken and called later), and one missing entry is an escape. Here the
question is the other way round: is each statement, filter, test, global, method and attribute name one
that real chat templates use? An attribute argument of a filter must be a literal, checked part by part. What is
outside the subset is a finding: an error when it is a member of a Python object (``mro``, ``fromkeys`` ...), an
underscored or introspection name, or a request to the loader; a warning when it is merely unknown (a data key no
real template reads, a filter a renderer adds). The data-flow analysis (``flow``) still proves computed subscript
keys safe: a template may index a dict by a variable, and a string built at render time is no literal.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.tables import template_rules
from .syntax import _all, _attribute_universe
from .table import FilterSpec, allowlist
from .table import slot_arguments as _slot

#: rules whose findings are warnings: outside the subset, but reaching nothing internal
WARNING_RULES = frozenset({"template.unknown", "template.unrendered"})

Found = tuple[int, str, str]


class AllowlistCheck:
    """One template's check: ``run()`` returns findings (line, rule, why)."""

    def __init__(self, tree: Any, nodes: Any):
        self.tree = tree
        self.n = nodes
        self.safe = allowlist()
        self.introspection = frozenset(template_rules().introspection_attributes)
        self.universe = _attribute_universe()
        self.found: dict[Found, None] = {}
        self.defined: frozenset[str] = frozenset()

    def run(self) -> list[Found]:
        n = self.n
        nodes = list(_all(self.tree))
        callables = (
            {"loop", "caller"}
            | {x.name for x in nodes if isinstance(x, n.Macro)}
            | {x.name for x in nodes if isinstance(x, n.Name) and x.ctx in ("store", "param")}
        )
        self.defined = _defined_names(nodes, n)
        for node in nodes:
            line = getattr(node, "lineno", 1) or 1
            kind = type(node).__name__
            if kind in self.safe.loader_statements:
                self.add(line, "template.loader", f"{kind.lower()} asks the renderer's loader for another template")
            elif kind not in self.safe.statements and kind not in self.safe.expressions:
                self.add(line, "template.unknown", f"a {kind} node, which no real chat template uses")
            if isinstance(node, n.Getattr):
                self.name(line, node.attr, "attribute")
            elif isinstance(node, n.Getitem) and isinstance(node.arg, n.Const) and isinstance(node.arg.value, str):
                self.key(line, node.arg.value)
            elif isinstance(node, n.Filter):
                self.filter(line, node)
            elif isinstance(node, n.Test) and node.name not in self.safe.tests:
                self.add(line, "template.unknown", f"the test {node.name!r}, which no real chat template uses")
            elif isinstance(node, n.Call) and isinstance(node.node, n.Name):
                called = node.node.name
                if called not in callables and called not in self.safe.globals:
                    self.add(line, "template.unknown", f"a call of {called!r}, which the render context would have to provide")
        return sorted(self.found, key=lambda f: f[0])

    def add(self, line: int, rule: str, why: str) -> None:
        self.found[(line, rule, why)] = None

    def internal(self, line: int, name: str, how: str, members: bool = True) -> bool:
        """Flag a name that reaches an object's internals (with ``members``, any member of a Python object
        outside the subset too); True when it was one."""
        if name.startswith("__"):
            self.add(line, "template.dunder", f"{how} {name}")
        elif name.startswith("_"):
            self.add(line, "template.private", f"{how} {name}")
        elif name in self.introspection:
            self.add(line, "template.introspection", f"{how} {name}")
        elif members and name in self.universe and name not in self.safe.attributes:
            self.add(line, "template.member", f"{how} {name}, a member of a Python object outside the safe subset")
        else:
            return False
        return True

    def name(self, line: int, name: str, how: str) -> None:
        if not self.internal(line, name, f"{how}") and name not in self.safe.attributes and name not in self.defined:
            self.add(line, "template.unknown", f"{how} {name}, which no real chat template reads")

    def key(self, line: int, key: str) -> None:
        """A constant subscript key: a dict key (JSON schemas have ``format`` and ``items``), refused only when
        the lookup's ``getattr`` fallback would reach internals (``format`` called is ``flow``'s template.format)."""
        self.internal(line, key, "subscript by", members=False)

    def literal_names(self, line: int, arg: Any, how: str) -> None:
        """An attribute argument: a string literal whose every dotted part is in the subset."""
        n = self.n
        if not isinstance(arg, n.Const):
            self.add(line, "template.literal_attribute", f"{how} an attribute name that is not a literal")
        elif isinstance(arg.value, str):
            for part in re.split(r"[.,]", arg.value):  # sort(attribute='a,b.c'): several dotted paths
                if not part.isdigit():
                    self.name(line, part, how)

    def filter(self, line: int, node: Any) -> None:
        n = self.n
        spec = self.safe.filters.get(node.name)
        if spec is None:
            self.add(line, "template.unknown", f"the filter {node.name!r}, which no real chat template uses")
            return
        how = f"the {node.name} filter with"
        names_things = spec.attribute is not None or spec.filter_arg is not None
        if names_things and (node.dyn_args is not None or node.dyn_kwargs is not None):
            self.add(line, "template.literal_attribute", f"{how} arguments spread from a list or dict (* or **)")
        if spec.attribute is not None:
            for arg in _slot(node.args, node.kwargs, spec.attribute):
                self.literal_names(line, arg, how)
        if spec.test_arg is not None and len(node.args) > spec.test_arg:
            test = node.args[spec.test_arg]
            if not (isinstance(test, n.Const) and test.value in self.safe.tests):
                self.add(line, "template.unknown", f"{how} a test that is not a known literal")
        if spec.filter_arg is not None and len(node.args) > spec.filter_arg:
            self.applied(line, node, spec)

    def applied(self, line: int, node: Any, spec: FilterSpec) -> None:
        """``map('name', ...)``: the applied filter must be a literal in the subset, and its own attribute
        arguments (the rest of map's arguments, shifted by one) literals too."""
        n = self.n
        assert spec.filter_arg is not None
        name = node.args[spec.filter_arg]
        how = f"the {node.name} filter with"
        if not (isinstance(name, n.Const) and isinstance(name.value, str)):
            self.add(line, "template.literal_attribute", f"{how} a filter name that is not a literal")
            return
        inner = self.safe.filters.get(name.value)
        if inner is None:
            self.add(line, "template.unknown", f"{how} the filter {name.value!r}, which no real chat template uses")
        elif inner.attribute is not None:
            rest = node.args[spec.filter_arg + 1 :]
            for arg in _slot(rest, [k for k in node.kwargs if k.key != "attribute"], inner.attribute):
                self.literal_names(line, arg, f"{how} {name.value!r} and")


def _defined_names(nodes: list[Any], n: Any) -> frozenset[str]:
    """The field names a template defines itself: namespace fields it sets, its blocks, keywords of ``namespace()`` and
    ``dict()``, and the string keys of its dict literals (reading them back is no unknown operation)."""
    out = {x.attr for x in nodes if isinstance(x, n.NSRef)} | {x.name for x in nodes if isinstance(x, n.Block)}
    out |= {k.key for x in nodes if isinstance(x, n.Call) and isinstance(x.node, n.Name) for k in x.kwargs}
    out |= {
        p.key.value for x in nodes if isinstance(x, n.Dict) for p in x.items if isinstance(p.key, n.Const) and isinstance(p.key.value, str)
    }
    return frozenset(out)
