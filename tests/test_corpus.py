"""Every corpus file: byte-identical round trip, agreement with what ggml's C reader saw, validation verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import CORPUS, INVALID_GGUF, VALID_GGUF, corpus_files, rel

from gguf_construct import GGUF, FormatError, load, validate_file
from gguf_construct.cli.report import info_json


def test_corpus_is_present():
    assert len(corpus_files("gguf/*.gguf")) == 8
    assert len(VALID_GGUF) == 14 and len(INVALID_GGUF) == 4


@pytest.mark.parametrize("path", VALID_GGUF, ids=rel)
def test_round_trip_is_byte_identical(path):
    data = path.read_bytes()
    assert GGUF.build(GGUF.parse(data)) == data


@pytest.mark.parametrize("path", VALID_GGUF, ids=rel)
def test_valid_files_pass_spec_profile(path):
    assert [i for i in validate_file(path, "spec") if i.severity == "error"] == []


@pytest.mark.parametrize("path", INVALID_GGUF, ids=rel)
def test_invalid_files_are_rejected_cleanly(path):
    issues = [i for i in validate_file(path, "spec") if i.severity == "error"]
    assert issues and all(i.rule and i.offset is not None for i in issues)
    with pytest.raises(FormatError):
        load(path)


def _c_string(value):
    """What ggml's C API shows of a string: it hands out NUL-terminated strings, so a NUL ends it."""
    return value.split("\0")[0] if isinstance(value, str) else value


def _agree(ours, theirs, where):
    ours = _c_string(ours)
    if isinstance(theirs, float):
        assert math.isclose(float(ours), theirs, rel_tol=1e-7) or (math.isnan(theirs) and math.isnan(float(ours))), where
    else:
        assert ours == theirs, where


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.gguf")), ids=rel)
def test_info_json_agrees_with_ggml_reader(path, corpus_manifest):
    """For every file ggml's C reader accepted, info --json reports the same header, keys and tensors;
    every file it refused is refused by our ggml profile too, except big-endian ones (ggml refuses any byte
    order but the host's; a big-endian file is valid)."""
    seen = corpus_manifest[rel(path)]["ggml_c_reader"]
    if not seen["accepted"]:
        errors = [i for i in validate_file(path, "ggml") if i.severity == "error"]
        assert errors or load(path, strict=False).byte_order == "big"
        return
    ours = info_json(load(path, profile="ggml"))
    for field in ("version", "alignment", "data_offset"):
        assert ours[field] == seen[field], field
    assert [m["key"] for m in ours["metadata"]] == [k["key"] for k in seen["kv"]]
    for m, k in zip(ours["metadata"], seen["kv"]):
        assert m["type"] == k["type"], k["key"]
        if k["type"] == "arr":
            assert (m["array_type"], m["n"]) == (k["array_type"], k["n"]), k["key"]
            for end in ("first", "last"):
                if end in k:
                    assert _c_string(m[end]) == k[end], (k["key"], end)
        else:
            _agree(m["value"], k["value"], k["key"])
    assert [{f: t[f] for f in ("name", "type", "shape", "offset", "nbytes")} for t in ours["tensors"]] == seen["tensors"]


def test_big_endian_twin_reads_the_same_values():
    le = load(CORPUS / "generated/gguf-py-le.gguf")
    be = load(CORPUS / "generated/gguf-py-be.gguf")
    assert (le.byte_order, be.byte_order) == ("little", "big")
    assert list(le.metadata) == list(be.metadata)
    for key in le.metadata:
        a, b = le.metadata[key], be.metadata[key]
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b) and b.dtype.byteorder == ">" or b.dtype.itemsize == 1
        else:
            assert list(a) == list(b) if not isinstance(a, (int, float, str)) else a == b
    assert [(t.name, t.shape, t.type, t.offset) for t in le.tensors.values()] == [(t.name, t.shape, t.type, t.offset) for t in be.tensors.values()]


def test_tensor_data_is_a_view_of_the_map():
    f = load(CORPUS / "generated/ggml-writer-all-types.gguf")
    t = f.tensors["output_norm.weight"] if "output_norm.weight" in f.tensors else next(iter(f.tensors.values()))
    assert not t.data.flags.owndata and not t.data.flags.writeable
    raw = (CORPUS / "generated/ggml-writer-all-types.gguf").read_bytes()
    start = f.data_offset + t.offset
    assert t.data.tobytes() == raw[start : start + t.nbytes]


def test_v1_layout_reads_and_round_trips(tmp_path):
    """No v1 file is in the corpus: write one from a v2 vocabulary and check that it reads back equal."""
    src = load(CORPUS / "gguf/v2-falcon-vocab.gguf")
    out = tmp_path / "v1.gguf"
    src.save(out, version=1)
    v1 = load(out)
    assert v1.version == 1 and list(v1.metadata) == list(src.metadata)
    assert v1.metadata["tokenizer.ggml.tokens"] == src.metadata["tokenizer.ggml.tokens"]
    data = out.read_bytes()
    assert GGUF.build(GGUF.parse(data)) == data
    # the v1 file is smaller by 4 bytes per count, length and dimension
    assert len(data) < (CORPUS / "gguf/v2-falcon-vocab.gguf").stat().st_size
