"""Strings the template builds (``~``, ``+``, ``*``, ``%``, ``**``, join, replace, format): their constants
followed exactly while they are few, and their lengths bounded through ``set`` chains."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from .abstract import (
    CAP,
    EMPTY,
    MAX_STR_LEN,
    MAX_STRS,
    NON_IDENTIFIER,
    Value,
    _max,
    _mul,
)
from .state import AnalysisState, _overlap, _sum_sizes, _text_size, _union
from .syntax import _affixes, _count, _names_no_attribute
from .table import slot_arguments


class Strings(AnalysisState):
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
