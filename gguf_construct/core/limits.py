"""Named resource limits (``schema/limits.json``): one table, adjustable per call and on the command line.

Every reader asks ``limit(name)`` for its bound and raises ``breach(name, ...)``, a ``LimitError`` whose rule is
``limit.<name>``. The active values are a context variable: ``with limits({"nesting": 32}): ...`` (what
``load(path, limits=...)`` does) changes them for that block only; ``set_defaults`` (the CLI's ``--limit``)
changes them for the process.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import cast

from ..errors import LimitError
from . import rules
from .tables import Limit, load_table

__all__ = ["Limit", "TABLE", "breach", "check", "current", "limit", "limits", "parse_assignment", "set_defaults", "show_int"]

#: The table, in file order.
TABLE: dict[str, Limit] = {r.name: r for r in load_table("limits").limits}

_DEFAULTS: dict[str, int] = {name: lim.value for name, lim in TABLE.items()}
_ACTIVE: contextvars.ContextVar[Mapping[str, int]] = contextvars.ContextVar("gguf_construct_limits", default=_DEFAULTS)

#: What the repair path (``delete``, ``set --force``) allows: generous, so that a file our own earlier version
#: (or another writer) made too deep or too large for the default limits can still be opened and fixed.
LENIENT: dict[str, int] = {"nesting": 128}


def _checked(overrides: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(overrides, Mapping):
        raise TypeError(f"limits are a mapping of limit name to value, not {type(overrides).__name__}")
    out = {}
    for name, value in overrides.items():
        if name not in TABLE:
            raise ValueError(f"unknown limit {name!r} (limits: {', '.join(TABLE)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"limit {name} must be an integer >= 0, not {value!r}")
        out[name] = value
    return out


def current() -> Mapping[str, int]:
    """Every limit's active value."""
    return _ACTIVE.get()


def limit(name: str) -> int:
    """One limit's active value."""
    return _ACTIVE.get()[name]


@contextmanager
def limits(overrides: Mapping[str, int] | None) -> Iterator[Mapping[str, int]]:
    """Run a block with some limits changed (None or {} changes nothing)."""
    if not overrides:
        yield current()
        return
    token = _ACTIVE.set({**current(), **_checked(overrides)})
    try:
        yield current()
    finally:
        _ACTIVE.reset(token)


def set_defaults(overrides: Mapping[str, int]) -> None:
    """Change limits for the rest of the process (the command line's ``--limit NAME=VALUE``)."""
    global _DEFAULTS
    _DEFAULTS = {**_DEFAULTS, **_checked(overrides)}
    _ACTIVE.set(_DEFAULTS)


def parse_assignment(text: str) -> tuple[str, int]:
    """``NAME=VALUE`` (the CLI's ``--limit``) as (name, value); ValueError naming the problem."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not value.strip().isascii() or not value.strip().isdigit() or len(value.strip()) > 20:
        raise ValueError(f"--limit wants NAME=VALUE with a whole number, not {text!r}")
    return next(iter(_checked({name: int(value)}).items()))


def breach(name: str, message: str, *, path: str = "", offset: int | None = None) -> LimitError:
    """The LimitError for limit ``name`` (rule ``limit.<name>``), with its value and how to raise it."""
    return cast(
        LimitError,
        rules.rule(f"limit.{name}").error(
            f"{message} (limit {name} = {limit(name)}; raise it with --limit {name}=N)", path=path, offset=offset
        ),
    )


def check(name: str, value: int, what: str, *, path: str = "", offset: int | None = None) -> None:
    """Raise ``breach(name)`` when ``value`` is above the limit. ``value`` is any int: it is never printed
    when it is too long to print (Python refuses int->str beyond 4,300 digits)."""
    bound = limit(name)
    if value > bound:
        raise breach(name, f"{what} is {show_int(value)}", path=path, offset=offset)


def show_int(n: int) -> str:
    """An int for a message: its digits when short, else its size (never a ValueError for a huge int)."""
    if -(10**30) < n < 10**30:
        return str(n)
    return f"a {n.bit_length()}-bit number"
