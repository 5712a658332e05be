"""Harness: dequantization on parsed tensors and on raw blocks.

A GGUF input is parsed (leniently) and every tensor whose bytes are in the file is dequantized in the file's
byte order. Any other input is ``type byte + blocks``: the first byte picks a ggml type, the rest (cut to whole
blocks) is dequantized little-endian, converted to big-endian with ``swap_byte_order`` and dequantized again,
which must give the same bits.
"""

from __future__ import annotations

import numpy as np
from common import ContractBreach, expect_format_error, main

from gguf_construct import dequantize, from_bytes, swap_byte_order
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.quants import SUPPORTED

TYPES = sorted((t for t in GGML_TYPES.values() if t.name in SUPPORTED), key=lambda t: t.id)


def parsed_tensors(data: bytes) -> int:
    f = expect_format_error(lambda: from_bytes(data, strict=False))
    if f is None:
        return 0
    produced = 0
    for name in f.tensors:
        t = f.tensors[name]
        values = expect_format_error(lambda t=t: t.to_numpy() if len(t.data) == t.nbytes else None)
        produced += 0 if values is None else values.nbytes
    return produced


def raw_blocks(data: bytes) -> int:
    t = TYPES[data[0] % len(TYPES)]
    body = data[1 : 1 + (len(data) - 1) // t.type_size * t.type_size]
    little = dequantize(body, t.name, dtype=None)
    big = dequantize(swap_byte_order(body, t.name, "little", "big"), t.name, byte_order="big", dtype=None)
    if little.dtype != big.dtype or not np.array_equal(little.view(np.uint8), big.view(np.uint8)):
        raise ContractBreach(f"{t.name}: little- and big-endian blocks dequantize differently")
    return 2 * little.nbytes + len(body)


def test_one(data: bytes) -> int:
    if data[:4] == b"GGUF":
        return parsed_tensors(data)
    if not data:
        return 0
    return raw_blocks(data)


if __name__ == "__main__":
    main(test_one)
