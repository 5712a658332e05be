"""The oracle versions the tests' assertions were written against (pinned in pyproject's `test` extra), and the
message for a check of an oracle's known bug or limit, which names them."""

from __future__ import annotations

__all__ = ["ORACLE_PINS", "known_behaviour"]

ORACLE_PINS = {"gguf": "0.19.0", "ggml-python": "0.0.45", "safetensors": "0.8.0", "mlx": "0.32.4", "llama-cpp-python": "0.3.36"}


def known_behaviour(dist: str, what: str) -> str:
    """An assertion message naming the version the behaviour was seen in and the installed one, so that an upgrade
    that changes it fails with a clear message."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(dist)
    except PackageNotFoundError:
        installed = "not installed"
    return f"{dist} {ORACLE_PINS[dist]} {what}; installed {dist} is {installed}: if it changed, update docs/findings.md and this test"
