"""The reference readers as the tests use them: the fuzzer's adapters (:mod:`gguf_construct.testing.fuzzing.adapters`),
without dequantized digests (the tests check values their own way), ggml's refusal as None, our reader loading
leniently, and a view without the tensor shapes ggml does not report; and ggml's quantizer (``ggml_quantize``), the
oracle of the quantization tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy

from gguf_construct.testing.fuzzing.adapters import UNKNOWN, read_ggml, read_gguf_py, read_ours

__all__ = ["ggml_quantize", "ggml_read", "gguf_py_read", "llama_logits", "ours", "shapeless"]


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


def ggml_quantize(values: numpy.ndarray, type_id: int, imatrix: numpy.ndarray | None = None) -> bytes:
    """ggml's ``ggml_quantize_chunk`` (ggml-python's C library) on ``values`` shaped ``(n_rows, n_per_row)``; for
    Q8_1 and Q8_K, which it does not quantize, the type's ``from_float_ref`` row quantizer on every row.

    The destination starts zeroed (Q8_K leaves an all-zero block's ``bsums`` unwritten)."""
    import ctypes

    import ggml

    x = numpy.ascontiguousarray(values, dtype=numpy.float32)
    if x.ndim == 1:
        x = x[None]
    n_rows, n_per_row = x.shape
    row_size = ggml.ggml_row_size(type_id, n_per_row)
    dst = (ctypes.c_uint8 * (row_size * n_rows))()
    qw = None
    if imatrix is not None:
        qw_array = numpy.ascontiguousarray(imatrix, dtype=numpy.float32)
        qw = qw_array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    src = x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    if type_id in (9, 15):  # Q8_1, Q8_K: libggml-base exports their reference row quantizers
        ref = getattr(ggml.ggml.lib, "quantize_row_q8_1_ref" if type_id == 9 else "quantize_row_q8_K_ref")
        ref.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        ref.restype = None
        ref(x.ctypes.data, ctypes.addressof(dst), x.size)
        return bytes(dst)
    written = ggml.ggml_quantize_chunk(type_id, src, ctypes.cast(dst, ctypes.c_void_p), 0, n_rows, n_per_row, qw)
    assert written == row_size * n_rows
    return bytes(dst)
