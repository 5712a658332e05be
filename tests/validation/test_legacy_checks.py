"""Every rule of validation/legacy_checks.py, one malformed file per row: GGML/GGMF/GGJT llama files, the ggml examples'
and whisper.cpp's variants, and rwkv.cpp files, each assembled field by field with struct (independently of the
schemas) and wrong in exactly one way.

Each row names the rule it must fire, the profile, the severity, and the field path; the file must otherwise be
clean (the rule's issues are the only ones), and the strict loader must refuse it when the rule is an error.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable

import numpy as np
import pytest
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.api.legacy_file import load_legacy
from gguf_construct.validation.legacy_checks import validate_legacy_bytes, validate_rwkv_bytes
from tests.formats.test_legacy_schemas import llama_file

F32_8 = np.arange(8, dtype="<f4").tobytes()
NORM = ("norm.weight", 0, [8], F32_8)
Q4_0_BLOCK = np.float16(0.5).tobytes() + bytes(range(16))  # one 18-byte block of 32 values


# -- the ggml examples' GGML files (gpt-2 layout: hparams, the vocab count stored again, no scores) -----------
def example_file(n_vocab: int = 3, stored: int | None = None, tensors=(NORM,), n_ctx: int = 16) -> bytes:
    out = bytearray(b"lmgg" + struct.pack("<6i", n_vocab, n_ctx, 8, 2, 1, 0))
    texts = [b"a", b"b", b"c", b"d"][: n_vocab if stored is None else stored]
    out += struct.pack("<i", len(texts))
    for text in texts:
        out += struct.pack("<I", len(text)) + text
    for name, t, ne, data in tensors:
        out += struct.pack(f"<3i{len(ne)}i", len(ne), len(name), t, *ne) + name.encode() + data
    return bytes(out)


WHISPER_HPARAMS = (
    "n_vocab",
    "n_audio_ctx",
    "n_audio_state",
    "n_audio_head",
    "n_audio_layer",
    "n_text_ctx",
    "n_text_state",
    "n_text_head",
    "n_text_layer",
    "n_mels",
    "ftype",
)


def whisper_with(**hparams: int) -> bytes:
    """whisper.cpp's test model with hyper-parameters (i32s after the magic) changed."""
    data = bytearray(corpus_file("legacy/whisper-ggml-tiny.bin").read_bytes())
    assert struct.unpack_from("<i", data, 4 + 4 * WHISPER_HPARAMS.index("n_mels"))[0] == 80
    for name, value in hparams.items():
        struct.pack_into("<i", data, 4 + 4 * WHISPER_HPARAMS.index(name), value)
    return bytes(data)


# -- rwkv.cpp files ------------------------------------------------------------------------------------------
def rwkv_param(key: str, shape: list[int], data_type: int = 0, data: bytes | None = None) -> bytes:
    n = int(np.prod(shape)) if shape else 1
    body = np.zeros(n, "<f4").tobytes() if data is None else data
    return struct.pack(f"<3i{len(shape)}i", len(shape), len(key), data_type, *shape) + key.encode() + body


def rwkv_file(
    version: int = 101, n_vocab: int = 4, n_embed: int = 8, n_layer: int = 1, data_type: int = 0, params: list[bytes] | None = None
) -> bytes:
    """A minimal rwkv.cpp file: emb.weight [n_embed, n_vocab], one block's layer norm, head.weight."""
    if params is None:
        params = [
            rwkv_param("emb.weight", [n_embed, n_vocab]),
            rwkv_param("blocks.0.ln1.weight", [n_embed]),
            rwkv_param("head.weight", [n_embed, n_vocab]),
        ]
    return b"fmgg" + struct.pack("<5I", version, n_vocab, n_embed, n_layer, data_type) + b"".join(params)


def with_hparam(index: int, value: int, fmt: str = "ggjt", version: int | None = 3, tensors=(NORM,)) -> bytes:
    """A llama file whose hparams[index] (n_vocab, n_embd, n_mult, n_head, n_layer, n_rot, ftype) is ``value``."""
    data = bytearray(llama_file(fmt, version, list(tensors)))
    struct.pack_into("<i", data, 4 + (4 if version is not None else 0) + 4 * index, value)
    return bytes(data)


