"""Expressions of the data-flow analysis: constants, names, containers, attribute and item access (with the
checks of every attribute name and subscript key), tests, conditionals and operators."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .abstract import (
    CAP,
    DATA,
    EMPTY,
    FORMAT,
    GLOBAL_VALUES,
    IDENTIFIER,
    LOOP_NUMBERS,
    NUMBER,
    Value,
    _max,
    const,
)
from .state import HEAP, AnalysisState, _overlap, _text_size, _union


class Expressions(AnalysisState):
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
