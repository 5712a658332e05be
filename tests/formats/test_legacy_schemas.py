"""GGML/GGMF/GGJT and rwkv.cpp schemas: corpus round trips, expected values from the reference, detection,
retired block layouts against a scalar transcription of the C formulas, hostile input."""

from __future__ import annotations

import struct
from collections import Counter

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.api.legacy_file import open_legacy
from gguf_construct.formats.base import map_file
from gguf_construct.quants.retired import RETIRED, dequantize_retired, to_current
from tests.conftest import corpus_file, corpus_files, manifest, rel

LEGACY = [p for p in corpus_files("legacy/*.bin") if "not-a-model" not in p.name]
RWKV_FILES = corpus_files("rwkv/*.bin")


@pytest.mark.parametrize("path", LEGACY + RWKV_FILES, ids=lambda p: p.name)
def test_corpus_round_trip(path):
    data = map_file(path)
    assert len(data) == manifest()[rel(path)]["size"]
    schema = gc.schema_for(data)
    assert schema is (gc.RWKV if "rwkv" in path.parent.name else gc.GGML)
    c = schema.parse(data)
    assert schema.build(c) == bytes(data)


def test_ggmf_vocab_file_matches_reference():
    c = gc.GGML.parse(map_file(corpus_file("legacy/ggmf-v1-llama-vocab.bin")))
    assert (c.format, c.version, c.profile) == ("ggmf", 1, "llama")
    assert [c.hparams[k] for k in ("n_vocab", "n_embd", "n_mult", "n_head", "n_layer", "n_rot", "ftype")] == [
        32000,
        4096,
        256,
        32,
        32,
        128,
        1,
    ]
    v = c.vocab
    assert len(v) == 32000 and c.tensors == []
    assert v.texts[0] == b" \xe2\x81\x87 " and v.texts[1] == v.texts[2] == b""
    assert v.texts[3] == b"\x00" and v.texts[258] == b"\xff" and v.texts[259] == b"  "
    assert v.scores[259] == np.float32(-1e9) and v.scores[-1] == np.float32(-31740)


WHISPER_EXPECTED = {
    "whisper-ggml-tiny.bin": (384, 4, 51865),
    "whisper-ggml-tiny.en.bin": (384, 4, 51864),
    "whisper-ggml-base.bin": (512, 6, 51865),
}


@pytest.mark.parametrize("path", corpus_files("legacy/whisper-*.bin"), ids=lambda p: p.name)
def test_whisper_files_match_reference(path):
    state, layers, n_vocab = WHISPER_EXPECTED[path.name]
    f = gc.load(path)
    assert (f.format, f.profile, f.version) == ("ggml", "whisper", None)
    md = f.metadata
    assert (md["n_vocab"], md["n_audio_state"], md["n_audio_layer"], md["n_mels"], md["ftype"]) == (n_vocab, state, layers, 80, 1)
    assert md["mel_filters"].shape == (80, 201) and md["mel_filters"].dtype == np.float32
    assert f.container.mel_filters.data.base is not None  # a view of the map, not a copy
    assert len(md["vocab.tokens"]) == 50257 and "vocab.scores" not in md
    assert len(f.tensors) == 0


def test_explicit_profile_and_wrong_profile():
    data = map_file(corpus_file("legacy/whisper-ggml-tiny.bin"))
    assert gc.GGML.parse(data, profile="whisper").profile == "whisper"
    with pytest.raises(gc.FormatError):
        gc.GGML.parse(data, profile="llama")


RWKV_EXPECTED = {  # as rwkv.cpp reads its tiny-rwkv test models: version, (n_vocab, n_embed, n_layer), parameters, dims 1/2/3
    "4v0-660K": ({"FP32": 100, "FP16": 100, "Q5_0": 101, "Q5_1": 101}, (256, 128, 4), 78, (48, 30, 0)),
    "5v1-730K": ({"FP32": 101, "FP16": 101, "Q5_0": 101, "Q5_1": 101}, (256, 64, 12), 246, (136, 86, 24)),
    "5v2-730K": ({"FP32": 101, "FP16": 101, "Q5_0": 101, "Q5_1": 101}, (256, 64, 12), 270, (148, 98, 24)),
}


