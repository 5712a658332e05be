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

import math
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ...core.tables import TemplateRules
from .syntax import _affixes, _all, _components, _context_reads, _count, _grew, _is_part, _names_no_attribute, _parts, _root, _roots
from .table import allowlist, slot_arguments
from .values import (
    ADDING_METHODS,
    CAP,
    DATA,
    DATA_PRESERVING,
    EMPTY,
    FORMAT,
    GLOBAL_VALUES,
    IDENTIFIER,
    ITEM_FILTERS,
    ITEM_METHODS,
    LOOP_NUMBERS,
    MANY,
    MAX_STR_LEN,
    MAX_STRS,
    MUTATING_METHODS,
    NON_IDENTIFIER,
    NUMBER,
    NUMBER_CHARS,
    NUMBER_FILTERS,
    PADDING_FILTERS,
    PADDING_METHODS,
    PRINTF_WIDTH,
    PURE_METHODS,
    STRING_FILTERS,
    WIDEN_AFTER,
    MacroInfo,
    Value,
    _max,
    _mul,
    const,
)

FILTERS = allowlist().filters
HOLDS_ARGS = allowlist().filters_where(holds_args=True)  #: their result may hold their arguments (default, fill values, start)
HEAP = "\0heap"  #: what mutators (append, update ...) put into containers: any container or data value may hold it
METHODS = allowlist().methods


def _text_size(value: Value) -> int | None:
    """How long a value prints at most: a string's known length, a number's digits (None: unknown)."""
    if value.strs or value.computed or value.data or value.reached:
        return value.size if not value.container else None
    if value.noattr and value.size is None:
        return NUMBER_CHARS  # a number, a boolean or none
    return None


def _sum_sizes(values: list[Value]) -> int | None:
    sizes = [_text_size(v) for v in values]
    return None if any(s is None for s in sizes) else min(sum(s or 0 for s in sizes), CAP)


