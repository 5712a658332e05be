"""Lazy string arrays (formats/fields.StringArray): window decoding, splitting and UTF-8 checks against the
plain per-string decode and gguf-py's reader.

A string array keeps only its bodies' start offsets; ``tolist`` and ``check_utf8`` decode whole windows of the
array at once with every length field blanked. These tests pin what that must preserve: the exact strings
(empty ones, NULs and newlines inside bodies, every script, windows cut anywhere), and UTF-8 verdicts that are
per string, not per window (a multi-byte sequence cut by a length field is an error even when the field's bytes
would complete it).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from gguf_construct import GGUF, from_bytes, new
from gguf_construct import validate as validate_bytes
from gguf_construct.errors import InvalidValueError
from gguf_construct.formats import fields
from gguf_construct.formats.fields import StringArray


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def string_array_file(bodies: list[bytes], wide: bool = True) -> bytes:
    """A GGUF file (v3, or v1 with u32 counts when not ``wide``) holding one string array of raw ``bodies``."""
    cnt = (lambda v: struct.pack("<Q", v)) if wide else u32
    key = b"tokenizer.ggml.tokens"
    arr = u32(8) + cnt(len(bodies)) + b"".join(cnt(len(b)) + b for b in bodies)
    return b"GGUF" + u32(3 if wide else 1) + cnt(0) + cnt(1) + cnt(len(key)) + key + u32(9) + arr


def parsed_array(data: bytes) -> StringArray:
    array = GGUF.parse(data).metadata_kv[0].value.array
    assert isinstance(array, StringArray)
    return array


def plain_decode(bodies: list[bytes]) -> list[str]:
    return [b.decode("utf-8") for b in bodies]


def vocabulary(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    alphabet = list("abcĠ Ċ\n\t\0Ääéßабвгд中文字词🙂𝄞")
    out = []
    for _ in range(n):
        picks = rng.integers(0, len(alphabet), int(rng.integers(0, 12)))
        out.append("".join(alphabet[i] for i in picks).encode("utf-8"))
    return out


@pytest.mark.parametrize("wide", [True, False])
@pytest.mark.parametrize("window", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("nul", [True, False])
def test_tolist_matches_the_plain_decode(monkeypatch, wide, window, nul):
    """Every window size (down to one string per window), both count widths, with and without NULs in bodies
    (the split path and the slicing path)."""
    monkeypatch.setattr(fields, "DECODE_WINDOW", window)
    bodies = vocabulary(300)
    if not nul:
        bodies = [b.replace(b"\0", b"") for b in bodies]
    assert any(b"\0" in b for b in bodies) == nul
    bodies[5] = b""
    bodies[-1] = b""
    bodies.append(b"x" * 1000)  # a long one, beside short ones
    array = parsed_array(string_array_file(bodies, wide))
    expected = plain_decode(bodies)
    assert array.tolist() == expected
    assert list(array) == expected
    assert [array[i] for i in range(len(array))] == expected
    assert array.lengths().tolist() == [len(b) for b in bodies]
    array.check_utf8()


def test_all_ascii_and_empty_arrays():
    for bodies in ([], [b""], [b"", b""], [b"a", b"bc", b""], [b"plain ascii"] * 70):
        array = parsed_array(string_array_file(bodies))
        assert array.tolist() == plain_decode(bodies)
        array.check_utf8()


def test_tolist_matches_gguf_py(tmp_path):
    """The oracle: gguf-py's GGUFReader reads the same strings from a file our writer saved."""
    from gguf import GGUFReader

    tokens = [b.decode() for b in vocabulary(2000, seed=1)]
    f = new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["tokenizer.ggml.tokens"] = tokens
    path = tmp_path / "vocab.gguf"
    f.save(path)
    field = GGUFReader(path).fields["tokenizer.ggml.tokens"]
    theirs = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    ours = from_bytes(path.read_bytes()).metadata["tokenizer.ggml.tokens"].tolist()
    assert ours == theirs == tokens


# a lead byte at a body's end, then a length whose first byte is a continuation byte (169 = 0xA9): "\xc3\xa9"
# is "é" if the field were not blanked; and a body that opens with a continuation byte after a field
CUT_SEQUENCES = [
    ([b"ab\xc3", b"x" * 0xA9], 0),
    ([b"ok", b"\xa9tail"], 1),
    ([b"ok", b"\xf0\x9f\x99"], 1),  # a truncated 4-byte sequence at the end of the array
    ([b"ok"] * 50 + [b"\xed\xa0\x80"] + [b"fine"] * 50, 50),  # an encoded surrogate
    ([b"ok"] * 50 + [b"\xff"], 50),
]


@pytest.mark.parametrize(("bodies", "bad"), CUT_SEQUENCES)
@pytest.mark.parametrize("window", [1, 16, 1 << 20])
def test_utf8_errors_are_per_string(monkeypatch, bodies, bad, window):
    monkeypatch.setattr(fields, "DECODE_WINDOW", window)
    data = string_array_file(bodies)
    array = parsed_array(data)
    for call in (array.check_utf8, array.tolist):
        with pytest.raises(InvalidValueError) as err:
            call()
        assert err.value.rule == "string.utf8"
        assert err.value.path.endswith(f"[{bad}]")
        assert int(array.offsets()[bad]) <= err.value.offset < int(array.offsets()[bad]) + len(bodies[bad])
    issues = validate_bytes(data)
    assert [i.rule for i in issues if i.rule == "string.utf8"] == ["string.utf8"]


def test_length_fields_with_high_bytes_are_not_utf8_errors():
    """Length fields are binary: 200 (0xC8) or 0x80_00 would be invalid UTF-8 if they were decoded."""
    bodies = [b"a" * 200, "é".encode() * 0x4000, b"b"]
    array = parsed_array(string_array_file(bodies))
    array.check_utf8()
    assert array.tolist() == plain_decode(bodies)


def test_only_start_offsets_are_held():
    """One int64 per element (the ends are derived), not two."""
    array = parsed_array(string_array_file(vocabulary(500)))
    held = [getattr(array, name) for name in StringArray.__slots__ if isinstance(getattr(array, name), np.ndarray)]
    assert sum(a.nbytes for a in held) == 500 * 8
