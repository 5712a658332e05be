"""Dequantizing through the block ``Struct`` and through the numpy kernel agree, on block data drawn from
``gguf_construct.testing.strategies`` (the round-trip and validation properties are in test_generated.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import drawn
from hypothesis import HealthCheck, settings

from gguf_construct import dequantize
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.quants import block_struct
from gguf_construct.testing.strategies import TENSOR_TYPES, tensor_data

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


# -- dequantization: block Struct against the numpy kernels ---------------------------------------------------
def quants(name, block):
    """The integer quants of one parsed block, in value order (ggml's ``dequantize_row_*``): low nibbles then
    high nibbles, with the fifth bit from ``qh`` for Q5, minus the type's offset for the symmetric types."""
    if name in ("q8_0", "q8_1"):
        return list(block.qs)
    lo = [b & 0x0F for b in block.qs]
    hi = [b >> 4 for b in block.qs]
    if name in ("q5_0", "q5_1"):
        qh = int.from_bytes(bytes(block.qh), "little")
        lo = [q | (((qh >> j) & 1) << 4) for j, q in enumerate(lo)]
        hi = [q | (((qh >> (j + 16)) & 1) << 4) for j, q in enumerate(hi)]
    offset = {"q4_0": 8, "q5_0": 16}.get(name, 0)
    return [q - offset for q in lo + hi]


def reference(name, block):
    """The values of one block from the fields construct parsed, in float32 arithmetic as ggml computes them."""
    f = np.float32
    if name in ("f32", "f16", "f64", "i8", "i16", "i32", "i64"):
        return [f(block.value)]
    if name == "bf16":
        return [np.array([block.bits << 16], np.uint32).view(np.float32)[0]]
    if name in ("q4_1", "q5_1"):
        return [f(block.d) * f(q) + f(block.m) for q in quants(name, block)]
    return [f(block.d) * f(q) for q in quants(name, block)]


REFERENCE_TYPES = ["f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1"]


@pytest.mark.parametrize("name", REFERENCE_TYPES)
@pytest.mark.parametrize("order", ["little", "big"])
def test_struct_reference_and_kernel_agree(name, order):
    """Blocks parsed by the type's construct Struct and turned into values by ggml's formula equal the
    vectorised kernel's output bit for bit, in both byte orders."""
    declaration = block_struct(name, order)
    size = GGML_TYPES.lookup(name).type_size
    for data in drawn(tensor_data(name, 5, order), 6, seed_value=name + order):
        expected = []
        with np.errstate(all="ignore"):
            for i in range(0, len(data), size):
                expected += reference(name, declaration.parse(data[i : i + size]))
        got = dequantize(data, name, byte_order=order)
        assert np.array_equal(np.array(expected, np.float32).view(np.uint32), got.view(np.uint32)), name


@pytest.mark.parametrize("name", TENSOR_TYPES)
def test_big_endian_blocks_rebuilt_little_endian_dequantize_alike(name):
    """Every type: blocks parsed with the big-endian Struct and built with the little-endian one dequantize, in
    the kernel, to the same bits as the big-endian bytes themselves."""
    big, little = block_struct(name, "big"), block_struct(name, "little")
    size = GGML_TYPES.lookup(name).type_size
    for data in drawn(tensor_data(name, 3, "big"), 3, seed_value=name):
        rebuilt = b"".join(little.build(big.parse(data[i : i + size])) for i in range(0, len(data), size))
        a = dequantize(data, name, byte_order="big", dtype=None)
        b = dequantize(rebuilt, name, dtype=None)
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name
