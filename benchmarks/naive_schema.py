"""The naive baseline of bench_read.py: GGUF declared the obvious way with stock construct pieces.

It is the package's spec-readable declaration, :mod:`gguf_construct.formats.gguf.reference` (every array
element goes through ``Switch``, ``PascalString`` and ``Struct``), which tests/formats/test_gguf_reference.py proves
equal to the fast schema; the benchmark keeps this module's name for its imports.
"""

from gguf_construct.formats.gguf.reference import GGUF_REFERENCE as NaiveGGUF

__all__ = ["NaiveGGUF"]