@pytest.mark.parametrize("path", RWKV_FILES, ids=lambda p: p.name)
def test_rwkv_files_match_reference(path):
    model, kind = path.stem.removeprefix("tiny-rwkv-").rsplit("-", 1)
    versions, header, n_params, dims = RWKV_EXPECTED[model]
    c = gc.RWKV.parse(map_file(path))
    assert c.version == versions[kind]
    assert (c.n_vocab, c.n_embed, c.n_layer) == header
    assert c.data_type == {"FP32": 0, "FP16": 1, "Q5_0": 7, "Q5_1": 8}[kind]
    assert len(c.parameters) == n_params
    counts = Counter(len(p.shape) for p in c.parameters)
    assert (counts[1], counts[2], counts[3]) == dims
    f = gc.load(path)
    assert f.format == "rwkv" and f.metadata["architecture"] == {"4v0-660K": "v4.0", "5v1-730K": "v5.1", "5v2-730K": "v5.2"}[model]
    types = Counter(t.type for t in f.tensors.values())
    assert set(types) <= {"f32", "f16", "q5_0", "q5_1"}
    assert gc.validate(path) == [] and gc.validate(path, "ggml") == []


def test_detect_names_every_format_and_rejects_the_vocab_dump():
    assert gc.detect(corpus_file("legacy/ggmf-v1-llama-vocab.bin")) == "ggmf"
    assert gc.detect(corpus_file("legacy/whisper-ggml-tiny.bin")) == "ggml"
    assert gc.detect(corpus_file("rwkv/tiny-rwkv-5v1-730K-Q5_1.bin")) == "rwkv"
    assert gc.detect(b"tjgg\x03\x00\x00\x00") == "ggjt"
    ggmf = bytes(map_file(corpus_file("legacy/ggmf-v1-llama-vocab.bin")))
    assert gc.detect(b"tjgg" + ggmf[4:]) == "ggjt"  # the GGJT v1 vocab file differs only in its magic
    assert gc.GGML.parse(b"tjgg" + ggmf[4:]).format == "ggjt"
    for bad in (b"fmgg\x02\x00\x00\x00", b"tjgg\x04\x00\x00\x00"):  # a known magic, a version no reader knows
        with pytest.raises(gc.UnsupportedTypeError) as e:  # the catalogue's class for header.version, as in GGUF
            gc.detect(bad)
        assert e.value.rule == "header.version"
    with pytest.raises(gc.UnknownFormatError, match="LoRA"):
        gc.detect(b"algg\x01\x00\x00\x00")
    with pytest.raises(gc.UnknownFormatError, match="not a model file"):
        gc.detect(corpus_file("legacy/not-a-model-raw-vocab.bin"))
    with pytest.raises(gc.UnknownFormatError, match="not a model file"):
        gc.load(corpus_file("legacy/not-a-model-raw-vocab.bin"))


# -- synthetic files -------------------------------------------------------------------------------------------
def llama_file(
    fmt: str,
    version: int | None,
    tensors: list[tuple[str, int, list[int], bytes]],
    ftype: int = 0,
    vocab: tuple[bytes, ...] = (b"a", b"", b"\xff"),
) -> bytes:
    """A llama.cpp legacy file written field by field with struct (independently of the schema)."""
    out = bytearray({"ggml": b"lmgg", "ggmf": b"fmgg", "ggjt": b"tjgg"}[fmt])
    if version is not None:
        out += struct.pack("<I", version)
    out += struct.pack("<7i", len(vocab), 8, 4, 2, 1, 4, ftype)
    for i, text in enumerate(vocab):
        out += struct.pack("<I", len(text)) + text + (struct.pack("<f", -i) if fmt != "ggml" else b"")
    for name, t, ne, data in tensors:
        out += struct.pack(f"<3i{len(ne)}i", len(ne), len(name), t, *ne) + name.encode()
        if fmt == "ggjt":
            out += b"\0" * (-len(out) % 32)
        out += data
    return bytes(out)


def test_ggjt_padding_is_measured_from_the_start_of_the_file():
    rng = np.random.default_rng(1)
    tensors = [
        ("norm.weight", 0, [8], rng.standard_normal(8).astype("<f4").tobytes()),
        ("tok_embeddings.weight", 1, [8, 3], rng.standard_normal(24).astype("<f2").tobytes()),
    ]
    data = llama_file("ggjt", 3, tensors)
    c = gc.GGML.parse(data)
    assert [t.data_offset % 32 for t in c.tensors] == [0, 0]
    assert gc.GGML.build(c) == data
    f = open_legacy(data)
    assert np.array_equal(f.tensors["norm.weight"].to_numpy(), np.frombuffer(tensors[0][3], "<f4"))
    ggmf = llama_file("ggmf", 1, tensors)  # no padding in GGMF
    assert gc.GGML.build(gc.GGML.parse(ggmf)) == ggmf and len(ggmf) < len(data)


