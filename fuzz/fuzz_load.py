"""Harness: ``from_bytes(strict=False)`` then every value and tensor view touched; ``strict=True`` under both
profiles, and a file that passes strict loading must dequantize every tensor without any exception.

(``load(path)`` is ``from_bytes`` over a memory map; ``fuzz_dispatch`` goes through real files and ``load``.)
"""

from __future__ import annotations

from common import ContractBreach, expect_format_error, main

from gguf_construct import from_bytes
from gguf_construct.formats.fields import StringArray


def touch(f) -> None:
    """Read every metadata value (string arrays decoded) and every tensor's facts and data view."""
    for field in f.metadata.fields():
        value = field.value
        if isinstance(value, StringArray):
            expect_format_error(value.tolist)
    for name in f.tensors:
        t = f.tensors[name]
        expect_format_error(lambda t=t: (t.shape, t.type, t.nbytes, t.offset))


def test_one(data: bytes) -> int:
    f = expect_format_error(lambda: from_bytes(data, strict=False))
    if f is None:
        return 0
    touch(f)
    produced = 0
    for profile in ("spec", "ggml"):
        strict = expect_format_error(lambda profile=profile: from_bytes(data, strict=True, profile=profile))
        if strict is None or profile == "ggml":
            continue
        for name in strict.tensors:
            t = strict.tensors[name]
            try:
                produced += t.to_numpy().nbytes
            except Exception as e:
                raise ContractBreach(f"tensor {name!r} of a valid file does not dequantize: {e!r}") from e
    return produced


if __name__ == "__main__":
    main(test_one)
