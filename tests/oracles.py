"""The reference readers as the tests use them: the fuzzer's adapters (:mod:`gguf_construct.fuzzing.adapters`),
without dequantized digests (the tests check values their own way), ggml's refusal as None, our reader loading
leniently, and a view without the tensor shapes ggml does not report."""

from __future__ import annotations

from gguf_construct.fuzzing.adapters import read_ggml, read_gguf_py, read_ours

__all__ = ["ggml_read", "gguf_py_read", "ours", "shapeless"]


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
