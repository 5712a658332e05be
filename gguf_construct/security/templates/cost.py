"""What a template makes the renderer do: repetition and padding widths, printf fields, and the whole
template's loop iterations and made characters through the macro call graph, with its recursion checked."""

from __future__ import annotations

from typing import Any

from .abstract import (
    CAP,
    PRINTF_WIDTH,
    MacroInfo,
    Value,
    _mul,
)
from .state import AnalysisState
from .syntax import _components, _count


class Cost(AnalysisState):
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
