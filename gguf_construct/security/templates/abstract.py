"""The abstract values of the data-flow analysis (``flow``): what an expression may evaluate to, and the
families of filters and methods, read from the one allowlist table (``table``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from .table import allowlist

CAP = 10**18  # saturation of every size and number bound: "unbounded"
MAX_STRS = 64  # constant strings tracked per value before a value counts as computed
MAX_SOURCES = 64  # variables tracked per value; past it, MANY stands for all of them (keeps the analysis linear)
MANY = "\0many"
NUMBER_CHARS = 24  # the longest a number prints as (a float's repr, a 64-bit int)
MAX_STR_LEN = 256
WIDEN_AFTER = 3  # fixpoint rounds before growing bounds are widened
LOOP_NUMBERS = {"index", "index0", "revindex", "revindex0", "length", "depth", "depth0", "first", "last"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
NON_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")
PRINTF_WIDTH = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\d+)?(?:\.(\d+))?")

_A = allowlist()
#: str methods computed exactly on constant strings with constant arguments (else: data stays data when the
#: method only takes parts of its receiver, anything else is computed)
PURE_METHODS = _A.methods_where(flow="pure")
DATA_PRESERVING = PURE_METHODS - _A.methods_where(repeats=((1, "new"),))  # replace can put new text (a private name) into data
STRING_FILTERS = {n: f.method for n, f in _A.filters.items() if f.flow == "string" and f.method}
#: methods whose result is made of the receiver's items (or the call's arguments): no new strings
ITEM_METHODS = _A.methods_where(flow="item")
#: filters whose result is made of the input's items, or is a number or a boolean
ITEM_FILTERS = _A.filters_where(flow="item")
NUMBER_FILTERS = _A.filters_where(flow="number")
PART_FILTERS = _A.filters_where(part=True)  #: their result is made of parts of the input
MUTATING_METHODS = _A.methods_where(grows_receiver=True)
ADDING_METHODS = _A.methods_where(adds=True)  #: they put their arguments in the receiver
PADDING_METHODS = _A.methods_where(pads=True)
PADDING_FILTERS = _A.filters_where(pads=True)  #: their numbers are sizes they allocate


@dataclass(frozen=True)
class Value:
    """What an expression may evaluate to (and, for a container, hold): an over-approximation."""

    strs: frozenset[str] = frozenset()  #: string constants it may be or hold
    data: bool = False  #: may be or hold render-context data (chosen by the renderer's caller, not the template)
    computed: bool = False  #: may be or hold a string the template built that is not enumerated in strs
    reached: bool = False  #: may be an arbitrary attribute of an object (a data key fell back to getattr)
    holds_reached: bool = False  #: may hold (as an item or field) a value that may be reached
    noattr: bool = False  #: never names an attribute: not a string, or a string with a non-identifier character
    special: frozenset[str] = frozenset()  #: global callables, 'self', 'loop', 'caller', 'macro:<name>'
    num: int | None = None  #: a number made from constants: bound on its magnitude (None: data or none)
    size: int | None = None  #: a length made from constants: bound (None: data-sized or unknown)
    grows: bool = False  #: made by multiplying or raising a non-literal: grows when fed back
    sources: frozenset[str] = frozenset()  #: the variables whose values make up this one (its size)
    doubled: frozenset[str] = frozenset()  #: variables this value holds twice (x ~ x, x * 2): exponential if fed back
    container: bool = False  #: may be (or hold) a list, dict or namespace the template built: a mutator may fill it
    item_size: int | None = None  #: a container's items are strings or numbers at most this long (None: unknown)

    def join(self, other: Value) -> Value:
        if self is other:
            return self
        return Value(
            self.strs | other.strs,
            self.data or other.data,
            self.computed or other.computed,
            self.reached or other.reached,
            self.holds_reached or other.holds_reached,
            self.noattr and other.noattr,
            self.special | other.special,
            _max(self.num, other.num),
            _max(self.size, other.size),
            self.grows or other.grows,
            self.sources | other.sources,
            self.doubled | other.doubled,
            self.container or other.container,
            _max(self.item_size, other.item_size) if self.item_size is not None and other.item_size is not None else None,
        )

    def widened(self) -> Value:
        if len(self.sources) > MAX_SOURCES or len(self.doubled) > MAX_SOURCES:
            many = frozenset([MANY])
            return replace(self, sources=many, doubled=many if self.doubled else frozenset()).widened()
        if len(self.strs) > MAX_STRS or any(len(s) > MAX_STR_LEN for s in self.strs):
            return replace(self, strs=frozenset(s for s in self.strs if len(s) <= 8), computed=True)
        return self

    def contents(self) -> Value:
        """What an item, attribute or element of this value may be (the flat model: a value stands for its
        items too); may be a string whatever the container is."""
        inner = self.reached or self.holds_reached  # an item keeps its specials: a macro or caller kept in a list is one
        return replace(self, reached=inner, holds_reached=inner, sources=frozenset(), doubled=frozenset())

    def held(self) -> Value:
        """This value as an item of a container or a namespace field."""
        return replace(self, reached=False, holds_reached=self.reached or self.holds_reached)


FORMAT = "\0format"  # special: may be a str.format or str.format_map method
GLOBAL_VALUES: set[str] = set()  # filled from the table: the global callables an element may still be
EMPTY = Value(noattr=True)
DATA = Value(data=True)
NUMBER = Value(noattr=True)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _mul(a: int, b: int) -> int:
    return min(a * b, CAP) if a and b else 0


def const(v: Any) -> Value:
    if isinstance(v, str):
        return Value(strs=frozenset([v]), noattr=not IDENTIFIER.match(v), size=len(v))
    if isinstance(v, bool) or v is None:
        return NUMBER
    if isinstance(v, int):
        return Value(noattr=True, num=min(abs(v), CAP))
    if isinstance(v, float):
        return Value(noattr=True, num=min(int(abs(v)), CAP) if math.isfinite(v) else CAP)
    if isinstance(v, (tuple, list)):
        out = Value(noattr=True, size=len(v))
        for item in v:
            out = out.join(replace(const(item), size=None))
        return replace(out, size=len(v))
    return Value(computed=True)


@dataclass
class MacroInfo:
    name: str
    params: list[str]
    node: Any
    #: call sites inside: (callee macro, loop factor at the site, structural?, line)
    calls: list[tuple[str, int, bool, int]] = field(default_factory=list)
    loops: int = 0  #: loop iterations its own loops run, summed (constant trip counts, per call)
    chars: int = 0  #: characters or items its own repetitions and paddings make, summed (per call)
