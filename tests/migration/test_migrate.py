"""Migration to GGUF v3 and export back: every legacy and rwkv corpus file, value equality checked through
gguf-py and ggml's own reader, the RWKV FP32/Q5 files against each other, synthetic files of every era."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.api.legacy_file import open_legacy
from gguf_construct.cli.main import main
from gguf_construct.errors import MigrationError
from gguf_construct.formats.base import map_file
from gguf_construct.migration import export, migrate
from gguf_construct.migration.llama import unicode_to_bytes
from gguf_construct.quants.retired import RETIRED, dequantize_retired
from tests.conftest import corpus_file, corpus_files
from tests.formats.test_legacy_schemas import llama_file, random_blocks
from tests.oracles import ggml_read, gguf_py_read, ours, shapeless

LEGACY = [p for p in corpus_files("legacy/*.bin") if "not-a-model" not in p.name]
RWKV_FILES = corpus_files("rwkv/*.bin")


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gguf_py_values(path) -> dict[str, np.ndarray]:
    """Every tensor dequantized by gguf-py (the oracle), float32 in numpy order."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    return {t.name: np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(-1) for t in GGUFReader(path).tensors}


@pytest.mark.parametrize("path", LEGACY + RWKV_FILES, ids=lambda p: p.name)
def test_corpus_file_migrates_with_equal_values(path, tmp_path):
    before = sha(path)
    out = tmp_path / "out.gguf"
    report = migrate(path, out)
    assert sha(path) == before
    src = gc.load(path)
    g = gc.load(out, profile="ggml")
    assert g.version == 3
    assert not [i for i in gc.validate(out, "ggml") if i.severity == "error"]
    # ggml's C reader and gguf-py see exactly what we see
    mine = ours(out)
    assert ggml_read(out) == shapeless(mine)
    py = gguf_py_read(out)
    assert (py["kv"], py["tensors"]) == (mine["kv"], mine["tensors"])
    values = gguf_py_values(out)
    extra = {"mel_filters"} if "mel_filters" in src.metadata else set()
    assert set(values) == {g_name for g_name in g.tensors} and len(values) == len(src.tensors) + len(extra)
    names = list(g.tensors)
    for (name, t), out_name in zip(src.tensors.items(), [n for n in names if n not in extra]):
        a, b = t.to_numpy().reshape(-1), values[out_name]
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), name
    if extra:
        assert np.array_equal(values["mel_filters"], np.asarray(src.metadata["mel_filters"]).reshape(-1))
    assert report.tensors == len(g.tensors)


def test_ggmf_vocab_migrates_like_llama_cpp_and_exports_back(tmp_path):
    src = corpus_file("legacy/ggmf-v1-llama-vocab.bin")
    out = tmp_path / "v.gguf"
    migrate(src, out)
    g = gc.load(out)
    md = g.metadata
    assert md["general.architecture"] == "llama" and md["general.file_type"] == 1
    assert (md["llama.embedding_length"], md["llama.block_count"], md["llama.attention.head_count"], md["llama.rope.dimension_count"]) == (
        4096,
        32,
        32,
        128,
    )
    assert md["llama.feed_forward_length"] == 11008  # from n_mult 256, the legacy loader's rule
    assert md["llama.context_length"] == 2048 and md.type_of("llama.attention.layer_norm_rms_epsilon") == "f32"
    tokens, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    assert tokens[:4] == ["<unk>", "<s>", "</s>", "<0x00>"] and tokens[258] == "<0xFF>" and list(types[:4]) == [2, 3, 3, 6]
    assert tokens[259] == "\u2581\u2581" and types[259] == 1
    legacy = gc.load(src)
    assert np.array_equal(md["tokenizer.ggml.scores"], legacy.metadata["vocab.scores"])
    # export: the GGJT file differs from the GGMF one only in magic and version; migrating it back gives the same GGUF bytes
    back = tmp_path / "v.bin"
    export(out, back, to="ggjt")
    original = src.read_bytes()
    assert back.read_bytes() == b"tjgg" + struct.pack("<I", 3) + original[8:]
    again = tmp_path / "again.gguf"
    migrate(back, again)
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("path", [p for p in RWKV_FILES], ids=lambda p: p.name)
def test_rwkv_exports_back_to_the_same_bytes(path, tmp_path):
    out, back = tmp_path / "m.gguf", tmp_path / "m.bin"
    migrate(path, out)
    g = gc.load(out)
    assert g.metadata["general.architecture"] == "rwkv" and g.metadata["rwkv.architecture_version"] in (4, 5)
    assert all(n.startswith(("blk.", "token_embd", "output")) for n in g.tensors)
    export(out, back, to="rwkv")
    original = path.read_bytes()
    expected = original if original[4:8] == struct.pack("<I", 101) else original[:4] + struct.pack("<I", 101) + original[8:]
    assert back.read_bytes() == expected  # a v100 FP32/FP16 file differs from v101 only in the version field
    again = tmp_path / "again.gguf"
    migrate(back, again)
    assert again.read_bytes() == out.read_bytes()


