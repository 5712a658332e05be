"""The reader-breaker classes: each makes what it names, inside a file a reader gets through the header of, and
our reader answers each as the rules say, never with anything but a FormatError."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given, settings

from gguf_construct.api import from_bytes
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.errors import FormatError
from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.testing.strategies import READER_BREAKERS, ggml_nbytes, padded_offsets, reader_breaker, reader_breaking_gguf
from gguf_construct.validation.gguf_checks import validate_gguf_bytes

SEEDS = range(4)
U64 = 2**64


def parsed(name: str, seed: int):
    return GGUF.parse(reader_breaker(name, seed))


def tensors(c):
    return [(t.name, [int(d) for d in t.dimensions], str(t.type)) for t in c.tensor_infos]


def exact_sizes(c):
    """Each tensor's byte size with Python integers (no wrapping): elements / block size * type size."""
    out = []
    for _, dims, t in tensors(c):
        info, n = GGML_TYPES.lookup(t), 1
        for d in dims:
            n *= d
        out.append(n // info.block_size * info.type_size)
    return out


def kv(c, key):
    return [x for x in c.metadata_kv if x.key == key]


def test_ggml_nbytes_wraps_as_size_t():
    assert ggml_nbytes([8, 2], "f32") == 64
    assert ggml_nbytes([2**61], "f32") == 2**63
    assert ggml_nbytes([2**62], "f32") == 0  # 2**64 wraps
    assert ggml_nbytes([32, 0], "q8_0") == 0 and ggml_nbytes([2**64 - 1], "f32") == 0  # zero and negative dims
    assert ggml_nbytes([2**60 * 32 // 32 * 32], "q8_0") == (2**60 * 32 * 34 % U64) // 32  # ne0 * nb0 wraps first
    assert padded_offsets([("a", [1], "f32"), ("b", [8], "f32")]) == ([0, 32], 64)


@pytest.mark.parametrize("seed", SEEDS)
def test_overflowing_dims(seed):
    dims = [d for _, d, _ in tensors(parsed("ne-product-overflow", seed))]
    product = max(eval("*".join(map(str, d))) for d in dims)  # noqa: S307 - integers only
    assert product >= 2**63 and all(x < 2**63 for d in dims for x in d)
    (row,) = [(d[0], t) for _, d, t in tensors(parsed("row-size-overflow", seed)) if d[0] > 2**32]
    info = GGML_TYPES.lookup(row[1])
    assert row[0] < 2**63 and row[0] % info.block_size == 0 and row[0] // info.block_size * info.type_size >= U64


@pytest.mark.parametrize("seed", SEEDS)
def test_dimension_classes(seed):
    assert any(0 in d for _, d, _ in tensors(parsed("zero-dim", seed)))
    assert any(x >= 2**63 for _, d, _ in tensors(parsed("negative-dim", seed)) for x in d)
    assert max(len(d) for _, d, _ in tensors(parsed("n-dims-over-max", seed))) > 4
    assert min(len(d) for _, d, _ in tensors(parsed("n-dims-zero", seed))) == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_offset_classes(seed):
    c = parsed("offset-past-end", seed)
    assert any(int(t.offset) + s > len(c.tensor_data) for t, s in zip(c.tensor_infos, exact_sizes(c)))
    c = parsed("offset-overlap", seed)
    spans = sorted((int(t.offset), int(t.offset) + s) for t, s in zip(c.tensor_infos, exact_sizes(c)))
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize("seed", SEEDS)
def test_key_classes(seed):
    (align,) = kv(parsed("alignment-wrong-type", seed), "general.alignment")
    assert str(align.value_type) != "u32"
    keys = [x.key for x in parsed("duplicate-key", seed).metadata_kv]
    assert len(keys) != len(set(keys))
    assert "" in [x.key for x in parsed("empty-key", seed).metadata_kv]
    (count,) = kv(parsed("block-count-past-limit", seed), "llama.block_count")
    assert int(count.value) > 512


STANDARD_TYPES = {
    "tokenizer.ggml.scores": ("arr", "f32"),
    "tokenizer.ggml.token_type": ("arr", "i32"),
    "tokenizer.ggml.tokens": ("arr", "str"),
    "tokenizer.ggml.merges": ("arr", "str"),
    "llama.context_length": ("u32",),
    "llama.rope.freq_base": ("f32",),
    "llama.attention.layer_norm_rms_epsilon": ("f32",),
    "general.architecture": ("str",),
    "tokenizer.ggml.bos_token_id": ("u32",),
    "llama.feed_forward_length": ("u32",),
}


@pytest.mark.parametrize("seed", range(12))
def test_standard_key_wrong_type(seed):
    c = parsed("standard-key-wrong-type", seed)
    wrong = [
        x
        for x in c.metadata_kv
        if x.key in STANDARD_TYPES
        and (str(x.value_type),) + ((str(x.value.type),) if str(x.value_type) == "arr" else ()) != STANDARD_TYPES[x.key]
    ]
    assert wrong


@pytest.mark.parametrize("seed", SEEDS)
def test_byte_token(seed):
    c = parsed("byte-token", seed)
    tokens = list(kv(c, "tokenizer.ggml.tokens")[0].value.array)
    types = list(kv(c, "tokenizer.ggml.token_type")[0].value.array)
    assert len(tokens) == len(types)
    assert any(t == 6 and not re.fullmatch(r"<0x[0-9A-F]{2}>", s) for s, t in zip(tokens, types))


@pytest.mark.parametrize("name", ["huge-string-count", "huge-array-count"])
def test_huge_counts_pass_the_header(name):
    for seed in SEEDS:
        data = reader_breaker(name, seed)
        n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
        assert data[:4] == b"GGUF" and n_kv >= 5 and n_tensors >= 1
        with pytest.raises(FormatError) as e:
            GGUF.parse(data)
        assert e.value.rule == ("string.length" if name == "huge-string-count" else "array.length")


# what our rules say of each class (spec and ggml profiles): the rule every file of the class is rejected with,
# or None where the file is valid GGUF and the break is a consumer's limit (layers) or a tokenizer convention
EXPECTED = {
    "ne-product-overflow": "model.parameters",
    "row-size-overflow": "tensor.nbytes_overflow",
    "zero-dim": "tensor.shape",
    "negative-dim": "tensor.ne_overflow",
    "n-dims-over-max": "tensor.n_dims",
    "n-dims-zero": "tensor.n_dims",
    "offset-past-end": "tensor.bounds",
    "offset-overlap": "tensor.overlap",
    "huge-string-count": "string.length",
    "huge-array-count": "array.length",
    "alignment-wrong-type": "alignment.type",
    "duplicate-key": "key.duplicate",
    "standard-key-wrong-type": "key.type",
    "empty-key": "key.empty",
    "block-count-past-limit": None,
    "byte-token": None,
}


def test_every_class_has_an_expectation():
    assert set(EXPECTED) | {"alignment-absurd"} == set(READER_BREAKERS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_our_reader_answers_each_class_as_the_rules_say(name):
    for seed in SEEDS:
        data = reader_breaker(name, seed)
        for profile in ("spec", "ggml"):
            # a reader's rules: whether llama.cpp's model loader would run the model (tensor.architecture) is not asked
            rules = {i.rule for i in validate_gguf_bytes(data, profile) if i.severity == "error"} - {"tensor.architecture"}
            if EXPECTED[name] is None:
                assert not rules, (name, seed, profile)
                from_bytes(data, profile=profile)
            else:
                assert EXPECTED[name] in rules, (name, seed, profile, rules)
                with pytest.raises(FormatError):
                    from_bytes(data, profile=profile)


def test_absurd_alignment_follows_each_profile():
    for seed in range(12):
        data = reader_breaker("alignment-absurd", seed)
        at = data.index(b"general.alignment") + len("general.alignment")  # 0 or huge: the schema stops at the padding
        vtype, a = struct.unpack_from("<II", data, at)
        assert vtype == 4 and (a == 0 or a & (a - 1) or a % 8 or a >= 2**31)
        for profile, valid in (("spec", a and a % 8 == 0 and a < 2**31), ("ggml", a and a & (a - 1) == 0 and a < 2**31)):
            rules = {i.rule for i in validate_gguf_bytes(data, profile) if i.severity == "error"}
            if valid:
                assert not rules & {"alignment.value", "alignment.zero"}, (a, profile)
            else:
                assert rules, (a, profile)


def test_unknown_class_names_the_known_ones():
    with pytest.raises(KeyError, match="ne-product-overflow"):
        reader_breaker("no-such-class")


@settings(max_examples=20, deadline=None)
@given(reader_breaking_gguf(["ne-product-overflow", "empty-key", "zero-dim"]))
def test_strategy_draws_named_classes(case):
    name, data = case
    assert name in READER_BREAKERS and data[:4] == b"GGUF"


def test_our_reader_rejects_the_ggml_finding_reproducers():
    from conftest import DATA

    expected = {
        "ggml-cve-2025-53630-size-wrap.gguf": "tensor.bounds",
        "ggml-nelements-signed-overflow.gguf": "tensor.ne_overflow",
        "ggml-ubsan-invalid-type-enum.gguf": None,
    }
    for name, rule in expected.items():
        data = (DATA.parent / "reproducers" / name).read_bytes()
        with pytest.raises(FormatError) as e:
            from_bytes(data, profile="ggml")
        if rule:
            assert rule in {i.rule for i in validate_gguf_bytes(data, "ggml")}, name
        assert e.value.rule