def _union(values: list[Value]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for v in values:
        out |= v.sources
    return out


def _overlap(values: list[Value]) -> frozenset[str]:
    """The variables that two of the values are built from: the result holds them twice."""
    seen: set[str] = set()
    twice: set[str] = set()
    for v in values:
        twice |= seen & v.sources
        seen |= v.sources
    return frozenset(twice)


class AnalysisBudget(Exception):
    """The analysis took more steps than ``limits.max_analysis_steps``: its cost stays linear in that limit."""


class Analysis:
    """One template's analysis: ``run()`` returns its findings (line, rule, why)."""

    def __init__(self, tree: Any, nodes: Any, table: TemplateRules):
        self.tree = tree
        self.n = nodes
        self.table = table
        self.limits = table.limits
        GLOBAL_VALUES.update(table.global_objects)
        self.introspection = set(table.introspection_attributes)
        self.format_methods = set(table.format_methods)
        self.env: dict[str, Value] = {}
        self.changed = False
        self.round = 0
        self.report = False
        self.findings: dict[tuple[int, str, str], None] = {}
        all_nodes = list(_all(tree))
        self.assigned = {x.name for x in all_nodes if isinstance(x, nodes.Name) and x.ctx in ("store", "param")} | {
            x.name for x in all_nodes if isinstance(x, nodes.NSRef)
        }
        self.blocks = {x.name for x in all_nodes if isinstance(x, nodes.Block)}
        self.macros = {x.name: MacroInfo(x.name, [a.name for a in x.args], x) for x in all_nodes if isinstance(x, nodes.Macro)}
        self.callblock_params = [a.name for x in all_nodes if isinstance(x, nodes.CallBlock) for a in x.args]
        self.context_reads = _context_reads(tree, nodes)
        self.parts = {name: _parts(info.node, nodes) for name, info in self.macros.items()}
        # the dynamic scope of the walk in the report pass
        self.macro_stack: list[MacroInfo] = []
        self.factor = 1  # product of the constant trip counts of the enclosing loops (within the current macro)
        self.loop_stack: list[tuple[Any, set[str]]] = []  # enclosing for loops: (node, names their iterable is rooted at)
        self.top = MacroInfo("", [], tree)
        self.steps = 0
        self.max_steps = self.limits["max_analysis_steps"]

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

    def flag(self, node: Any, rule: str, why: str) -> None:
        if self.report:
            self.findings[(getattr(node, "lineno", 1) or 1, rule, why)] = None

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise AnalysisBudget(f"the analysis needed more than {self.max_steps:,} steps")

    def bind(self, name: str, value: Value) -> None:
        self.step()
        old = self.env.get(name)
        new = value.widened() if old is None else old.join(value).widened()
        if old is not None and new != old and self.round >= WIDEN_AFTER:
            if _grew(old.num, new.num):
                new = replace(new, num=CAP if new.grows else None)
            if _grew(old.size, new.size):
                new = replace(new, size=CAP if new.grows else None)
        if new != old:
            self.env[name] = new
            self.changed = True

    def bind_target(self, target: Any, value: Value) -> None:
        n = self.n
        name = target.name if isinstance(target, (n.Name, n.NSRef)) else None
        if (name in value.doubled or MANY in value.doubled) and (self.loop_stack or self.macro_stack):
            self.flag(target, "template.repetition", f"{name} is built from itself twice in a loop or macro: it grows exponentially")
        if isinstance(target, n.Name):
            self.bind(target.name, value)
        elif isinstance(target, n.NSRef):
            self.bind(target.name, replace(value.held(), noattr=False))
        elif isinstance(target, (n.Tuple, n.List)):
            for item in target.items:
                self.bind_target(item, value.contents())

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
            value = self.body_value(node.body)
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

    # ------------------------------------------------------------------ expressions
    def ev(self, node: Any) -> Value:  # noqa: C901 - one case per node type
        self.step()
        n = self.n
        if isinstance(node, n.Const):
            return const(node.value)
        if isinstance(node, n.Name):
            return self.name(node)
        if isinstance(node, (n.List, n.Tuple)):
            items = [self.ev(item) for item in node.items]
            out = Value(noattr=True, size=len(node.items), container=True)
            for item in items:
                out = out.join(replace(item.held(), size=None, item_size=None))
            widths = [_text_size(item) for item in items]
            item_size = max(widths, default=0) if all(w is not None for w in widths) else None  # type: ignore[type-var]
            return replace(out, size=len(node.items), item_size=item_size, doubled=out.doubled | _overlap(items), sources=_union(items))
        if isinstance(node, n.Dict):
            out = Value(noattr=True, size=len(node.items), container=True)
            for pair in node.items:
                out = out.join(self.ev(pair.key).held()).join(self.ev(pair.value).held())
            return replace(out, size=len(node.items), num=None)
        if isinstance(node, n.Getattr):
            return self.getattr(node, self.ev(node.node), node.attr)
        if isinstance(node, n.Getitem):
            return self.getitem(node)
        if isinstance(node, n.Call):
            return self.call(node)
        if isinstance(node, n.Filter):
            return self.filter(node, self.ev(node.node) if node.node is not None else Value(computed=True))
        if isinstance(node, n.Test):
            self.ev(node.node)
            self.args(node)
            return NUMBER
        if isinstance(node, n.CondExpr):
            self.ev(node.test)
            return self.ev(node.expr1).join(self.ev(node.expr2) if node.expr2 is not None else EMPTY)
        if isinstance(node, (n.And, n.Or)):
            return self.ev(node.left).join(self.ev(node.right))
        if isinstance(node, n.Not):
            self.ev(node.node)
            return NUMBER
        if isinstance(node, n.Compare):
            self.ev(node.expr)
            for op in node.ops:
                self.ev(op.expr)
            return NUMBER
        if isinstance(node, n.Concat):
            return self.check_text(node, self.concat([self.ev(x) for x in node.nodes], literal_parts=node.nodes))
        if isinstance(node, n.Add):
            return self.check_text(node, self.add(node))
        if isinstance(node, n.Mul):
            return self.mul(node)
        if isinstance(node, n.Mod):
            return self.mod(node)
        if isinstance(node, n.Pow):
            return self.pow(node)
        if isinstance(node, (n.Sub, n.Div, n.FloorDiv)):
            left, right = self.ev(node.left), self.ev(node.right)
            num = _max(left.num, right.num) if isinstance(node, n.Sub) else left.num
            return Value(
                noattr=True,
                num=None if num is None else min(num * (2 if isinstance(node, n.Sub) else 1), CAP),
                grows=left.grows or right.grows,
            )
        if isinstance(node, (n.Neg, n.Pos)):
            return replace(self.ev(node.node), noattr=True)
        if isinstance(node, n.Slice):
            for part in (node.start, node.stop, node.step):
                if part is not None:
                    self.ev(part)
            return NUMBER
        if isinstance(node, (n.MarkSafe, n.MarkSafeIfAutoescape)):
            return self.ev(node.expr)
        # anything else (extension nodes): its parts are checked, its value is unknown
        out = Value(data=True, computed=True)
        for child in node.iter_child_nodes():
            out = out.join(self.ev(child) if isinstance(child, n.Expr) else Value(computed=True))
        return out

    def name(self, node: Any) -> Value:
        name = node.name
        if name in self.macros:
            base = Value(special=frozenset([f"macro:{name}"]), noattr=True)
            return base.join(self.env[name]) if name in self.env else base
        if name not in self.assigned:
            if name in GLOBAL_VALUES:
                return Value(special=frozenset([name]), noattr=True)
            if name == "self":
                return Value(special=frozenset(["self"]), noattr=True)
            if name == "loop" and self.loop_stack:
                return Value(special=frozenset(["loop"]), noattr=True)
            if name == "caller":
                return Value(special=frozenset(["caller"]), noattr=True)
            if name in ("varargs", "kwargs"):
                return DATA.join(self.env.get("\0args", EMPTY))
        value = self.env.get(name)
        heap = self.env.get(HEAP)
        if value is not None and heap is not None and (value.container or value.data):
            value = value.join(heap).widened()
        if value is not None:
            value = replace(value, sources=value.sources | {name}, doubled=frozenset())
        if value is None or id(node) in self.context_reads:  # read where no assignment is certain: the render context's
            return DATA if value is None else value.join(DATA)
        return value

    def check_name(self, node: Any, name: str, how: str) -> None:
        if name.startswith("__"):
            self.flag(node, "template.dunder", f"{how} {name}")
        elif name.startswith("_"):
            self.flag(node, "template.private", f"{how} {name}")
        elif name in self.introspection:
            self.flag(node, "template.introspection", f"{how} {name}")

    def check_base(self, node: Any, base: Value, name: str | None, constant: bool = True) -> None:
        """Access to an object: never on Jinja2's globals or self; on a value a data key may have reached, only
        by a constant name (which check_name checks): one hop by a caller-chosen name, then public names only."""
        if base.reached and not constant:
            self.flag(
                node, "template.dynamic_attribute", "a computed key on a value a data key may have reached (any attribute of an object)"
            )
        for special in sorted(base.special & GLOBAL_VALUES):
            self.flag(node, "template.global_object", f"access through the global {special}")
        if "self" in base.special and name not in self.blocks:
            self.flag(node, "template.self", "access through self, the template reference")

    def getattr(self, node: Any, base: Value, name: str) -> Value:
        self.check_name(node, name, "access to")
        self.check_base(node, base, name)
        if "loop" in base.special and name in LOOP_NUMBERS:
            return NUMBER
        if "loop" in base.special:  # previtem, nextitem, cycle, changed: the items of the loops
            return self.env.get("\0items", EMPTY).join(DATA)
        out = replace(base.contents(), num=None, size=None, sources=base.sources)  # a namespace field: the namespace's size
        if any(s.startswith("macro:") for s in base.special):  # a macro's name, arguments ...: template strings
            out = replace(out, computed=True, noattr=False)
        kept = out.special - {"self", "loop"} if not base.special & GLOBAL_VALUES else out.special  # a namespace field may hold a macro
        return replace(out, special=kept | ({FORMAT} if name in self.format_methods else set()))

    def key_names(self, node: Any, key: Value, how: str, dotted: bool = False) -> None:
        """Check every name a key or attribute argument may be; a computed one is refused."""
        if key.noattr and not dotted:
            return
        for s in sorted(key.strs):
            for segment in re.split(r"[.,]", s) if dotted else [s]:  # sort(attribute='a,b.c'): several paths
                self.check_name(node, segment, how)
        if key.computed:
            self.flag(node, "template.dynamic_attribute", f"{how} a name the template computes at render time")
        if key.reached:
            self.flag(node, "template.dynamic_attribute", f"{how} a value a data key may have reached")
        for special in key.special:
            self.flag(node, "template.dynamic_attribute", f"{how} a name taken from {special.split(':')[-1]}")

    def getitem(self, node: Any) -> Value:
        n = self.n
        base = self.ev(node.node)
        if isinstance(node.arg, n.Slice):
            self.ev(node.arg)
            parts = [
                p.value if isinstance(p, n.Const) and isinstance(p.value, int) else None
                for p in (node.arg.start, node.arg.stop, node.arg.step)
            ]
            exact = all(p is not None or q is None for p, q in zip(parts, (node.arg.start, node.arg.stop, node.arg.step), strict=True))
            if exact and (parts[2] or 1) != 0:
                sliced = frozenset(s[slice(*parts)] for s in base.strs)
                return replace(base, strs=base.strs | sliced, noattr=base.noattr and all(not IDENTIFIER.match(s) for s in sliced)).widened()
            return replace(base, computed=base.computed or bool(base.strs), noattr=False)
        key = self.ev(node.arg)
        self.key_names(node, key, "subscript by")
        self.check_base(node, base, None, constant=key.noattr or not (key.data or key.computed or key.reached or key.special))
        out = replace(base.contents(), num=None, size=None)
        out = replace(
            out, special=out.special & {FORMAT} | ({FORMAT} if key.strs & set(self.format_methods) or key.computed or key.data else set())
        )
        if key.data and not key.noattr:  # the lookup may fall back to getattr(base, <data>)
            out = replace(out, reached=True)
        return out

    def args(self, node: Any) -> list[Value]:
        values = [self.ev(a) for a in node.args] + [self.ev(k.value) for k in node.kwargs]
        for dyn in (node.dyn_args, node.dyn_kwargs):
            if dyn is not None:
                values.append(self.ev(dyn))
        return values

    def call(self, node: Any) -> Value:
        n = self.n
        args = self.args(node)
        everything = EMPTY
        for a in args:
            everything = everything.join(a)
        kwnames = frozenset(k.key for k in node.kwargs)
        if isinstance(node.node, n.Getattr):
            receiver = self.ev(node.node.node)
            method = node.node.attr
            held = self.getattr(node.node, receiver, method)
            self.call_callables(node, held, args, everything)  # a namespace field or item may hold a macro or caller
            return self.method(node, receiver, method, args, everything)
        callee = self.ev(node.node)
        if isinstance(node.node, n.Name) and node.node.name in self.table.attribute_callables and node.node.name not in self.assigned:
            self.flag(node, "template.dynamic_attribute", f"{node.node.name}() takes attribute names as strings")
            for arg in node.args[1:2]:
                key = self.ev(arg)
                self.key_names(node, key, f"{node.node.name}() with", dotted=True)
                if key.data and not key.noattr:
                    self.flag(node, "template.dynamic_attribute", f"{node.node.name}() with an attribute name computed at render time")
        if callee.reached:
            self.flag(node, "template.dynamic_attribute", "a call of a value a computed key may have reached")
        self.call_callables(node, callee, args, everything)
        if "range" in callee.special:
            return self.range(node, args)
        if callee.special & {"dict", "namespace", "cycler", "joiner"}:
            return replace(
                everything.held(),
                strs=everything.strs | kwnames,
                noattr=everything.noattr and not any(IDENTIFIER.match(k) for k in kwnames),
                num=None,
                size=None,
                container=True,
            )
        if "lipsum" in callee.special:
            size = 1
            for a in args:
                size = _mul(size, max(a.num or 1, 1))
            if size > self.limits["max_repeat_chars"]:
                self.flag(
                    node, "template.repetition", f"lipsum of about {_count(size)} words (more than {self.limits['max_repeat_chars']:,})"
                )
            return Value(computed=True)
        if callee.special & {"caller", "loop"} or any(s.startswith("macro:") for s in callee.special):
            return Value(computed=True, data=everything.data)  # what a macro renders
        # a callable of the render context (raise_exception, strftime_now ...) or a value (a method taken earlier)
        if not (isinstance(node.node, n.Name) and node.node.name not in self.assigned):  # it may be any macro or caller
            for info in self.macros.values():
                for pname in info.params:
                    self.bind(pname, everything.contents())
            for pname in self.callblock_params:
                self.bind(pname, everything.contents())
            self.bind("\0args", everything.contents())
        made = DATA.join(everything).join(callee.contents())
        return replace(
            made,
            special=frozenset(),
            noattr=False,
            num=None,
            size=None,
            computed=made.computed or bool(made.strs),
            sources=frozenset(),
            doubled=frozenset(),
        )

    def call_callables(self, node: Any, callee: Value, args: list[Value], everything: Value) -> None:
        """Bind a call's arguments to every macro, caller or recursive loop the callee may be."""
        if FORMAT in callee.special:
            self.flag(
                node, "template.format", "a call of str.format or str.format_map (or of what may be one): format fields reach attributes"
            )
        for name in (s for s in callee.special if s.startswith("macro:")):
            self.bind_call(node, self.macros[name[6:]], args)
        if "caller" in callee.special:
            for pname in self.callblock_params:
                self.bind(pname, everything)
        if "loop" in callee.special:
            self.bind("\0loop", everything.contents())
            self.record_call(node, "\0loop", self.structural(node, loop=True))

    def bind_call(self, node: Any, info: MacroInfo, args: list[Value]) -> None:
        positional = args[: len(node.args)]
        for pname, value in zip(info.params, positional, strict=False):
            self.bind(pname, value)
        for kw in node.kwargs:
            self.bind(kw.key if kw.key in info.params else "\0args", self.ev(kw.value))
        for extra in positional[len(info.params) :]:
            self.bind("\0args", extra)
        if node.dyn_args is not None or node.dyn_kwargs is not None:
            spread = args[-1]
            for pname in info.params:
                self.bind(pname, spread.contents())
            self.bind("\0args", spread.contents())
        self.record_call(node, info.name, self.structural(node, info=info))

    def record_call(self, node: Any, callee: str, structural: bool) -> None:
        if self.report:
            site = self.macro_stack[-1] if self.macro_stack else self.top
            site.calls.append((callee, self.factor, structural, getattr(node, "lineno", 1) or 1))

    def structural(self, node: Any, info: MacroInfo | None = None, loop: bool = False) -> bool:
        """Whether a call passes a part of what the caller was given: an item or attribute of a parameter,
        or the variable of a loop over one (recursion that descends into its argument ends with the data)."""
        n = self.n
        if loop:
            owners = {x.name for x in _all(self.loop_stack[-1][0].target) if isinstance(x, n.Name)} if self.loop_stack else set()
        else:
            current = self.macro_stack[-1] if self.macro_stack else None
            owners = set(current.params) if current else set()
        if not owners:
            return False
        parts = self.parts.get(current.name, set()) if not loop and current else set()
        parts = parts | {
            name
            for loop_node, roots in self.loop_stack
            if roots & (owners | parts)
            for name in (x.name for x in _all(loop_node.target) if isinstance(x, n.Name))
        }
        return any(_is_part(arg, owners, parts, n) for arg in [*node.args, *(k.value for k in node.kwargs)])

    def method(self, node: Any, receiver: Value, method: str, args: list[Value], everything: Value) -> Value:
        if method in MUTATING_METHODS:
            root, _ = _root(node.node.node, self.n)
            if root is not None and any(root in roots for _, roots in self.loop_stack):
                self.flag(node, "template.loop_growth", f"{method}() grows the list a loop runs over")
        if method in ADDING_METHODS:  # the container may be held by any variable (aliases): each may now hold these
            added = replace(everything, strs=everything.strs | frozenset(k.key for k in node.kwargs)).held()
            self.bind(HEAP, added)  # read back by every container or data name (``name``): linear, not one bind per name
            root, _ = _root(node.node.node, self.n)
            if root is not None:
                self.bind(root, added)
        if method in PADDING_METHODS:
            self.check_width(node, args, f"{method}()")
        spec = METHODS.get(method)
        if spec is not None and spec.repeats:
            self.check_inserted(node, spec.repeats, f"{method}()")
        if method == "replace":
            made = self.string_op(receiver, method, node.args, args, bool(node.kwargs or node.dyn_args or node.dyn_kwargs))
            return self.check_text(node, self.replaced(made, receiver, node.args, node.kwargs))
        if method in PURE_METHODS:
            return self.string_op(receiver, method, node.args, args, bool(node.kwargs or node.dyn_args or node.dyn_kwargs))
        if method in ITEM_METHODS:
            out = receiver.contents().join(everything) if method in ("get", "pop", "setdefault") else receiver.contents()
            out = replace(out, container=out.container or method in ("items", "keys", "values", "copy"))
            return replace(
                out, special=frozenset(), noattr=False, num=None, size=None, data=out.data or not (out.strs or out.computed or out.reached)
            )
        built = receiver.join(everything)
        return Value(
            strs=built.strs,
            data=built.data,
            computed=built.computed or bool(built.strs) or built.data and bool(everything.strs) or built.reached,
            reached=built.reached,
        )

    def string_op(self, receiver: Value, method: str, arg_nodes: list[Any], args: list[Value], keywords: bool) -> Value:
        """A str method on a value: exact on constant strings with constant arguments; on data, data (when the
        method only takes parts of it); else a computed string. Items of a container keep their strings."""
        n = self.n
        constant_args = not keywords and all(
            isinstance(a, n.Const) and isinstance(a.value, (str, int)) and not isinstance(a.value, bool) for a in arg_nodes
        )
        made: set[str] = set()
        exact = constant_args and not receiver.computed and not receiver.reached
        if exact:
            for s in receiver.strs:
                try:
                    result = getattr(s, method)(*[a.value for a in arg_nodes])
                except (TypeError, ValueError):
                    continue
                made.update([result] if isinstance(result, str) else [x for x in result if isinstance(x, str)])
        preserving = method in DATA_PRESERVING and not any(a.strs or a.computed for a in args if method in ("replace",))
        computed = receiver.computed or (not exact and bool(receiver.strs)) or (receiver.data and not preserving)
        out = replace(receiver.contents(), num=None, size=None, sources=frozenset(), doubled=frozenset())
        makes_list = method in ("split", "rsplit", "splitlines", "partition", "rpartition")
        return replace(
            out,
            strs=out.strs | frozenset(made),
            computed=computed,
            noattr=out.noattr and not any(IDENTIFIER.match(s) for s in made) and not computed,
            container=out.container or makes_list,
        ).widened()

    def range(self, node: Any, args: list[Value]) -> Value:
        bounds = [a.num for a in args[:2]]
        size = None if any(b is None for b in bounds) else sum(b or 0 for b in bounds)
        if (
            len(args) >= 3
            and size is not None
            and isinstance(node.args[2], self.n.Const)
            and isinstance(node.args[2].value, int)
            and node.args[2].value
        ):
            size = size // abs(node.args[2].value) + 1
        if any(a.grows and a.num == CAP for a in args) or (size is not None and size > self.limits["max_loop_iterations"]):
            self.flag(
                node, "template.loop_bound", f"range of {_count(size or CAP)} items (more than {self.limits['max_loop_iterations']:,})"
            )
        return Value(noattr=True, size=size, item_size=NUMBER_CHARS)

    def filter(self, node: Any, value: Value) -> Value:  # noqa: C901 - one case per family of filters
        n = self.n
        name = node.name
        args = self.args(node)
        everything = EMPTY
        for a in args:
            everything = everything.join(a)
        if (
            name == "attr"
            or (node.dyn_args is not None or node.dyn_kwargs is not None)
            and (FILTERS.get(name) is not None and FILTERS[name].attribute is not None)
        ):
            for dyn in (node.dyn_args, node.dyn_kwargs):  # names spread from a list or dict: each may be one
                if dyn is not None:
                    spread = self.ev(dyn).contents()
                    self.key_names(node, spread, f"the {name} filter with", dotted=True)
                    if spread.data and not spread.noattr:
                        self.flag(node, "template.dynamic_attribute", f"the {name} filter with names computed at render time")
        if name == "attr":
            if node.args:
                self.key_names(node, self.ev(node.args[0]), "the attr filter with", dotted=False)
                if self.ev(node.args[0]).data and not self.ev(node.args[0]).noattr:
                    self.flag(node, "template.dynamic_attribute", "the attr filter with a name computed at render time")
            names = self.ev(node.args[0]).strs if node.args else frozenset()
            self.check_base(node, value, None, constant=bool(node.args) and isinstance(node.args[0], n.Const))
            return replace(
                value.contents(),
                special=frozenset([FORMAT]) if names & set(self.format_methods) else frozenset(),
                noattr=False,
                num=None,
                size=None,
            )
        attribute_args = self.attribute_arguments(node)
        if attribute_args:
            self.check_base(node, value, None)
            for arg in attribute_args:
                key = self.ev(arg)
                if key.strs & set(self.format_methods):
                    value = replace(value, special=value.special | {FORMAT})
                self.key_names(node, key, f"the {name} filter with", dotted=True)
                if key.data and not key.noattr:
                    self.flag(node, "template.dynamic_attribute", f"the {name} filter with an attribute name computed at render time")
        if name in PADDING_FILTERS:
            self.check_width(node, args, f"the {name} filter")
        spec = FILTERS.get(name)
        if spec is not None and spec.repeats:
            self.check_inserted(node, spec.repeats, f"the {name} filter")
        if name == "format":
            self.check_printf(node, value)
        if name in STRING_FILTERS:
            return self.string_op(
                replace(value, special=frozenset()),
                STRING_FILTERS[name],
                node.args,
                args,
                bool(node.kwargs or node.dyn_args or node.dyn_kwargs),
            )
        if name == "reverse":
            made = frozenset(s[::-1] for s in value.strs)
            proven = value.noattr and not value.computed and not value.data  # a proof by prefix does not survive reversal
            return replace(
                value, strs=value.strs | made, special=frozenset(), noattr=proven and not any(IDENTIFIER.match(s) for s in made)
            ).widened()
        if name in NUMBER_FILTERS:
            num = None
            if name == "length" and value.size is not None and not value.data:
                num = value.size
            elif name in ("int", "float", "abs", "round") and value.num is not None:
                num = value.num
            elif name == "int":
                ints = [int(s) for s in value.strs if s.strip().lstrip("+-").isdigit() and len(s) < 30]
                num = max(map(abs, ints)) if ints else None
            return Value(noattr=True, num=num, grows=value.grows)
        if name == "tojson":
            return Value(
                strs=frozenset(["true", "false", "null"]), data=value.data or value.computed or bool(value.strs)
            )  # quoted, bracketed, a number or a JSON name
        if name == "map" and node.args:  # applies a filter by name: its result is not enumerated
            return replace(
                value, computed=value.computed or bool(value.strs) or value.data, noattr=False, special=frozenset(), num=None, size=None
            )
        if name in ITEM_FILTERS:
            out = value.join(everything) if name in HOLDS_ARGS else value
            if name in ("first", "last", "random", "min", "max"):
                out = out.contents()
            strs = out.strs | (frozenset(c for s in out.strs for c in {s[:1], s[-1:]}) if name in ("first", "last") else frozenset())
            if name == "reverse":
                strs |= frozenset(s[::-1] for s in out.strs)
            makes_list = name not in (
                "first",
                "last",
                "random",
                "min",
                "max",
                "safe",
                "e",
                "escape",
                "forceescape",
                "string",
                "default",
                "d",
                "sum",
            )
            return replace(
                out, strs=strs, noattr=out.noattr and name not in ("first", "last"), container=out.container or makes_list
            ).widened()
        # join, replace, format, indent, truncate, ... : a string the scanner does not enumerate
        built = value.join(everything)
        if name == "join" and not node.args and not node.kwargs and not built.strs:
            text = Value(data=built.data, reached=built.reached, computed=built.computed)
        else:
            text = Value(strs=built.strs, data=built.data, computed=built.computed or bool(built.strs) or built.data, reached=built.reached)
        grown = replace(text, sources=_union([value, *args]), doubled=value.doubled | _overlap([value, *args]))
        if name == "join":
            return self.check_text(node, replace(grown, size=self.joined_size(value, node)))
        if name == "replace":
            return self.check_text(node, self.replaced(grown, value, node.args, node.kwargs))
        if name == "format":
            return self.check_text(node, replace(grown, size=_sum_sizes([value, *args])))
        return grown

    def attribute_arguments(self, node: Any) -> list[Any]:
        """A filter's arguments that name attributes (the allowlist table's ``attribute`` slot, by position or
        keyword), and, for ``map``, those of the filter it applies (``map('attr', name)``, ``map('sum', name)``)."""
        spec = FILTERS.get(node.name)
        out = slot_arguments(node.args, node.kwargs, spec.attribute) if spec and spec.attribute else []
        if spec and spec.filter_arg is not None and len(node.args) > spec.filter_arg:
            applied = self.ev(node.args[spec.filter_arg])
            if applied.computed or applied.data or applied.reached:
                self.flag(node, "template.dynamic_attribute", "map with a filter name computed at render time")
            for name in applied.strs:
                inner = FILTERS.get(name)
                if inner is not None and inner.attribute is not None:
                    rest = node.args[spec.filter_arg + 1 :]
                    out.extend(slot_arguments(rest, [k for k in node.kwargs if k.key != "attribute"], inner.attribute))
        return out

    # ------------------------------------------------------------------ string building
    def concat(self, parts: list[Value], literal_parts: list[Any] | None = None) -> Value:
        """``~``: every product of the parts' constants when all parts are constants, else computed; never an
        attribute name when a constant part holds a non-identifier character."""
        n = self.n
        noattr = any(isinstance(p, n.Const) and isinstance(p.value, str) and NON_IDENTIFIER.search(p.value) for p in literal_parts or [])
        noattr = noattr or any(p.strs and not p.data and not p.computed and all(NON_IDENTIFIER.search(s) for s in p.strs) for p in parts)
        noattr = noattr or _names_no_attribute(_affixes(parts), _affixes(parts[::-1], reverse=True))
        exact = all(not p.data and not p.computed and not p.reached and p.strs and not (p.num is not None) for p in parts)
        out = EMPTY
        for p in parts:
            out = out.join(p)
        strs = out.strs
        products: frozenset[str] = frozenset([""])
        if exact:
            for p in parts:
                products = frozenset(a + b for a in products for b in p.strs)
                if len(products) > MAX_STRS:
                    exact = False
                    break
        if exact:
            strs = products
        size = None if any(p.size is None and (p.data or p.computed) for p in parts) else sum(p.size or 0 for p in parts)
        seen: set[str] = set()
        doubled: set[str] = set()
        for p in parts:
            doubled |= seen & p.sources
            seen |= p.sources
        return Value(
            sources=frozenset(seen),
            doubled=frozenset(doubled) | out.doubled,
            strs=strs,
            data=out.data,
            computed=not exact and bool(out.strs or out.computed or out.num is not None or out.data and len(parts) > 1) or out.computed,
            reached=out.reached,
            noattr=bool(noattr),
            size=size,
        ).widened()

    def add(self, node: Any) -> Value:
        left, right = self.ev(node.left), self.ev(node.right)
        both_numbers = (
            left.noattr
            and right.noattr
            and not left.strs
            and not right.strs
            and not left.data
            and not right.data
            and left.size is None
            and right.size is None
        )
        if both_numbers:
            num = None if left.num is None or right.num is None else min(left.num + right.num, CAP)
            return Value(
                noattr=True,
                num=num if num is not None else _max(left.num, right.num),
                grows=left.grows or right.grows,
                sources=left.sources | right.sources,
                doubled=left.doubled | right.doubled | (left.sources & right.sources),
            )
        if left.size is not None and right.size is not None and not (left.strs or right.strs):  # list + list
            return replace(
                left.join(right),
                size=min(left.size + right.size, CAP),
                doubled=left.doubled | right.doubled | (left.sources & right.sources),
            )
        return self.concat([left, right], [node.left, node.right])

    def mul(self, node: Any) -> Value:
        n = self.n
        left, right = self.ev(node.left), self.ev(node.right)
        literal = isinstance(node.left, n.Const) and isinstance(node.right, n.Const)
        grows = not literal and (left.num is not None and right.num is not None) or left.grows or right.grows
        for seq, count in ((left, right), (right, left)):
            if (seq.strs or seq.size is not None or seq.data or seq.computed) and not (
                seq.noattr and seq.num is not None and seq.size is None and not seq.strs
            ):
                if count.num is not None and count.num > 1:
                    size = _mul(max(seq.size or 1, 1), count.num)
                    self.made(size)
                    if size > self.limits["max_repeat_chars"] or count.num == CAP:
                        self.flag(
                            node,
                            "template.repetition",
                            f"repeats a string or list {_count(count.num)} times (more than {self.limits['max_repeat_chars']:,} items)",
                        )
                    exact = (
                        [s * count.num for s in seq.strs if len(s) * count.num <= MAX_STR_LEN] if not seq.data and not seq.computed else []
                    )
                    return Value(
                        strs=seq.strs | frozenset(exact),
                        data=seq.data,
                        computed=seq.computed or len(exact) < len(seq.strs),
                        reached=seq.reached,
                        size=size,
                        sources=seq.sources | count.sources,
                        doubled=seq.sources | seq.doubled,
                    ).widened()
                return replace(
                    seq,
                    computed=seq.computed or bool(seq.strs),
                    size=None,
                    sources=seq.sources | count.sources,
                    doubled=seq.sources | count.sources,
                )
        num = None if left.num is None or right.num is None else _mul(left.num, right.num)
        literal_factor = isinstance(node.left, n.Const) or isinstance(node.right, n.Const)
        doubled = (
            left.sources | right.sources
            if (left.num is None or left.num > 1 or right.num is None or right.num > 1)
            and not (literal_factor and (left.num or right.num or 0) <= 1)
            else frozenset()
        )
        return Value(
            noattr=True,
            num=num if num is not None else _max(left.num, right.num),
            grows=grows,
            sources=left.sources | right.sources,
            doubled=doubled | left.doubled | right.doubled,
        )

    def mod(self, node: Any) -> Value:
        left, right = self.ev(node.left), self.ev(node.right)
        if left.strs or left.data or left.computed:
            self.check_printf(node, left)
            self.check_width(node, [right], "a printf '*' width")
            made = Value(strs=left.strs | right.strs, data=left.data or right.data, computed=True, reached=left.reached or right.reached)
            held = None if right.size is None or right.item_size is None else _mul(right.size, right.item_size)
            size = None if left.size is None else _sum_sizes([left, right]) if held is None else min(left.size + held, CAP)
            grown = replace(made, sources=_union([left, right]), doubled=left.doubled | right.doubled | _overlap([left, right]), size=size)
            return self.check_text(node, grown)
        return Value(noattr=True, num=left.num if left.num is None or right.num is None else min(left.num, right.num))

    def pow(self, node: Any) -> Value:
        left, right = self.ev(node.left), self.ev(node.right)
        if left.num is not None and right.num is not None:
            bits = CAP if left.num >= CAP and right.num > 1 else right.num * math.log2(max(left.num, 2))
            if bits > self.limits["max_number_bits"]:
                self.flag(
                    node, "template.number", f"a power of about {_count(int(bits))} bits (more than {self.limits['max_number_bits']:,})"
                )
            return Value(noattr=True, num=CAP if bits > 60 else left.num**right.num, grows=True)
        if left.grows or right.grows:
            self.flag(node, "template.number", "a power whose operands grow at render time")
        return Value(noattr=True, grows=True)

    def check_text(self, node: Any, value: Value) -> Value:
        """A string the template builds (``~``, ``+``, join, replace, format, ``%``): a finding past the limit."""
        limit = self.limits["max_repeat_chars"]
        if value.size is not None and value.size > limit:
            self.flag(node, "template.repetition", f"builds a string of {_count(value.size)} characters (more than {limit:,})")
        return value

    def check_inserted(self, node: Any, slots: tuple[tuple[int | None, str], ...], what: str) -> None:
        """A string (or width) that a filter or method puts into its output once per item or line: join's
        separator, replace's new text, indent's prefix, wordwrap's wrapstring, tojson's indent."""
        limit = self.limits["max_inserted_chars"]
        for slot in slots:
            for arg in slot_arguments(node.args, node.kwargs, slot):
                value = self.ev(arg)
                size = value.size if value.strs or value.computed else value.num
                if size is not None and size > limit:
                    self.flag(
                        node, "template.repetition", f"{what} inserts {_count(size)} characters per item or line (more than {limit:,})"
                    )

    def joined_size(self, items: Value, node: Any) -> int | None:
        """The length of ``items|join(d)``: items times (the longest item plus the separator), when known."""
        separator = slot_arguments(node.args, node.kwargs, (0, "d"))
        gap = _text_size(self.ev(separator[0])) if separator else 0
        if items.size is None or items.item_size is None or gap is None:
            return None
        return _mul(items.size, items.item_size + gap)

    def replaced(self, made: Value, receiver: Value, args: list[Any], kwargs: list[Any]) -> Value:
        """``replace(old, new)``: each of the receiver's characters (or occurrences of ``old``) may become ``new``."""
        n = self.n
        old = slot_arguments(args, kwargs, (0, "old"))
        new = slot_arguments(args, kwargs, (1, "new"))
        new_size = _text_size(self.ev(new[0])) if new else None
        if receiver.size is None or new_size is None:
            return replace(made, size=None)
        step = len(old[0].value) if old and isinstance(old[0], n.Const) and isinstance(old[0].value, str) and old[0].value else 1
        return replace(made, size=min(receiver.size + _mul(receiver.size // step + 1, new_size), CAP))

    def made(self, size: int) -> None:
        """Count what a repetition or padding makes, times the loops around it, against the whole template."""
        if self.report:
            macro = self.macro_stack[-1] if self.macro_stack else self.top
            macro.chars = min(macro.chars + _mul(self.factor, size), CAP)

    def check_width(self, node: Any, args: list[Value], what: str) -> None:
        for a in args:
            if a.num is not None:
                self.made(a.num)
            if a.num is not None and a.num > self.limits["max_repeat_chars"]:
                self.flag(
                    node,
                    "template.repetition",
                    f"{what} pads to {_count(a.num)} characters (more than {self.limits['max_repeat_chars']:,})",
                )

    def check_printf(self, node: Any, fmt: Value) -> None:
        for s in fmt.strs:
            for width, precision in PRINTF_WIDTH.findall(s):
                for digits in (width, precision):
                    if digits and (len(digits) > 18 or int(digits) > self.limits["max_repeat_chars"]):
                        self.flag(
                            node,
                            "template.repetition",
                            f"a printf field of {_count(min(int(digits[:19]), CAP))} characters "
                            f"(more than {self.limits['max_repeat_chars']:,})",
                        )

    # ------------------------------------------------------------------ recursion and total cost
    def check_recursion_and_cost(self) -> None:
        graph = {info.name: info for info in [self.top, *self.macros.values()]}
        component = _components(graph)
        for info in graph.values():
            for callee, _, structural, line in info.calls:
                if callee == "\0loop":
                    if not structural:
                        self.findings[
                            (line, "template.recursion", "a recursive loop called with something other than a part of its item")
                        ] = None
                elif callee in graph and component[callee] == component[info.name] and not structural:
                    self.findings[
                        (
                            line,
                            "template.recursion",
                            f"macro {callee} is called back without descending into an argument (recursion unbounded by the data)",
                        )
                    ] = None
        self.check_totals(graph)

    def check_totals(self, graph: dict[str, MacroInfo]) -> None:
        """The whole template's loop iterations and made characters: each macro's own, plus each call's callee
        total times the loops around the call (recursion cycles are counted once: template.recursion bounds
        them). Many calls of a macro with a loop add up, as do many repetitions."""
        totals: dict[str, tuple[int, int]] = {}
        order: list[str] = []
        state: dict[str, int] = {}
        for root in graph:  # post-order over the call graph, without recursion
            stack = [(root, iter(graph[root].calls))]
            state.setdefault(root, 1)
            while stack:
                name, calls = stack[-1]
                for callee, _, _, _ in calls:
                    if callee in graph and callee not in state:
                        state[callee] = 1
                        stack.append((callee, iter(graph[callee].calls)))
                        break
                else:
                    stack.pop()
                    order.append(name)
        for name in order:
            info = graph[name]
            loops, chars = info.loops, info.chars
            for callee, factor, _, _ in info.calls:
                if callee in totals:
                    loops = min(loops + _mul(max(factor, 1), totals[callee][0]), CAP)
                    chars = min(chars + _mul(max(factor, 1), totals[callee][1]), CAP)
            totals[name] = (loops, chars)
        loops, chars = totals.get("", (0, 0))
        if loops > self.limits["max_loop_iterations"]:
            self.findings[
                (
                    1,
                    "template.loop_bound",
                    f"the template's loops run {_count(loops)} times in all (more than {self.limits['max_loop_iterations']:,})",
                )
            ] = None
        if chars > self.limits["max_repeat_chars"]:
            self.findings[
                (
                    1,
                    "template.repetition",
                    f"the template's repetitions make {_count(chars)} characters or items in "
                    f"all (more than {self.limits['max_repeat_chars']:,})",
                )
            ] = None
