"""Reproducers rerun against a second build: which kinds of failure the two builds share and which tell them apart.

A campaign against one build (a vulnerable one, a variant) leaves reproducers and their ``findings.tsv`` in its
output folder. :func:`compare` runs every reproducer of a failure kind (crash, dos, hang, memory) through another
command (the fixed build), triages its answer the same way and reports, per reproducer, the other build's
signature or that it read the file without failing. A kind *differs* when one of its reproducers fails on the first
build and not in the same way on the second: that file tells the builds apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .findings_file import read_findings
from .runner import target
from .triage import failure

#: The classes a single reader's answer shows (the others need our reader's answer beside it).
FAILURE_CLASSES = ("crash", "dos", "hang", "memory")


@dataclass(frozen=True)
class Comparison:
    """One reproducer: its kind on the first build and what the second build does with it."""

    reproducer: str
    cls: str
    signature: str
    other: str | None  # the second build's signature (reader name blanked), None when it reads the file cleanly

    @property
    def differs(self) -> bool:
        return self.other != _without_reader(self.signature)

    def line(self) -> str:
        verdict = "differs" if self.differs else "same"
        theirs = self.other or "no failure"
        return f"{verdict}: {self.reproducer}: {_without_reader(self.signature)} -> other build: {theirs}"


def _without_reader(signature: str) -> str:
    """``crash/gguf_load/heap-buffer-overflow@f`` as ``crash/*/heap-buffer-overflow@f`` and ``hang/gguf_load`` as
    ``hang/*``: the builds' names differ."""
    return re.sub(r"^([\w-]+)/[^/]+(/|$)", r"\1/*\2", signature)


def reproducers(out: Path) -> list[tuple[str, str, str]]:
    """(file, class, signature) of every failure reproducer in ``out/findings.tsv``."""
    return [(r.reproducer, r.cls, r.signature) for r in read_findings(out / "findings.tsv") if r.cls in FAILURE_CLASSES]


def compare(out: Path, against: str, *, timeout: float = 5.0, memory_mb: int = 2048, guard: str | None = None) -> list[Comparison]:
    """Every failure reproducer of ``out`` through ``against`` (a command, as ``fuzz --against`` takes it)."""
    other = target(against, "ggml", timeout=timeout, memory_mb=memory_mb, guard=guard)
    results = []
    try:
        for name, cls, signature in reproducers(out):
            path = out / name
            if not path.is_file():
                continue
            data = path.read_bytes()
            found = failure(other.receive() if other.send(str(path), data) else other.died(), "other")
            theirs = _without_reader(found.signature) if found is not None and found.cls in FAILURE_CLASSES else None
            results.append(Comparison(name, cls, signature, theirs))
    finally:
        other.close()
    return results


def kinds_that_differ(results: list[Comparison]) -> list[str]:
    """The signatures with at least one reproducer that tells the builds apart."""
    return sorted({r.signature for r in results if r.differs})
