"""The known-safe subset of Jinja2 that chat templates use, as typed records: the ``allowlist`` of
``schema/template_rules.json`` (one table: every filter, test, method, global, statement and attribute name the
scanner knows, with what each does to the values it is given). Every other module reads its names from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

from ...core.tables import template_rules

#: an argument given by position (counted after the filtered value) or by keyword
Slot = tuple[int | None, str]


@dataclass(frozen=True)
class FilterSpec:
    """One filter: ``flow`` says what its result is made of (string: a str method of the input; item: items of
    the input; number; reverse; tojson; attr; printf; built: a string the scanner does not enumerate)."""

    name: str
    flow: str
    method: str | None = None  #: the str method a ``string`` filter applies
    part: bool = False  #: its result is a part of its input (recursion on it descends into the data)
    pads: bool = False  #: its number arguments are sizes it allocates
    attribute: Slot | None = None  #: the argument that names an attribute (dotted paths allowed)
    test_arg: int | None = None  #: the position of an argument that names a test
    filter_arg: int | None = None  #: the position of an argument that names a filter (``map``)
    repeats: tuple[Slot, ...] = ()  #: string arguments put into the output once per item or line
    holds_args: bool = False  #: its result may hold its arguments (default's value, batch's fill, sum's start)


@dataclass(frozen=True)
class MethodSpec:
    """One method of str, list or dict: ``flow`` is pure (computed exactly on constants), item (made of the
    receiver's items or the arguments) or built (a new string)."""

    name: str
    flow: str
    pads: bool = False
    adds: bool = False  #: puts its arguments into the receiver
    grows_receiver: bool = False  #: appends to a list (a loop over it never ends)
    repeats: tuple[Slot, ...] = ()


@dataclass(frozen=True)
class Allowlist:
    statements: frozenset[str]
    expressions: frozenset[str]
    loader_statements: frozenset[str]
    filters: Mapping[str, FilterSpec]
    tests: frozenset[str]
    methods: Mapping[str, MethodSpec]
    globals: frozenset[str]
    loop_attributes: frozenset[str]
    #: every attribute name a template may use without a finding: data keys, loop attributes and methods
    attributes: frozenset[str]

    def filters_where(self, **wanted: Any) -> frozenset[str]:
        """The filters whose fields have the given values (``flow="item"``, ``pads=True`` ...)."""
        return frozenset(n for n, f in self.filters.items() if all(getattr(f, k) == v for k, v in wanted.items()))

    def methods_where(self, **wanted: Any) -> frozenset[str]:
        return frozenset(n for n, m in self.methods.items() if all(getattr(m, k) == v for k, v in wanted.items()))


def _slot(raw: Any) -> Slot:
    return (raw[0], raw[1])


@cache
def allowlist() -> Allowlist:
    """The allowlist of ``schema/template_rules.json``, read once."""
    raw = template_rules().allowlist
    filters = {
        name: FilterSpec(
            name,
            f["flow"],
            f.get("method"),
            f.get("part", False),
            f.get("pads", False),
            _slot(f["attribute"]) if "attribute" in f else None,
            f.get("test_arg"),
            f.get("filter_arg"),
            tuple(_slot(r) for r in f.get("repeats", ())),
            f.get("holds_args", False),
        )
        for name, f in raw["filters"].items()
    }
    methods = {
        name: MethodSpec(
            name,
            m["flow"],
            m.get("pads", False),
            m.get("adds", False),
            m.get("grows_receiver", False),
            tuple(_slot(r) for r in m.get("repeats", ())),
        )
        for name, m in raw["methods"].items()
    }
    loop = frozenset(raw["loop_attributes"])
    return Allowlist(
        statements=frozenset(raw["statements"]),
        expressions=frozenset(raw["expressions"]),
        loader_statements=frozenset(raw["loader_statements"]),
        filters=MappingProxyType(filters),
        tests=frozenset(raw["tests"]),
        methods=MappingProxyType(methods),
        globals=frozenset(raw["globals"]),
        loop_attributes=loop,
        attributes=frozenset(raw["attributes"]) | loop | frozenset(methods),
    )


def slot_arguments(args: list[Any], kwargs: list[Any], slot: Slot) -> list[Any]:
    """The argument nodes filling one slot of a call: the keyword one, and the positional one at its position."""
    position, keyword = slot
    out = [kw.value for kw in kwargs if kw.key == keyword]
    if position is not None and len(args) > position:
        out.append(args[position])
    return out
