"""Filters in the data-flow analysis, by the families of the allowlist table: string, item, number, padding
and attribute-taking filters, ``map`` applying a filter by name."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .abstract import (
    EMPTY,
    FORMAT,
    IDENTIFIER,
    ITEM_FILTERS,
    NUMBER_FILTERS,
    PADDING_FILTERS,
    STRING_FILTERS,
    Value,
)
from .state import FILTERS, HOLDS_ARGS, AnalysisState, _overlap, _sum_sizes, _union
from .table import slot_arguments

#: filters whose result is one item of the input, not all of it
PICKING_FILTERS = frozenset({"first", "last", "random", "min", "max"})


class Filters(AnalysisState):
    def filter(self, node: Any, value: Value) -> Value:
        """A filter's value; a result made from its whole input keeps the variables the input is built from (and
        those it holds twice), so that ``[s, s]|tojson`` fed back in a loop is seen doubling."""
        out = self.filter_value(node, value)
        if node.name in NUMBER_FILTERS or node.name in PICKING_FILTERS:
            return out
        return replace(out, sources=out.sources | value.sources, doubled=out.doubled | value.doubled).widened()

    def filter_value(self, node: Any, value: Value) -> Value:  # noqa: C901 - one case per family of filters
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