def _float_twin(quantized):
    """The float file of the same weights: FP32 in the full corpus, FP16 where only tests/data's copy has one."""
    for kind in ("FP32", "FP16"):
        twins = [p for p in corpus_files("rwkv/*.bin") if p.name == quantized.name.rsplit("-", 1)[0] + f"-{kind}.bin"]
        if twins:
            return twins[0]
    return None


Q5_PAIRS = [(q, _float_twin(q)) for q in corpus_files("rwkv/*-Q5_*.bin") if _float_twin(q) is not None]


@pytest.mark.parametrize("quantized,reference", Q5_PAIRS, ids=lambda p: p.name)
def test_rwkv_q5_migration_stays_within_q5_error_of_float(quantized, reference, tmp_path):
    """The same weights as Q5 and as floats (rwkv.cpp quantized its FP32 file): every quantized tensor within one
    quantization step of the float one, every other tensor equal (to the float file's precision when it is FP16)."""
    ref, q = tmp_path / "float.gguf", tmp_path / "q.gguf"
    migrate(reference, ref)
    migrate(quantized, q)
    a, b = gc.load(ref), gc.load(q)
    assert list(a.tensors) == list(b.tensors)
    compared = 0
    for name, t in b.tensors.items():
        if t.type.name not in ("q5_0", "q5_1"):  # unquantized tensors are identical
            expected = t.to_numpy() if a.tensors[name].type.name == "f32" else t.to_numpy().astype(np.float16).astype(np.float32)
            assert np.array_equal(expected, a.tensors[name].to_numpy()), name
            continue
        x, y = a.tensors[name].to_numpy(), t.to_numpy()
        if np.abs(x).max() < 2**-14:  # below f16's normal range the block scale underflows
            continue
        rel = np.sqrt(np.mean((x - y) ** 2)) / np.sqrt(np.mean(x**2))
        assert rel < 0.08, (name, rel)
        # and no element is off by more than one quantization step of its block (amax/15 for 5 bits, /16 signed)
        step = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / 15
        assert np.all(np.abs((x - y).reshape(-1, 32)) <= step * 1.01 + 1e-7), name
        compared += 1
    assert compared >= 4


# -- synthetic legacy llama files of every era ----------------------------------------------------------------
def halves_scaled(layout: str, n: int, seed: int, exact: bool) -> bytes:
    data = bytearray(random_blocks(layout, n, np.random.default_rng(seed)))
    if not exact:
        lay = RETIRED[layout]
        blocks = np.frombuffer(data, lay.dtype)
        blocks["d"][0] = np.float32(0.1)  # not a half: no lossless Q4_0 with f16 d exists
    return bytes(data)


RETIRED_CASES = [
    ("ggml", None, 2, "q4_0.v1"),
    ("ggmf", 1, 3, "q4_1.v1"),
    ("ggjt", 1, 6, "q5_0.v1"),
    ("ggjt", 1, 7, "q5_1.v1"),
    ("ggjt", 1, 8, "q8_0.v1"),
    ("ggjt", 2, 2, "q4_0.v2"),
    ("ggjt", 2, 3, "q4_1.v2"),
    ("ggjt", 2, 8, "q8_0.v1"),
    ("ggjt", 1, 4, "q4_2"),
    ("ggjt", 1, 5, "q4_3"),
]
F32_SCALES = {k for k, v in RETIRED.items() if v.dtype["d"].itemsize == 4}


