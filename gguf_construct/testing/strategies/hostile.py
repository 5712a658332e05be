"""Hostile inputs built on purpose: the classes of failure that mutation fuzzing does not reach.

Each ``HOSTILE`` entry makes one crafted input the way an attacker would: thousands of digits where a number or a
name is read, JSON nested 100,000 deep, few bytes that become many Python objects, shapes numpy cannot hold,
degenerate MLX groups, special files. ``make_*`` functions return the file's bytes (or write a small file tree
for Ollama cases); the hypothesis strategies ``huge_digit_strings``, ``deep_json``, ``zero_and_huge_shapes`` draw
variations, and ``fuzz/make_seeds.py`` writes them as seeds for the fuzzing campaign.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

__all__ = [
    "HOSTILE",
    "SPECIAL_FILES",
    "Hostile",
    "deep_json",
    "degenerate_mlx_groups",
    "gguf_raw",
    "ggjt_raw",
    "hostile_bytes",
    "huge_digit_strings",
    "make_special_file",
    "rwkv_raw",
    "safetensors_raw",
    "zero_and_huge_shapes",
]


# -- raw writers: no checks, so that they can write what our own builders refuse ------------------------------
def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def gguf_raw(
    kvs: Sequence[bytes] = (),
    tensors: Sequence[tuple[str | bytes, list[int], int]] = (),
    data: bytes = b"",
    n_kv: int | None = None,
    n_tensors: int | None = None,
) -> bytes:
    """A GGUF v3 file from pre-encoded KV records and (name, dims, ggml type) tensor infos at offset 0, 32, ...;
    ``data`` after the padding."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv))
    for kv in kvs:
        out += kv
    for i, (name, dims, t) in enumerate(tensors):
        out += _s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", t, 32 * i)
    if tensors:
        out += b"\0" * (-len(out) % 32)
    return bytes(out + data)


def kv_u32(key: str, value: int) -> bytes:
    return _s(key) + struct.pack("<II", 4, value)


def kv_f64(key: str, value: float) -> bytes:
    return _s(key) + struct.pack("<Id", 12, value)


def kv_str(key: str, value: str) -> bytes:
    return _s(key) + struct.pack("<I", 8) + _s(value)


def kv_nested(key: str, depth: int, leaves: int = 1) -> bytes:
    """An array of arrays ``depth`` deep (the innermost holds ``leaves`` u8 zeros)."""
    inner = struct.pack("<IQ", 0, leaves) + b"\0" * leaves
    for _ in range(depth - 1):
        inner = struct.pack("<IQ", 9, 1) + inner
    return _s(key) + struct.pack("<I", 9) + inner


def kv_empty_arrays(key: str, n: int) -> bytes:
    """An array of ``n`` empty u8 arrays: 12 bytes each, each a Python container once parsed."""
    return _s(key) + struct.pack("<IIQ", 9, 9, n) + struct.pack("<IQ", 0, 0) * n


def safetensors_raw(header: str | bytes, data: bytes = b"") -> bytes:
    raw = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(raw)) + raw + data


def ggjt_raw(hparams: tuple[int, ...] = (0, 8, 256, 1, 1, 8, 0), tensors: Sequence[tuple[bytes, list[int], int, bytes]] = ()) -> bytes:
    """A GGJT v3 llama file: hparams (n_vocab=0 so no vocabulary), then (name, ne, type, data) records."""
    out = bytearray(b"tjgg" + struct.pack("<I", 3) + struct.pack("<7i", *hparams))
    for name, ne, t, data in tensors:
        out += struct.pack("<3i", len(ne), len(name), t) + struct.pack(f"<{len(ne)}i", *ne) + name
        out += b"\0" * (-len(out) % 32) + data
    return bytes(out)


def rwkv_raw(params: list[tuple[bytes, list[int], int, bytes]], version: int = 101) -> bytes:
    out = bytearray(b"fmgg" + struct.pack("<I", version) + struct.pack("<4I", 16, 4, 1, 0))
    for key, shape, t, data in params:
        out += struct.pack("<3i", len(shape), len(key), t) + struct.pack(f"<{len(shape)}i", *shape) + key + data
    return bytes(out)


