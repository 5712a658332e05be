"""The documentation site's pages as the build renders their Markdown: the generated blocks expanded by the same
hook MkDocs runs (docs/hooks/generated.py), without needing MkDocs."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

from conftest import ROOT

DOCS = ROOT / "docs"


@cache
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hook_generated", DOCS / "hooks" / "generated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def page(rel_path: str) -> str:
    """The Markdown of ``docs/<rel_path>`` with its generated blocks filled in."""
    return hook().expand((DOCS / rel_path).read_text(encoding="utf-8"))


def pages() -> list[Path]:
    """Every page of the site (docs/**/*.md; the hooks folder holds code, not pages)."""
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)