@pytest.mark.parametrize("cut", [1, 5, 13, 40])
def test_truncated_files_fail_cleanly(cut):
    data = llama_file("ggjt", 3, [("norm.weight", 0, [8], b"\0" * 32)])
    with pytest.raises(gc.FormatError):
        gc.GGML.parse(data[:-cut])
    rw = bytes(map_file(RWKV_FILES[0]))
    with pytest.raises(gc.FormatError):
        gc.RWKV.parse(rw[:-cut])


def test_hostile_counts_and_types():
    ok = llama_file("ggjt", 3, [("norm.weight", 0, [8], b"\0" * 32)])
    c = gc.GGML.parse(ok)
    at = c.tensors[0]._offset
    for patch, rule in ((struct.pack("<i", -1), "tensor.n_dims"), (struct.pack("<i", 1 << 30), "tensor.n_dims")):
        bad = ok[:at] + patch + ok[at + 4 :]
        with pytest.raises(gc.FormatError) as e:
            gc.GGML.parse(bad)
        assert e.value.rule == rule and e.value.offset is not None
    bad = ok[: at + 8] + struct.pack("<i", 4) + ok[at + 12 :]  # Q4_2 is not a GGJT v3 type
    with pytest.raises(gc.UnsupportedTypeError, match="GGJT v3"):
        gc.GGML.parse(bad)
    bad = ok[:8] + struct.pack("<i", 1 << 30) + ok[12:]  # n_vocab far past the end
    with pytest.raises(gc.FormatError):
        gc.GGML.parse(bad)


