"""The reference readers as the tests use them: the fuzzer's adapters (:mod:`gguf_construct.fuzzing.adapters`),
without dequantized digests (the tests check values their own way), ggml's refusal as None, our reader loading
leniently, and a view without the tensor shapes ggml does not report."""

from __future__ import annotations

from gguf_construct.fuzzing.adapters import read_ggml, read_gguf_py, read_ours

__all__ = ["ORACLE_PINS", "ggml_read", "gguf_py_read", "known_behaviour", "ours", "shapeless"]

# The oracle versions the assertions were written against (pinned in pyproject's `test` extra).
ORACLE_PINS = {"gguf": "0.19.0", "ggml-python": "0.0.45", "safetensors": "0.8.0", "mlx": "0.32.4"}


def known_behaviour(dist: str, what: str) -> str:
    """An assertion message for a check of an oracle's known bug or limit: names the version it was seen in and
    the installed one, so that an upgrade that fixes it fails with a clear message."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(dist)
    except PackageNotFoundError:
        installed = "not installed"
    return f"{dist} {ORACLE_PINS[dist]} {what}; installed {dist} is {installed}: if it changed, update docs/findings.md and this test"


def ours(path):
    return read_ours(str(path), strict=False, dequantize=False)


def gguf_py_read(path):
    return read_gguf_py(str(path), dequantize=False)


def ggml_read(path):
    """What ggml's C reader sees, or None when it refuses the file."""
    try:
        return read_ggml(str(path), dequantize=False)
    except ValueError as e:
        if str(e).startswith("gguf_init_from_file returned NULL"):
            return None
        raise


def shapeless(view):
    """A view with the tensor shapes left out, as ggml's (gguf_get_* has no getter for them)."""
    return {**view, "tensors": [[n, t, None, o, b] for n, t, _, o, b in view["tensors"]]}
