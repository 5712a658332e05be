"""Shared paths and helpers. The corpus and vectors in ../shared are required: tests fail without them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
VECTORS = SHARED / "vectors" / "ggml"


def _require(path: Path) -> Path:
    assert path.exists(), f"{path} is missing: the tests need ../shared next to the project"
    return path


def manifest() -> dict[str, dict]:
    """corpus/manifest.json by file (relative to corpus/)."""
    with open(_require(CORPUS / "manifest.json"), encoding="utf-8") as f:
        return {e["file"]: e for e in json.load(f)}


def corpus_file(rel_path: str) -> Path:
    """One file by its path relative to corpus/ (the project's tests/data copy when it has one)."""
    return _require(CORPUS / rel_path)


def corpus_files(pattern: str) -> list[Path]:
    files = sorted(_require(CORPUS).glob(pattern))
    assert files, f"no corpus files match {pattern}"
    return files


VALID_GGUF = [p for p in sorted(CORPUS.glob("gguf/*.gguf")) + sorted(CORPUS.glob("generated/*.gguf")) if "inconsistent" not in p.name]
INVALID_GGUF = sorted(CORPUS.glob("corrupt/*.gguf")) + sorted(CORPUS.glob("generated/*inconsistent*.gguf"))


@pytest.fixture(scope="session")
def corpus_manifest() -> dict[str, dict]:
    return manifest()


def rel(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()
