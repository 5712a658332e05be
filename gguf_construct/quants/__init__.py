"""Dequantization of every ggml tensor type with numpy, bit-exact with ggml's C ``to_float``.

- :func:`dequantize` — a tensor's bytes → a flat float32 array (integer/F64 types may keep their dtype)
- :func:`block_struct` — the construct ``Struct`` of a type's block, in either byte order
- :func:`block_dtype` — the numpy structured dtype derived from that declaration
- :func:`swap_byte_order` — a tensor's bytes converted between little- and big-endian
- ``SUPPORTED`` — the names of the types all of the above accept

Imports: ``errors``, ``core`` and this package only (the block codecs know bytes and types, not files).
"""

from .blocks import block_dtype, block_struct
from .dequant import SUPPORTED, dequantize, swap_byte_order

__all__ = ["SUPPORTED", "block_dtype", "block_struct", "dequantize", "swap_byte_order"]