@pytest.mark.parametrize(
    "fmt,version,type_id,layout,exact", [(*c, True) for c in RETIRED_CASES] + [(*c, False) for c in RETIRED_CASES if c[3] in F32_SCALES]
)
def test_retired_llama_tensors_migrate_without_changing_a_value(fmt, version, type_id, layout, exact, tmp_path):
    q = halves_scaled(layout, 4, 5, exact)
    n = len(q) // RETIRED[layout].type_size * RETIRED[layout].elements
    tensors = [
        ("tok_embeddings.weight", 0, [8, 3], np.arange(24, dtype="<f4").tobytes()),
        ("layers.0.feed_forward.w1.weight", type_id, [32, n // 32], q),
    ]
    src = tmp_path / "old.bin"
    src.write_bytes(llama_file(fmt, version, tensors, ftype={2: 2, 3: 3, 8: 7}.get(type_id, 2)))
    out = tmp_path / "new.gguf"
    report = migrate(src, out)
    g = gc.load(out, profile="ggml")
    t = g.tensors["blk.0.ffn_gate.weight"]
    expect = dequantize_retired(q, layout)
    assert np.array_equal(t.to_numpy().reshape(-1).view(np.uint32), expect.view(np.uint32))
    reencodable = RETIRED[layout].reencode is not None and exact
    assert t.type.name == (RETIRED[layout].ggml_name if reencodable else t.type.name)
    assert (report.reencoded, report.widened) == ((1, 0) if reencodable else (0, 1))
    if not reencodable:
        assert t.type.name in ("f16", "f32") and report.notices
    assert g.metadata["llama.feed_forward_length"] == n // 32
    assert gguf_py_values(out)["blk.0.ffn_gate.weight"].view(np.uint32).tolist() == expect.view(np.uint32).tolist()


def test_ggjt_v3_quantized_file_migrates_bit_for_bit_and_exports_back(tmp_path):
    rng = np.random.default_rng(2)
    q40 = random_blocks("q4_0.v2", 2, rng)  # reuse the generator; rewrite as v3 blocks: f16 d + qs
    blocks = np.frombuffer(q40, RETIRED["q4_0.v2"].dtype)
    v3 = b"".join(np.float16(b["d"]).tobytes() + b["qs"].tobytes() for b in blocks)
    tensors = [
        ("tok_embeddings.weight", 1, [8, 3], np.arange(24, dtype="<f2").tobytes()),
        ("norm.weight", 0, [8], np.ones(8, "<f4").tobytes()),
        ("layers.0.attention.wq.weight", 2, [32, 2], v3),
        ("layers.0.feed_forward.w1.weight", 2, [32, 2], v3),
    ]
    src = tmp_path / "v3.bin"
    src.write_bytes(llama_file("ggjt", 3, tensors, ftype=2, vocab=(b" \xe2\x81\x87 ", b"", b"", b"\x00", b" hello")))
    out, back = tmp_path / "v3.gguf", tmp_path / "back.bin"
    report = migrate(src, out, context_length=4096, name="tiny")
    assert report.copied == 4 and report.reencoded == report.widened == 0
    g = gc.load(out)
    assert bytes(g.tensors["blk.0.attn_q.weight"].data) == v3
    assert g.tensors["token_embd.weight"].shape == (
        8,
        3,
    )  # ne from the file, not divided by the type size (as llama.cpp's convert_llama_ggml_to_gguf.py does)
    export(out, back, to="ggjt")
    assert back.read_bytes() == src.read_bytes()


def test_whisper_tokens_keep_their_bytes(tmp_path):
    src = corpus_file("legacy/whisper-ggml-tiny.bin")
    out = tmp_path / "w.gguf"
    migrate(src, out)
    md = gc.load(out).metadata
    legacy = gc.load(src).metadata
    assert md["general.architecture"] == "whisper" and md["tokenizer.ggml.model"] == "gpt2"
    assert md["whisper.encoder.mels_count"] == 80 and md.type_of("whisper.encoder.mels_count") == "u64"
    assert md["whisper.vocab_size"] == 51865 and md["whisper.decoder.block_count"] == 4
    assert [unicode_to_bytes(t) for t in md["tokenizer.ggml.tokens"]] == legacy["vocab.tokens"]


def test_gguf_versions(tmp_path):
    v2 = corpus_file("gguf/v2-falcon-vocab.gguf")
    v3 = tmp_path / "v3.gguf"
    migrate(v2, v3)
    a, b = gc.load(v2), gc.load(v3)
    assert b.version == 3 and ours(v3)["kv"] == ours(v2)["kv"]
    back = tmp_path / "v2.gguf"
    b.save(back, version=2)  # v3 → v2: nothing in this file needs v3
    assert back.read_bytes() == v2.read_bytes()
    assert main(["convert", str(v3), str(tmp_path / "c2.gguf"), "--version", "2"]) == 0
    assert (tmp_path / "c2.gguf").read_bytes() == v2.read_bytes()
    del a


def test_refusals(tmp_path):
    src = corpus_file("rwkv/tiny-rwkv-5v1-730K-Q5_1.bin")
    with pytest.raises(gc.FormatError):
        migrate(src, src)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(llama_file("ggjt", 3, [("mystery.weight", 0, [8], b"\0" * 32)]))
    with pytest.raises(MigrationError, match="no GGUF name"):
        migrate(bad, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists() and not list(tmp_path.glob(".*migrating"))
    with pytest.raises(gc.UnknownFormatError):
        migrate(corpus_file("legacy/not-a-model-raw-vocab.bin"), tmp_path / "y.gguf")


def test_cli_migrate_export_info_validate(tmp_path, capsys):
    src = corpus_file("rwkv/tiny-rwkv-4v0-660K-Q5_1.bin")
    out = tmp_path / "r.gguf"
    assert main(["migrate", str(src), str(out)]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["export", str(out), str(tmp_path / "r.bin"), "--to", "rwkv"]) == 0
    assert (tmp_path / "r.bin").read_bytes() == src.read_bytes()
    for path in [*LEGACY, src]:
        assert main(["validate", str(path)]) == 0
        assert main(["validate", "--profile", "ggml", str(path)]) == 0
    assert main(["migrate", str(corpus_file("legacy/not-a-model-raw-vocab.bin")), str(tmp_path / "n.gguf")]) == 1
    assert "not a model file" in capsys.readouterr().err


def test_open_legacy_from_bytes():
    f = open_legacy(map_file(corpus_file("rwkv/tiny-rwkv-4v0-660K-FP16.bin")))
    assert f.format == "rwkv" and f.version == 100 and f.describe() == "rwkv.cpp v100 (RWKV v4.0)"