def ggjt_with_padding_byte() -> bytes:
    data = bytearray(llama_file("ggjt", 3, [NORM]))
    at = len(data) - 32 - 1  # the last padding byte before the tensor's data
    assert data[at] == 0
    data[at] = 0xAA
    return bytes(data)


# rule, profile, severity, field path, the file, the hyper-parameter profile to read it with (None: detected)
ROWS: list[tuple[str, str, str, str, Callable[[], bytes], str | None]] = [
    # hyper-parameters
    ("hparams.value", "spec", "error", "hparams.n_layer", lambda: with_hparam(4, 0), None),
    ("hparams.value", "spec", "error", "hparams.n_ctx", lambda: example_file(n_ctx=-1), "gpt2"),
    ("hparams.ftype", "spec", "error", "hparams.ftype", lambda: with_hparam(6, 19), None),
    ("hparams.n_rot", "spec", "warning", "hparams.n_rot", lambda: with_hparam(5, 3), None),
    # what llama.cpp's last legacy loader refused
    ("loader.version", "ggml", "error", "hparams.ftype", lambda: with_hparam(6, 2, "ggmf", 1, ()), None),
    ("loader.version", "ggml", "error", "hparams.ftype", lambda: with_hparam(6, 3, "ggjt", 2, ()), None),
    ("loader.type", "ggml", "error", "tensors[0].type", lambda: llama_file("ggjt", 3, [("w", 9, [32], bytes(36))]), None),
    # tensor records
    ("tensor.n_dims", "spec", "error", "tensors[0].n_dims", lambda: llama_file("ggjt", 3, [("w", 0, [1, 2, 4], F32_8)]), None),
    ("tensor.ne", "spec", "error", "tensors[0].ne", lambda: llama_file("ggjt", 3, [("w", 0, [8, 0], b"")]), None),
    ("tensor.ne0", "spec", "error", "tensors[0].ne", lambda: llama_file("ggjt", 3, [("w", 2, [16, 2], Q4_0_BLOCK)]), None),
    ("tensor.name", "spec", "error", "tensors[0].name", lambda: llama_file("ggjt", 3, [("", 0, [8], F32_8)]), None),
    ("tensor.duplicate", "spec", "error", "tensors[1].name", lambda: llama_file("ggjt", 3, [NORM, NORM]), None),
    ("tensor.padding", "spec", "warning", "tensors[0]._padding", ggjt_with_padding_byte, None),
    # the ggml examples and whisper.cpp
    ("vocab.count", "spec", "error", "vocab_count", lambda: example_file(n_vocab=3, stored=2), "gpt2"),
    ("vocab.count", "spec", "error", "vocab_count", lambda: whisper_with(n_vocab=50000), None),  # 50257 tokens stored
    ("mel_filters.n_mel", "spec", "warning", "mel_filters.n_mel", lambda: whisper_with(n_mels=81), None),
    # rwkv.cpp
    ("header.value", "spec", "error", "n_layer", lambda: rwkv_file(n_layer=0, params=[rwkv_param("emb.weight", [8, 4])]), None),
    ("header.data_type", "spec", "error", "data_type", lambda: rwkv_file(data_type=4), None),
    ("loader.type", "ggml", "error", "data_type", lambda: rwkv_file(version=100, data_type=5), None),
    ("loader.version", "ggml", "error", "version", lambda: rwkv_file(version=100, data_type=2), None),
    (
        "loader.type",
        "ggml",
        "error",
        "parameters[1].data_type",
        lambda: rwkv_file(
            version=100, params=[rwkv_param("emb.weight", [8, 4]), rwkv_param("blocks.0.att.key.weight", [32, 1], 5, bytes(20))]
        ),
        None,
    ),
    (
        "tensor.n_dims",
        "spec",
        "error",
        "parameters[1].dim_count",
        lambda: rwkv_file(params=[rwkv_param("emb.weight", [8, 4]), rwkv_param("blocks.0.x", [])]),
        None,
    ),
    (
        "tensor.n_dims",
        "spec",
        "error",
        "parameters[1].dim_count",
        lambda: rwkv_file(params=[rwkv_param("emb.weight", [8, 4]), rwkv_param("blocks.0.x", [1, 1, 1, 2])]),
        None,
    ),
    (
        "tensor.duplicate",
        "spec",
        "error",
        "parameters[2].key",
        lambda: rwkv_file(params=[rwkv_param("emb.weight", [8, 4]), rwkv_param("blocks.0.x", [8]), rwkv_param("blocks.0.x", [8])]),
        None,
    ),
    ("parameter.missing", "spec", "error", "parameters", lambda: rwkv_file(params=[rwkv_param("blocks.0.x", [8])]), None),
    ("header.shape", "spec", "error", "n_embed", lambda: rwkv_file(n_embed=16, params=[rwkv_param("emb.weight", [8, 4])]), None),
    ("header.n_layer", "spec", "error", "n_layer", lambda: rwkv_file(n_layer=2), None),
]


