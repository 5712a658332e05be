"""``Issue``: one finding of a validator (rule, message, field path, byte offset, severity), and the two ways
between findings and exceptions: ``Issue.from_error`` (a FormatError as a finding) and ``raise_first`` (the
first error among findings as the FormatError subclass the rule catalogue names)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from .. import errors
from ..core.rules import Rule, error_class

Severity = Literal["error", "warning"]
C = TypeVar("C")


@dataclass(frozen=True)
class Issue:
    """One finding: an 'error' makes the file invalid under the profile, a 'warning' does not. ``rule`` is a
    catalogue id (``gguf_construct.core.rules``); a ``Rule`` given in its place is stored as its id."""

    rule: str
    message: str
    path: str = ""
    offset: int | None = None
    severity: Severity = "error"

    if TYPE_CHECKING:  # what the generated __init__ takes: a catalogue Rule in place of its id

        def __init__(
            self, rule: str | Rule, message: str, path: str = "", offset: int | None = None, severity: Severity = "error"
        ) -> None: ...

    def __post_init__(self) -> None:
        if isinstance(self.rule, Rule):
            object.__setattr__(self, "rule", self.rule.id)

    @classmethod
    def from_error(cls, err: errors.FormatError) -> Issue:
        """The finding a rejection stands for (an error, with the exception's rule, path and offset)."""
        return cls(err.rule, err.message, err.path, err.offset)

    def error(self) -> errors.FormatError:
        """This finding as the FormatError subclass the catalogue names for its rule."""
        return error_class(self.rule)(self.rule, self.message, path=self.path, offset=self.offset)

    def line(self) -> str:
        """One line for people: severity, rule, field, offset, message."""
        where = " at ".join(p for p in (self.path, f"offset {self.offset}" if self.offset is not None else "") if p)
        return f"{self.severity}: [{self.rule}] {where + ': ' if where else ''}{self.message}"


def raise_first(issues: Iterable[Issue]) -> None:
    """Raise the first error among ``issues`` (warnings pass)."""
    for issue in issues:
        if issue.severity == "error":
            raise issue.error()


def parse_then_check(parse: Callable[[], C], check: Callable[[C], list[Issue]]) -> list[Issue]:
    """``check(parse())``; a file the schema cannot read gives one issue, from its FormatError."""
    try:
        parsed = parse()
    except errors.FormatError as e:
        return [Issue.from_error(e)]
    return check(parsed)
