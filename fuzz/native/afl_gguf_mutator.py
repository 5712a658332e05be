"""AFL++ custom mutator (Python API, docs/custom_mutator.md of AFL++): gguf-construct's structure-aware mutations.

    AFL_PYTHON_MODULE=afl_gguf_mutator PYTHONPATH=fuzz/native:$PWD afl-fuzz -i SEEDS -o OUT -- ./gguf_afl

Each call of ``fuzz`` makes one mutation from ``gguf_construct.testing.fuzzing.structured``: a parsed file edited and laid
out again with consistent offsets, a file of a named reader-breaker class, or (for input that does not parse) a
byte-level mutation; with ``add_buf`` sometimes a crossover of the two files. AFL++'s own mutations still run
unless ``AFL_CUSTOM_MUTATOR_ONLY=1``.
"""

from __future__ import annotations

import random

from gguf_construct.testing.fuzzing.structured import crossover, mutate_structured

_rng = random.Random(0)
_last = ""


def init(seed: int) -> None:
    global _rng
    _rng = random.Random(seed)


def fuzz(buf: bytearray, add_buf: bytearray | None, max_size: int) -> bytearray:
    global _last
    if add_buf and _rng.random() < 0.1:
        _last = "crossover"
        return bytearray(crossover(bytes(buf), bytes(add_buf), max_size, _rng.randrange(2**32)))
    out, _last = mutate_structured(bytes(buf), _rng, max_size)
    return bytearray(out[:max_size])


def describe(max_description_length: int) -> bytes:
    """A short name for the queue entry made by the last ``fuzz`` call (AFL++ takes bytes)."""
    return "".join(c if c.isalnum() else "_" for c in _last)[:max_description_length].encode()


def deinit() -> None:
    pass