# -- retired block layouts -----------------------------------------------------------------------------------
def reference_decode(layout: str, block: bytes) -> list[float]:
    """ggml's C dequantization formulas of 2023 (ggml-org/llama.cpp: ggml.c), one element at a time in plain Python (f32 arithmetic via
    numpy scalars)."""
    f32, f16 = np.float32, lambda b, o: np.frombuffer(b[o : o + 2], "<f2")[0].astype(np.float32)
    d32 = lambda o: np.frombuffer(block[o : o + 4], "<f4")[0]  # noqa: E731
    pairs = lambda qs: [(qs[i // 2] >> (4 * (i % 2))) & 15 for i in range(2 * len(qs))]  # noqa: E731
    halves = lambda qs: [qs[i] & 15 for i in range(len(qs))] + [qs[i] >> 4 for i in range(len(qs))]  # noqa: E731
    if layout in ("q4_0.v1", "q4_0.v2"):
        q = (pairs if layout.endswith("v1") else halves)(block[4:20])
        return [f32(v - 8) * d32(0) for v in q]
    if layout in ("q4_1.v1", "q4_1.v2"):
        q = (pairs if layout.endswith("v1") else halves)(block[8:24])
        return [f32(v) * d32(0) + d32(4) for v in q]
    if layout == "q4_2":
        return [f32(v - 8) * f16(block, 0) for v in pairs(block[2:10])]
    if layout == "q4_3":
        return [f32(v) * f16(block, 0) + f16(block, 2) for v in pairs(block[4:12])]
    if layout in ("q5_0.v1", "q5_1.v1"):
        off = 2 if layout == "q5_0.v1" else 4
        qh = struct.unpack_from("<I", block, off)[0]
        q = [v | (((qh >> i) & 1) << 4) for i, v in enumerate(pairs(block[off + 4 : off + 20]))]
        if layout == "q5_0.v1":
            return [f32(v - 16) * f16(block, 0) for v in q]
        return [f32(v) * f16(block, 0) + f16(block, 2) for v in q]
    if layout == "q8_0.v1":
        return [f32(v) * d32(0) for v in np.frombuffer(block[4:36], np.int8)]
    if layout in ("q8_1.v1", "q8_1.v2"):
        skip = 12 if layout == "q8_1.v1" else 8
        return [f32(v) * d32(0) for v in np.frombuffer(block[skip : skip + 32], np.int8)]
    if layout == "q4_1_o":
        out = [f32(v) * f16(block, 0) + f16(block, 2) for v in pairs(block[8:24])]
        out[struct.unpack_from("<H", block, 4)[0] & 31] = f16(block, 6)
        return out
    raise AssertionError(layout)


def random_blocks(layout: str, n: int, rng: np.random.Generator) -> bytes:
    """Random blocks with finite, f16-representable scales (so that re-encoding is lossless)."""
    lay = RETIRED[layout]
    raw = rng.integers(0, 256, size=(n, lay.type_size), dtype=np.uint8)
    blocks = raw.view(lay.dtype).reshape(n)
    for name in blocks.dtype.names:
        kind = blocks.dtype[name]
        if kind.kind == "f":
            blocks[name] = rng.standard_normal(n).astype(np.float16).astype(kind)
    return raw.tobytes()


@pytest.mark.parametrize("layout", sorted(RETIRED))
def test_retired_layouts_decode_as_the_c_formulas(layout):
    rng = np.random.default_rng(7)
    data = random_blocks(layout, 6, rng)
    size = RETIRED[layout].type_size
    assert (
        size
        == {
            "q4_0.v1": 20,
            "q4_0.v2": 20,
            "q4_1.v1": 24,
            "q4_1.v2": 24,
            "q4_2": 10,
            "q4_3": 12,
            "q5_0.v1": 22,
            "q5_1.v1": 24,
            "q8_0.v1": 36,
            "q8_1.v1": 44,
            "q8_1.v2": 40,
            "q4_1_o": 24,
        }[layout]
    )
    expected = np.array([v for i in range(6) for v in reference_decode(layout, data[i * size : (i + 1) * size])], np.float32)
    got = dequantize_retired(data, layout)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("layout", [k for k, v in sorted(RETIRED.items()) if v.reencode is not None])
def test_retired_layouts_reencode_losslessly(layout):
    rng = np.random.default_rng(11)
    data = random_blocks(layout, 8, rng)
    name, current = to_current(data, layout)
    assert name == RETIRED[layout].ggml_name
    assert np.array_equal(gc.dequantize(current, name).view(np.uint32), dequantize_retired(data, layout).view(np.uint32))


def test_reencoding_refuses_an_f32_scale_f16_cannot_hold():
    lay = RETIRED["q4_0.v1"]
    blocks = np.zeros(2, lay.dtype)
    blocks["d"] = [0.1, 1.0]  # 0.1 is not a half
    assert to_current(blocks.tobytes(), "q4_0.v1") is None


def test_old_file_with_retired_layouts_reads_through_the_api():
    rng = np.random.default_rng(3)
    q = random_blocks("q4_0.v1", 2, rng)
    data = llama_file("ggjt", 1, [("layers.0.attention.wq.weight", 2, [32, 2], q)], ftype=2)
    f = open_legacy(data)
    t = f.tensors["layers.0.attention.wq.weight"]
    assert (t.type, t.layout, t.retired, t.nbytes) == ("q4_0", "q4_0.v1", True, 40)
    assert (t.type.name, t.type.layout, t.type.block_size, t.type.type_size) == ("q4_0", "q4_0.v1", 32, 20)  # the era's block sizes
    assert np.array_equal(t.to_numpy().reshape(-1), dequantize_retired(q, "q4_0.v1"))
    issues = gc.validate(data, "ggml")
    assert any(i.rule == "loader.version" for i in issues)
    assert not [i for i in gc.validate(data, "spec") if i.severity == "error"]
    # the same ids in a v3 file are today's layouts: 40 bytes are not two 18-byte blocks
    with pytest.raises(gc.FormatError):
        gc.GGML.parse(llama_file("ggjt", 3, [("w", 2, [32, 2], q)], ftype=2))


def test_every_profile_is_declared_once():
    """Each profile of schema/legacy.json has its fields declared in formats/legacy/hparams.py, and no other."""
    from gguf_construct.formats.legacy.hparams import PROFILE_FIELDS
    from gguf_construct.formats.legacy.schema import legacy_tables

    assert set(PROFILE_FIELDS) == set(legacy_tables().profiles) == set(legacy_tables().detect_order)


def test_magic_and_version_are_checked_by_the_schema():
    """A wrong version is reported by the declaration's Version field, with the container it belongs to."""
    from gguf_construct.errors import UnsupportedTypeError
    from gguf_construct.formats.legacy.schema import GGML

    with pytest.raises(UnsupportedTypeError) as e:
        GGML.parse(b"tjgg" + (7).to_bytes(4, "little") + bytes(64))
    assert e.value.rule == "header.version" and "ggjt version 7" in str(e.value)
