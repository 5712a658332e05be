"""Helpers every format's strategies share."""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

__all__ = ["draw_examples"]

T = TypeVar("T")


def draw_examples(strategy: st.SearchStrategy[T], n: int, *, seed_value: Any = 0) -> list[T]:
    """``n`` values drawn from ``strategy`` outside a test, reproducibly for a given ``seed_value`` (seed corpora
    for fuzzers, files for a differential run). Only the generation phase runs: nothing is shrunk or stored."""
    out: list[T] = []

    @seed(seed_value)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: T) -> None:
        out.append(value)

    collect()
    return out[:n]
