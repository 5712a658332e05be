"""The state of one template's data-flow analysis (``flow``): the environment of names and their ``Value``s, the
findings, the step budget, and the dynamic scope of the walk. The analysis is split by concern into mixins
(``expressions``, ``calls``, ``filters``, ``strings``, ``cost``) over this class; ``flow.Analysis`` joins them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ...core.tables import TemplateRules
from .abstract import (
    CAP,
    GLOBAL_VALUES,
    MANY,
    NUMBER_CHARS,
    WIDEN_AFTER,
    MacroInfo,
    Value,
)
from .syntax import _all, _context_reads, _grew, _parts
from .table import allowlist

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


class AnalysisState:
    """What every part of the analysis reads and writes."""

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

    # implemented by the mixins that ``flow.Analysis`` puts together
    def visit(self, node: Any) -> None:
        raise NotImplementedError

    def visit_all(self, body: Iterable[Any]) -> None:
        raise NotImplementedError

    def ev(self, node: Any) -> Value:
        raise NotImplementedError

    def args(self, node: Any) -> list[Value]:
        raise NotImplementedError

    def getattr(self, node: Any, base: Value, name: str) -> Value:
        raise NotImplementedError

    def check_base(self, node: Any, base: Value, name: str | None, constant: bool = True) -> None:
        raise NotImplementedError

    def key_names(self, node: Any, key: Value, how: str, dotted: bool = False) -> None:
        raise NotImplementedError

    def string_op(self, receiver: Value, method: str, arg_nodes: list[Any], args: list[Value], keywords: bool) -> Value:
        raise NotImplementedError

    def concat(self, parts: list[Value], literal_parts: list[Any] | None = None) -> Value:
        raise NotImplementedError

    def check_text(self, node: Any, value: Value) -> Value:
        raise NotImplementedError

    def check_inserted(self, node: Any, slots: tuple[tuple[int | None, str], ...], what: str) -> None:
        raise NotImplementedError

    def joined_size(self, items: Value, node: Any) -> int | None:
        raise NotImplementedError

    def replaced(self, made: Value, receiver: Value, args: list[Any], kwargs: list[Any]) -> Value:
        raise NotImplementedError

    def made(self, size: int) -> None:
        raise NotImplementedError

    def check_width(self, node: Any, args: list[Value], what: str) -> None:
        raise NotImplementedError

    def check_printf(self, node: Any, fmt: Value) -> None:
        raise NotImplementedError

    def filter(self, node: Any, value: Value) -> Value:
        raise NotImplementedError

    def call(self, node: Any) -> Value:
        raise NotImplementedError

    def add(self, node: Any) -> Value:
        raise NotImplementedError

    def mul(self, node: Any) -> Value:
        raise NotImplementedError

    def mod(self, node: Any) -> Value:
        raise NotImplementedError

    def pow(self, node: Any) -> Value:
        raise NotImplementedError
