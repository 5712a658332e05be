"""Walks of Jinja2's syntax tree that the analysis needs besides the values: the variable an expression reads
through, the parts of a macro's parameters, the reads that may come from the render context, the call graph's
strongly connected components, and the attribute universe (every attribute name of what a template can hold)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import cache
from typing import Any

from .abstract import CAP, MAX_STRS, PART_FILTERS, MacroInfo, Value


def _affixes(parts: list[Value], reverse: bool = False) -> list[str]:
    """The constant strings a concatenation may start with (or end with): the products of its leading exact
    parts, up to the first part that is not."""
    out = [""]
    for p in parts:
        if p.data or p.computed or p.reached or not p.strs or p.num is not None:
            break
        out = [a + b if not reverse else b + a for a in out for b in p.strs]
        if len(out) > MAX_STRS:
            return [""]
    return out


@cache
def _attribute_universe() -> frozenset[str]:
    """Every attribute name of what a template can hold without a finding: JSON-like data and the template's
    own values, Jinja2's runtime objects, and what one attribute of those may be (types, functions, methods)."""
    import jinja2.runtime
    import jinja2.utils
    import markupsafe

    kinds: list[Any] = [
        str,
        dict,
        list,
        tuple,
        int,
        float,
        bool,
        type(None),
        set,
        range,
        slice,
        type,
        type(len),
        type(_affixes),
        type("".join),
        type(str.join),
        type(dict.__dict__["fromkeys"]),
        type(list.__init__),
        type(object().__str__),
        markupsafe.Markup,
        jinja2.runtime.LoopContext,
        jinja2.runtime.Macro,
        jinja2.runtime.Undefined,
        jinja2.utils.Namespace,
        jinja2.utils.Cycler,
        jinja2.utils.Joiner,
        jinja2.runtime.TemplateReference,
    ]
    return frozenset(name for kind in kinds for name in dir(kind))


def _names_no_attribute(prefixes: list[str], suffixes: list[str]) -> bool:
    """Whether no string starting with one of ``prefixes`` and ending with one of ``suffixes`` names an
    attribute of anything a template can hold (unconstrained ends prove nothing)."""
    if prefixes == [""] and suffixes == [""]:
        return False
    return not any(name.startswith(p) and name.endswith(x) for name in _attribute_universe() for p in prefixes for x in suffixes)


def _grew(old: int | None, new: int | None) -> bool:
    return new is not None and (old is None or new > old)


def _count(n: int) -> str:
    return "unbounded" if n >= CAP else f"{n:,}"


