"""Calls in the data-flow analysis: macros, callers and recursive loops (their arguments bound, their call
graph recorded), Jinja2's globals, methods of strings, lists and dicts, and ``range``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .abstract import (
    ADDING_METHODS,
    CAP,
    DATA,
    DATA_PRESERVING,
    EMPTY,
    FORMAT,
    IDENTIFIER,
    ITEM_METHODS,
    MUTATING_METHODS,
    NUMBER_CHARS,
    PADDING_METHODS,
    PURE_METHODS,
    MacroInfo,
    Value,
    _mul,
)
from .state import HEAP, METHODS, AnalysisState
from .syntax import _all, _count, _is_part, _root


class Calls(AnalysisState):
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
        makes_list = method in ("split", "rsplit", "splitlines", "partition", "rpartition")
        # a string from a string: no longer, or three characters per character for a case change ('ß'.upper() is 'SS')
        grows = 3 if method in ("upper", "lower", "title", "capitalize", "swapcase", "casefold") else 1
        size = None if makes_list or receiver.size is None or method == "replace" else min(receiver.size * grows, CAP)
        out = replace(receiver.contents(), num=None, size=size, sources=frozenset(), doubled=frozenset())
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
