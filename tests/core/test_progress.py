"""The progress bar appears only where it helps: on a terminal, for enough items, with tqdm installed."""

from __future__ import annotations

import io
import sys

from tqdm import tqdm

from gguf_construct.core.progress import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_off_a_terminal_or_for_few_items(monkeypatch):
    items = [1, 2, 3]
    assert progress(items, 3, "x") is items  # pytest's stderr is no terminal
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert progress(items, 3, "x", minimum=8) is items


def test_a_bar_on_a_terminal_passes_every_item_through(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    bar = progress(iter(range(10)), 10, "writing", unit="tensor")
    assert isinstance(bar, tqdm)
    assert list(bar) == list(range(10))
    assert "writing" in term.getvalue() and "10/10" in term.getvalue()