def _all(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(x.iter_child_nodes())


def _root(expr: Any, n: Any) -> tuple[str | None, bool]:
    """The variable an expression reads through (``a`` of ``a.b[0]|items``) and whether it descends into it."""
    descends = False
    while True:
        if isinstance(expr, n.Name):
            return expr.name, descends
        if isinstance(expr, (n.Getattr, n.Getitem)):
            descends = True
            expr = expr.node
        elif isinstance(expr, n.Filter) and expr.node is not None:
            descends = descends or expr.name in PART_FILTERS
            expr = expr.node
        elif isinstance(expr, n.Call) and isinstance(expr.node, n.Getattr) and expr.node.attr in ("items", "values", "keys", "get"):
            descends = True
            expr = expr.node.node
        else:
            return None, False


def _is_part(expr: Any, owners: set[str], parts: set[str], n: Any) -> bool:
    """Whether an expression is a strict part of an owner (a parameter): an item or attribute of it, a
    variable holding one, or a container literal of such parts and constants (one level of wrapping)."""
    if isinstance(expr, (n.Dict, n.List, n.Tuple)):
        items = [x for pair in expr.items for x in (pair.key, pair.value)] if isinstance(expr, n.Dict) else expr.items
        leaves = [x for x in items if not isinstance(x, n.Const)]
        return bool(leaves) and all(_is_part(x, owners, parts, n) and not isinstance(x, (n.Dict, n.List, n.Tuple)) for x in leaves)
    root, descends = _root(expr, n)
    return root is not None and (root in parts or (root in owners and descends))


def _parts(macro: Any, n: Any) -> set[str]:
    """The variables of a macro that hold a strict part of a parameter (set from one, or a loop over one)."""
    owners = {a.name for a in macro.args}
    parts: set[str] = set()
    for _ in range(8):
        before = len(parts)
        for x in _all(macro):
            if isinstance(x, n.Assign) and isinstance(x.target, n.Name) and _is_part(x.node, owners, parts, n):
                parts.add(x.target.name)
            elif isinstance(x, n.For):
                root, _ = _root(x.iter, n)
                if root in owners or root in parts:
                    parts.update(t.name for t in _all(x.target) if isinstance(t, n.Name))
        if len(parts) == before:
            break
    return parts


def _context_reads(tree: Any, n: Any) -> set[int]:
    """The ``Name`` loads where no assignment is certain (a definite-assignment pass in source order: a name
    set in a statement list counts from there on in that list and its nested bodies; loop targets and macro
    arguments count in their bodies). Those reads may take a value from the render context.

    A scope is a chain of frames ``(names, before, parent)``: a name is known in a frame when its first
    assignment in the frame's statement list comes before index ``before`` (binders use ``before`` = inf)."""
    out: set[int] = set()
    Frame = tuple[dict[str, float], float, Any]

    def known(name: str, frame: Frame | None) -> bool:
        while frame is not None:
            names, before, parent = frame
            if names.get(name, math.inf) < before:
                return True
            frame = parent
        return False

    def targets(node: Any) -> list[str]:
        return [t.name for t in _all(node) if isinstance(t, n.Name)]

    stack: list[tuple[Any, Frame | None]] = [(tree, None)]
    while stack:
        node, frame = stack.pop()
        if isinstance(node, n.Name):
            if node.ctx == "load" and not known(node.name, frame):
                out.add(id(node))
            continue
        body_frame = frame
        if isinstance(node, n.For):
            body_frame = (dict.fromkeys(targets(node.target), -1.0), math.inf, frame)
        elif isinstance(node, (n.Macro, n.CallBlock)):
            bound = [a.name for a in node.args] + ([node.name] if isinstance(node, n.Macro) else [])
            body_frame = (dict.fromkeys(bound, -1.0), math.inf, frame)
        elif isinstance(node, n.With):
            body_frame = (dict.fromkeys([x for target in node.targets for x in targets(target)], -1.0), math.inf, frame)
        for field_name, value in node.iter_fields():
            inner = body_frame if field_name == "body" else frame
            if isinstance(value, list) and value and isinstance(value[0], n.Stmt):
                first: dict[str, float] = {}
                for index, stmt in enumerate(value):
                    if isinstance(stmt, (n.Assign, n.AssignBlock)):
                        for name in targets(stmt.target):
                            first.setdefault(name, index)
                    elif isinstance(stmt, n.Macro):
                        first.setdefault(stmt.name, index)
                stack.extend((stmt, (first, index, inner)) for index, stmt in enumerate(value))
            elif isinstance(value, list):
                stack.extend((x, inner) for x in value if isinstance(x, n.Node))
            elif isinstance(value, n.Node):
                stack.append((value, inner))
    return out


def _roots(expr: Any, n: Any) -> set[str]:
    root, _ = _root(expr, n)
    return {root} if root else set()


def _components(graph: dict[str, MacroInfo]) -> dict[str, int]:
    """Strongly connected components of the call graph (Kosaraju, without recursion): two macros in one
    component call each other, a macro calling its own component recurses."""
    edges = {name: [c for c, _, _, _ in info.calls if c in graph] for name, info in graph.items()}
    reverse: dict[str, list[str]] = {name: [] for name in graph}
    for name, callees in edges.items():
        for callee in callees:
            reverse[callee].append(name)
    order: list[str] = []
    seen: set[str] = set()
    for root in graph:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(edges[root]))]
        while stack:
            name, it = stack[-1]
            for callee in it:
                if callee not in seen:
                    seen.add(callee)
                    stack.append((callee, iter(edges[callee])))
                    break
            else:
                stack.pop()
                order.append(name)
    component: dict[str, int] = {}
    for root in reversed(order):
        if root in component:
            continue
        component[root] = len(component)
        label = component[root]
        todo = [root]
        while todo:
            name = todo.pop()
            for caller in reverse[name]:
                if caller not in component:
                    component[caller] = label
                    todo.append(caller)
    return component
