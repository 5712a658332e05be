"""A progress bar for long loops, when it helps: tqdm (the optional ``cli`` extra) on a terminal, else nothing."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], total: int, desc: str, *, unit: str = "item", minimum: int = 2) -> Iterable[T]:
    """``items`` wrapped in a tqdm bar on stderr when stderr is a terminal, tqdm is installed and there are at
    least ``minimum`` of them; ``items`` unchanged otherwise (pipes, logs and tests see no bar)."""
    if total < minimum or not sys.stderr.isatty():
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, total=total, desc=desc, unit=unit, file=sys.stderr)