def _row_id(row) -> str:
    return f"{row[0]}:{row[3]}"


def validate(data: bytes, profile: str, hparams: str | None):
    if data[:4] == b"fmgg" and struct.unpack_from("<I", data, 4)[0] in (100, 101):
        return validate_rwkv_bytes(data, profile)
    return validate_legacy_bytes(data, profile, hparams=hparams)


@pytest.mark.parametrize("rule,profile,severity,path,make,hparams", ROWS, ids=[_row_id(r) for r in ROWS])
def test_each_rule_fires_alone(rule, profile, severity, path, make, hparams):
    data = make()
    issues = validate(data, profile, hparams)
    assert [(i.rule, i.severity, i.path) for i in issues] == [(rule, severity, path)], issues
    if hparams is None:  # the format dispatch finds the same
        assert [(i.rule, i.path) for i in gc.validate(data, profile)] == [(rule, path)]


@pytest.mark.parametrize(
    "rule,profile,severity,path,make,hparams", [r for r in ROWS if r[2] == "error"], ids=[_row_id(r) for r in ROWS if r[2] == "error"]
)
def test_strict_loading_refuses_each_error(rule, profile, severity, path, make, hparams, tmp_path):
    target = tmp_path / "bad.bin"
    target.write_bytes(make())
    load = gc.load if hparams is None else functools.partial(load_legacy, hparams=hparams)  # gc.load detects the profile
    with pytest.raises(gc.FormatError) as info:
        load(target, profile=profile)
    assert info.value.rule == rule
    try:
        load(target, profile=profile, strict=False)  # lenient loading reads it, unless the schema itself refuses it
    except gc.FormatError as e:
        assert e.rule == rule, e


def test_every_rule_of_the_module_has_a_row():
    """The rules the legacy validators report (``Issue(rules.X, ...)`` in validation/legacy_checks.py) are exactly the table's."""
    from rule_scan import issue_rules

    import gguf_construct.validation.legacy_checks as module

    assert issue_rules(module.__file__) == {r[0] for r in ROWS}


def test_the_unmodified_files_are_clean():
    """The builders' files without the fault pass both profiles (so each row's issue comes from its one fault)."""
    for profile in ("spec", "ggml"):
        assert validate_legacy_bytes(llama_file("ggjt", 3, [NORM]), profile) == []
        assert validate_legacy_bytes(example_file(), profile, hparams="gpt2") == []
        assert validate_rwkv_bytes(rwkv_file(), profile) == []
        assert validate_legacy_bytes(whisper_with(), profile) == []


def test_an_unreadable_file_gives_the_schemas_one_issue_and_an_unknown_profile_is_refused():
    [issue] = validate_legacy_bytes(llama_file("ggjt", 3, [NORM])[:-5], "spec")
    assert issue.rule.startswith("tensor.") and issue.offset is not None
    [issue] = validate_rwkv_bytes(rwkv_file()[:-5], "spec")
    assert issue.rule == "parameter.truncated" or issue.rule.startswith("tensor."), issue
    with pytest.raises(ValueError, match="profile"):
        validate_rwkv_bytes(rwkv_file(), "hf")
