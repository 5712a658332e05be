"""The llama.cpp build the compute graph follows. llama.cpp's graphs change between builds (a newer one adds
nodes before the first layer, say); ``schema/memory.json``'s ``builds`` lists, per build the rules were checked
against, the graph features that differ, and the planner picks one for the duration of a plan (``following``),
so that the graph builders ask ``feature(name)`` instead of taking the build as a parameter through every call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

from ..shape import memory_table

__all__ = ["DEFAULT", "KNOWN", "current", "feature", "follow", "following"]

#: the build the rules follow unless asked otherwise (llama-cpp-python's, the test extra's)
DEFAULT: str = memory_table().builds["default"]
#: every build the graph knows
KNOWN: tuple[str, ...] = tuple(memory_table().builds["versions"])
_BUILD: ContextVar[str] = ContextVar("llama_cpp_build", default=DEFAULT)


def current() -> str:
    return _BUILD.get()


def feature(name: str, arch: str | None = None) -> bool:
    """Whether the build being followed has the graph feature ``name`` (schema/memory.json ``builds``): for
    every architecture (true), or for those it lists (``arch`` among them)."""
    value = memory_table().builds["versions"][_BUILD.get()].get(name, False)
    return arch in value if isinstance(value, (list, tuple)) else bool(value)  # the table holds lists as tuples


def follow(build: str) -> Token[str]:
    """Follow ``build`` from now on in this context (a test session following its oracle's build); the token
    undoes it (``_BUILD.reset``). ``build`` must be one of ``KNOWN``."""
    if build not in KNOWN:
        raise ValueError(f"llama.cpp build {build[:40]!r} is not one of {', '.join(KNOWN)}")
    return _BUILD.set(build)


@contextmanager
def following(build: str) -> Iterator[None]:
    """Plan the compute graph as ``build`` builds it, inside the block (``build`` must be one of ``KNOWN``)."""
    token = follow(build)
    try:
        yield
    finally:
        _BUILD.reset(token)