# -- the catalogue -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hostile:
    """One crafted input: its class (the issue's heading), the format, the bytes, and the rules that may reject it
    (empty: the file is valid and every command must handle it)."""

    name: str
    cls: str
    format: str
    make: Callable[[], bytes]
    rules: tuple[str, ...] = ()


DIGITS = "9" * 5000


def _mlx(weight_shape: list[int], scales_shape: list[int]) -> bytes:
    n = 1
    for d in weight_shape:
        n *= d
    m = 1
    for d in scales_shape:
        m *= d
    header = {
        "__metadata__": {"format": "mlx"},
        "w": {"dtype": "U32", "shape": weight_shape, "data_offsets": [0, 4 * n]},
        "w.scale": {"dtype": "F16", "shape": scales_shape, "data_offsets": [4 * n, 4 * n + 2 * m]},
        "w.bias": {"dtype": "F16", "shape": scales_shape, "data_offsets": [4 * n + 2 * m, 4 * n + 4 * m]},
    }
    return safetensors_raw(json.dumps(header), b"\0" * (4 * n + 4 * m))


HOSTILE: list[Hostile] = [
    # Python's own limits
    Hostile(
        "gguf-digit-tensor-name",
        "digits",
        "gguf",
        lambda: gguf_raw([kv_str("general.architecture", "llama")], [(f"blk.{DIGITS}.attn_q.weight", [4], 0)], b"\0" * 16),
    ),
    Hostile("gguf-digit-key", "digits", "gguf", lambda: gguf_raw([kv_u32(f"llama.{DIGITS}", 1)])),
    Hostile(
        "st-digit-offset",
        "digits",
        "safetensors",
        lambda: safetensors_raw('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,' + DIGITS + "]}}"),
        ("limit.number_digits",),
    ),
    Hostile(
        "st-digit-shape",
        "digits",
        "safetensors",
        lambda: safetensors_raw('{"a":{"dtype":"F32","shape":[' + DIGITS + '],"data_offsets":[0,4]}}', b"\0" * 4),
        ("limit.number_digits",),
    ),
    Hostile(
        "st-digit-metadata",
        "digits",
        "safetensors",
        lambda: safetensors_raw('{"__metadata__":{"n":' + DIGITS + "}}"),
        ("limit.number_digits",),
    ),
    Hostile(
        "st-digit-name",
        "digits",
        "safetensors",
        lambda: safetensors_raw(
            json.dumps({f"model.layers.{DIGITS}.w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}), b"\0" * 4
        ),
    ),
    Hostile(
        "rwkv-superscript-block",
        "digits",
        "rwkv",
        lambda: rwkv_raw([("blocks.\u00b2.att.key.weight".encode(), [4], 0, b"\0" * 16), (b"emb.weight", [4, 4], 0, b"\0" * 64)]),
    ),
    Hostile("rwkv-digit-block", "digits", "rwkv", lambda: rwkv_raw([(f"blocks.{'9' * 4000}.k".encode(), [4], 0, b"\0" * 16)])),
    Hostile(
        "st-deep-json", "deep", "safetensors", lambda: safetensors_raw('{"a":' + "[" * 100_000 + "]" * 100_000 + "}"), ("limit.nesting",)
    ),
    Hostile(
        "st-deep-metadata",
        "deep",
        "safetensors",
        lambda: safetensors_raw('{"__metadata__":' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("limit.nesting",),
    ),
    # quadratic work and amplification
    Hostile("gguf-60k-huge-dims", "quadratic", "gguf", lambda: gguf_raw([], [("t", [2**64 - 1] * 60_000, 0)]), ("limit.dimensions",)),
    Hostile(
        "st-60k-bad-entries",
        "quadratic",
        "safetensors",
        lambda: safetensors_raw("{" + ",".join(f'"t{i}":{{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}' for i in range(60_000)) + "}"),
    ),
    Hostile("ggml-zeros", "quadratic", "ggml", lambda: b"lmgg" + b"\0" * (1 << 20)),
    Hostile("gguf-empty-arrays", "amplification", "gguf", lambda: gguf_raw([kv_empty_arrays("a", 200_000)]), ("limit.objects_per_kib",)),
    Hostile(
        "gguf-empty-keys",
        "amplification",
        "gguf",
        lambda: gguf_raw([_s("") + struct.pack("<IB", 0, 0)] * 150_000),
        ("limit.objects_per_kib",),
    ),
    Hostile("gguf-tensor-infos", "amplification", "gguf", lambda: gguf_raw([], [(b"", [], 0)] * 100_000), ("limit.objects_per_kib",)),
    Hostile(
        "st-braces",
        "amplification",
        "safetensors",
        lambda: safetensors_raw('{"__metadata__":{},"x":[' + ",".join(["{}"] * 1_000_000) + "]}"),
        ("limit.objects_per_kib",),
    ),
    Hostile(
        "st-short-strings",
        "amplification",
        "safetensors",
        lambda: safetensors_raw('{"__metadata__":{' + ",".join(f'"{i:x}":""' for i in range(500_000)) + "}}"),
        ("limit.strings_per_kib",),
    ),
    # degenerate shapes
    Hostile("mlx-0d-quantized", "shapes", "safetensors", lambda: _mlx([], []), ("quant.shape",)),
    Hostile("mlx-zero-rows", "shapes", "safetensors", lambda: _mlx([0, 8], [0, 1]), ("quant.shape",)),
    Hostile("mlx-1d-quantized", "shapes", "safetensors", lambda: _mlx([8], [1]), ("quant.shape",)),
    Hostile(
        "st-zero-beside-huge",
        "shapes",
        "safetensors",
        lambda: safetensors_raw('{"a":{"dtype":"F32","shape":[0,' + str(2**70) + '],"data_offsets":[0,0]}}'),
        ("tensor.shape",),
    ),
    Hostile(
        "st-65-dims",
        "shapes",
        "safetensors",
        lambda: safetensors_raw(json.dumps({"a": {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}}), b"\0" * 4),
        ("limit.dimensions", "tensor.n_dims"),
    ),
    Hostile("gguf-65-dims", "shapes", "gguf", lambda: gguf_raw([], [("t", [1] * 65, 0)], b"\0" * 32), ("limit.dimensions",)),
    Hostile("gguf-zero-beside-huge", "shapes", "gguf", lambda: gguf_raw([], [("t", [0, 2**64 - 1, 2**64 - 1], 0)], b""), ("tensor.shape",)),
    Hostile(
        "ggjt-zero-and-huge",
        "shapes",
        "ggjt",
        lambda: ggjt_raw(tensors=[(b"tok_embeddings.weight", [0, 2**31 - 1, 2**31 - 1], 0, b"")]),
        ("tensor.shape",),
    ),
    Hostile(
        "rwkv-zero-and-huge", "shapes", "rwkv", lambda: rwkv_raw([(b"emb.weight", [0, 2**31 - 1, 2**31 - 1], 0, b"")]), ("tensor.shape",)
    ),
    # small ones
    Hostile("gguf-f64-1e300", "small", "gguf", lambda: gguf_raw([kv_f64("general.x", 1e300)])),
    Hostile(
        "st-complex",
        "small",
        "safetensors",
        lambda: safetensors_raw('{"c":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}}', struct.pack("<4f", 1, 2, 3, 4)),
    ),
    Hostile(
        "gguf-deep-array",
        "writers",
        "gguf",
        lambda: gguf_raw([kv_u32("general.alignment", 32), kv_nested("x.deep", 20)]),
        ("limit.nesting",),
    ),
]


# -- hypothesis strategies (breakers for the classes the mutation fuzzers missed) --------------------------------
def huge_digit_strings(min_digits: int = 4301, max_digits: int = 20_000) -> st.SearchStrategy[str]:
    """Decimal numbers longer than Python converts (4,300 digits), optionally with a sign or superscripts."""
    digits = st.integers(min_digits, max_digits).map(lambda n: "9" * n)
    return st.one_of(digits, digits.map(lambda d: "-" + d), st.sampled_from(["\u00b2", "\u00b9\u00b2", "\u0663", "\uff11"]))


def deep_json(min_depth: int = 17, max_depth: int = 100_000) -> st.SearchStrategy[str]:
    """JSON arrays or objects nested deeper than any limit, balanced or not."""
    return st.tuples(st.integers(min_depth, max_depth), st.sampled_from(["[]", '{"a":}']), st.booleans()).map(
        lambda t: (t[1][:-1] * t[0]) + ("0" if t[1] == "[]" else "0") + (t[1][-1] * t[0] if t[2] else "")
    )


def zero_and_huge_shapes(max_dims: int = 80) -> st.SearchStrategy[list[int]]:
    """Shapes numpy cannot hold: a zero beside an extent beyond 2**63, more than 64 dimensions, products beyond
    the address space (every element at least 0)."""
    huge = st.sampled_from([2**31 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**70])
    return st.one_of(
        st.lists(huge, min_size=0, max_size=5).map(lambda s: [0, *s, 2**62]),
        st.integers(65, max_dims).map(lambda n: [1] * n),
        st.lists(huge, min_size=3, max_size=8),
    )


def degenerate_mlx_groups() -> st.SearchStrategy[tuple[list[int], list[int]]]:
    """(weight shape, scale shape) of quantized MLX tensors with no honest groups: 0-d, 1-d, zero rows or
    columns, scales that do not divide the words."""
    return st.one_of(
        st.just(([], [])),
        st.integers(1, 64).map(lambda n: ([n], [1])),
        st.tuples(st.sampled_from([0, 1, 4]), st.sampled_from([0, 8, 16])).map(lambda t: ([t[0], t[1]], [t[0], 0 if t[1] == 0 else 1])),
        st.tuples(st.integers(1, 4), st.integers(1, 16), st.integers(3, 7)).map(lambda t: ([t[0], t[1]], [t[0], t[2]])),
    )


SPECIAL_FILES = ("fifo", "directory", "symlink-to-fifo", "dev-null")


def make_special_file(path, kind: str) -> None:
    """Put a special file at ``path`` (a str or Path): a FIFO, a directory, a symlink to a FIFO, or a symlink
    to /dev/null; readers must refuse each before opening it (a FIFO blocks ``open()``)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "symlink-to-fifo":
        os.mkfifo(f"{path}.fifo")
        os.symlink(f"{path}.fifo", path)
    elif kind == "dev-null":
        os.symlink(os.devnull, path)
    else:
        raise ValueError(f"special file kinds: {SPECIAL_FILES}")


@st.composite
def hostile_bytes(draw: st.DrawFn, max_len: int = 65536) -> bytes:
    """One crafted input of any format, drawn around the HOSTILE classes (at most ``max_len`` bytes): seeds for
    the fuzzing campaign and inputs for property tests (each must be rejected with a FormatError or read)."""
    kind = draw(st.sampled_from(["digits", "deep", "shape-gguf", "shape-st", "shape-ggjt", "shape-rwkv", "mlx", "nested", "catalogue"]))
    if kind == "digits":
        digits = draw(huge_digit_strings(4301, 8000))
        where = draw(st.sampled_from(["offset", "shape", "metadata", "name"]))
        if where == "name":
            return gguf_raw([], [(f"blk.{digits}.w"[:4000], [4], 0)], b"\0" * 16)
        body = {
            "offset": '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,%s]}}',
            "shape": '{"a":{"dtype":"F32","shape":[%s],"data_offsets":[0,4]}}',
            "metadata": '{"__metadata__":{"n":%s}}',
        }[where]
        return safetensors_raw(body % digits, b"\0" * 4)
    if kind == "deep":
        return safetensors_raw('{"a":' + draw(deep_json(17, max_len // 3)) + "}")
    if kind == "nested":
        return gguf_raw([kv_nested("x.n", draw(st.integers(17, 400)))])
    if kind == "mlx":
        w, s = draw(degenerate_mlx_groups())
        return _mlx(w, s)
    if kind == "catalogue":
        return draw(st.sampled_from([h for h in HOSTILE if len(h.make()) <= max_len])).make()
    shape = draw(zero_and_huge_shapes())
    if kind == "shape-gguf":
        return gguf_raw([], [("t", [min(d, 2**64 - 1) for d in shape], 0)])
    if kind == "shape-st":
        return safetensors_raw(json.dumps({"a": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}))
    i32 = [min(d, 2**31 - 1) for d in shape][:8]
    if kind == "shape-ggjt":
        return ggjt_raw(tensors=[(b"tok_embeddings.weight", i32, 0, b"")])
    return rwkv_raw([(b"emb.weight", i32, 0, b"")])
