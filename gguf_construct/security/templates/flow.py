"""What a chat template can reach and what it can make a renderer do: a small abstract interpretation of
Jinja2's syntax tree (parsed by Jinja2 itself; this module never renders).

Soundness by construction: every value an expression can take is over-approximated by a ``Value`` (the string
constants it may be or contain, whether it may hold render-context data or strings the template computed, and
whether it may be an arbitrary attribute of an object), found by a flow-insensitive fixpoint over every way a
name gets a value (``set``, ``set`` blocks, tuple targets, namespace fields, ``for`` targets, macro and
``caller`` arguments, ``with``). Then every attribute name and every subscript key is checked against what it
can be:

* a constant: refused when private, a dunder, an introspection/process name or ``format``/``format_map``;
* render-context data (messages, tools ...): a lookup keyed by it may fall back to ``getattr`` and reach one
  attribute of its object, so the result is *reached*, and any attribute access, subscript, call or
  attribute-taking filter on a reached value is refused (reading, printing, comparing and string filters are
  not: they call nothing chosen by the template);
* a string the template computed and the scanner cannot enumerate (``~``, ``replace``, ``join``, macro
  output ...): refused as a key, unless it always holds a character no attribute name holds (``'<|' ~ x``).

The cost pass bounds what a template can make the renderer do: constant loop trip counts (multiplied through
nesting and macro calls), ``range`` sizes, string and list repetition and padding widths, number sizes, macro
recursion (only structural recursion, descending into an argument, is allowed) and loops over a list the loop
itself grows. Limits are named in ``schema/template_rules.json``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .abstract import (
    CAP,
    DATA,
    EMPTY,
    Value,
    _mul,
    const,
)
from .calls import Calls
from .cost import Cost
from .expressions import Expressions
from .filters import Filters
from .state import AnalysisBudget, AnalysisState
from .strings import Strings
from .syntax import _count, _roots

__all__ = ["Analysis", "AnalysisBudget"]


class Analysis(Expressions, Calls, Filters, Strings, Cost, AnalysisState):
    """One template's analysis: ``run()`` returns its findings (line, rule, why)."""

    # ------------------------------------------------------------------ driver
    def run(self) -> list[tuple[int, str, str]]:
        rounds = self.limits["max_flow_rounds"]
        for self.round in range(rounds):
            self.changed = False
            self.visit_all(self.tree.body)
            if not self.changed:
                break
        else:  # what the names may hold is not known in full: nothing can be proven
            return [(1, "template.flow_limit", f"the data-flow analysis did not settle in {rounds} rounds")]
        self.report = True
        self.visit_all(self.tree.body)
        self.check_recursion_and_cost()
        return sorted(((f[0], f[1], f[2]) for f in self.findings), key=lambda f: f[0])

    # ------------------------------------------------------------------ statements
    def visit_all(self, body: Iterable[Any]) -> None:
        for node in body:
            self.visit(node)

    def visit(self, node: Any) -> None:
        n = self.n
        if isinstance(node, n.Output):
            for child in node.nodes:
                if not isinstance(child, n.TemplateData):
                    self.ev(child)
        elif isinstance(node, n.Assign):
            self.bind_target(node.target, self.ev(node.node))
        elif isinstance(node, n.AssignBlock):
            value = self.check_text(node, self.body_value(node.body))
            if node.filter is not None:
                value = self.filter(node.filter, value)
            self.bind_target(node.target, value)
        elif isinstance(node, n.For):
            self.visit_for(node)
        elif isinstance(node, n.Macro):
            self.visit_macro(node)
        elif isinstance(node, n.CallBlock):
            self.ev(node.call)
            for arg, default in zip(node.args[len(node.args) - len(node.defaults) :], node.defaults, strict=True):
                self.bind(arg.name, self.ev(default))
            for arg in node.args:
                self.bind(arg.name, DATA)
            self.visit_all(node.body)
        elif isinstance(node, n.FilterBlock):
            self.filter(node.filter, self.body_value(node.body))
        elif isinstance(node, n.With):
            for target, value in zip(node.targets, node.values, strict=True):
                self.bind_target(target, self.ev(value))
            self.visit_all(node.body)
        elif isinstance(node, n.If):
            self.ev(node.test)
            self.visit_all(node.body)
            for elif_ in node.elif_:
                self.visit(elif_)
            self.visit_all(node.else_)
        else:
            for child in node.iter_child_nodes():
                if isinstance(child, n.Expr):
                    self.ev(child)
                else:
                    self.visit(child)

    def body_value(self, body: list[Any]) -> Value:
        """The string a ``{% set %}`` or ``{% filter %}`` block renders: its constant text, when all of it is
        constant, else a computed string holding what its expressions may be."""
        n = self.n
        parts: list[Value] = []
        for node in body:
            if isinstance(node, n.Output):
                for child in node.nodes:
                    parts.append(const(child.data) if isinstance(child, n.TemplateData) else self.ev(child))
            else:
                self.visit(node)
                parts.append(Value(computed=True))
        return self.concat(parts)

    def visit_for(self, node: Any) -> None:
        n = self.n
        iterable = self.ev(node.iter)
        element = iterable.contents()
        if node.recursive:
            element = element.join(self.env.get("\0loop", EMPTY))
        self.bind_target(node.target, element)
        self.bind("\0items", element)
        if node.test is not None:
            self.ev(node.test)
        trip = iterable.size  # None: as many as the render context holds (the caller's scale)
        saved = self.factor
        if trip is not None:
            self.factor = _mul(self.factor, max(trip, 1))
            if self.factor > self.limits["max_loop_iterations"]:
                self.flag(
                    node, "template.loop_bound", f"loops run {_count(self.factor)} times (more than {self.limits['max_loop_iterations']:,})"
                )
        macro = self.macro_stack[-1] if self.macro_stack else self.top
        if self.report:
            macro.loops = min(macro.loops + self.factor, CAP)
        self.loop_stack.append((node, _roots(node.iter, n)))
        self.visit_all(node.body)
        self.loop_stack.pop()
        self.factor = saved
        self.visit_all(node.else_)

    def visit_macro(self, node: Any) -> None:
        info = self.macros[node.name]
        params = node.args
        for arg in params:
            self.bind(arg.name, DATA)
        for arg, default in zip(params[len(params) - len(node.defaults) :], node.defaults, strict=True):
            self.bind(arg.name, self.ev(default))
        saved = self.factor, self.loop_stack
        self.factor, self.loop_stack = 1, []
        self.macro_stack.append(info)
        self.visit_all(node.body)
        self.macro_stack.pop()
        self.factor, self.loop_stack = saved
