"""The reference readers as the tests use them: the fuzzer's adapters (:mod:`gguf_construct.testing.fuzzing.adapters`),
without dequantized digests (the tests check values their own way), ggml's refusal as None, our reader loading
leniently, and a view without the tensor shapes ggml does not report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy

from gguf_construct.testing.fuzzing.adapters import UNKNOWN, read_ggml, read_gguf_py, read_ours

__all__ = ["ggml_read", "gguf_py_read", "llama_logits", "ours", "shapeless"]


def ours(path):
    """Our view in the readers' common shape: without the byte order, a note of ours that triage reads."""
    view = read_ours(str(path), strict=False, dequantize=False)
    del view["byte_order"]
    return view


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
    """A view with the tensor shapes unknown, as ggml's (gguf_get_* has no getter for them)."""
    return {**view, "tensors": [[n, t, UNKNOWN, o, b] for n, t, _, o, b in view["tensors"]]}


def llama_logits(model_path: str | Path, token_ids: Sequence[int], n_ctx: int = 64) -> numpy.ndarray:
    """llama.cpp's logits (through llama-cpp-python) for the last of ``token_ids``: float32, shape (n_vocab,).
    One thread for both the prompt batch and single tokens (llama-cpp-python's ``n_threads_batch`` defaults to
    the machine's CPU count), so that results do not depend on the machine."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(model_path), n_ctx=n_ctx, logits_all=True, n_threads=1, n_threads_batch=1, verbose=False)
    try:
        llm.eval(list(token_ids))
        return numpy.array(llm.scores[llm.n_tokens - 1], dtype=numpy.float32, copy=True)
    finally:
        llm.close()
