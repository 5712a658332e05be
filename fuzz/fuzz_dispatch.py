"""Harness: the generic entry points every format goes through: ``gguf_construct.load(path)`` (``detect()``,
then the registry's loader for GGUF, legacy GGML/GGMF/GGJT, rwkv.cpp, safetensors ...) and ``validate_bytes``.

Each input is written to one scratch file (in /dev/shm when it exists) and loaded leniently and strictly; the
common file protocol (``format``, ``metadata``, ``tensors`` with ``shape``, ``type``, ``nbytes``, ``data``) is
read on whatever loads.
"""

from __future__ import annotations

import os
import tempfile

from common import ContractBreach, expect_format_error, main

from gguf_construct import load
from gguf_construct import validate as validate_bytes
from gguf_construct.cli.report import info_text

SCRATCH = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir(), f"gguf-construct-fuzz-{os.getpid()}.bin")


def touch(f) -> int:
    """Read the common file protocol, the ``info`` report and every small tensor's values; returns the bytes of
    values made (allowed on top of the input's memory budget)."""
    fmt = getattr(f, "format", "gguf")  # the common file protocol; GGUFFile may predate it
    if not isinstance(fmt, str):
        raise ContractBreach(f"format is {fmt!r}")
    for key in list(f.metadata):
        expect_format_error(lambda key=key: f.metadata[key])
    produced = 0
    for name in list(f.tensors):
        t = f.tensors[name]
        expect_format_error(lambda t=t: (t.name, t.shape, t.type, t.nbytes, len(t.data)))
        if (expect_format_error(lambda t=t: t.nbytes) or 0) <= 1 << 16:  # values of degenerate shapes
            values = expect_format_error(lambda t=t: t.to_numpy())
            produced += 0 if values is None else values.nbytes
    expect_format_error(lambda: info_text(f, SCRATCH))
    return produced


def test_one(data: bytes) -> int:
    if os.path.exists(SCRATCH):
        os.unlink(SCRATCH)  # a new inode: maps of the previous input stay valid until they are dropped
    with open(SCRATCH, "wb") as out:
        out.write(data)
    produced = 0
    for strict in (False, True):
        f = expect_format_error(lambda strict=strict: load(SCRATCH, strict=strict))
        if f is not None:
            produced += touch(f)
    issues = expect_format_error(lambda: validate_bytes(data))
    if issues is None or any(i.rule.startswith("internal.") for i in issues):
        raise ContractBreach(f"validate_bytes: {issues}")
    return produced


if __name__ == "__main__":
    import atexit

    atexit.register(lambda: os.path.exists(SCRATCH) and os.unlink(SCRATCH))
    main(test_one)
