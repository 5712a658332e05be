"""Every corpus file: byte-identical round trip, agreement with what ggml's C reader saw, validation verdicts."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from conftest import DATA, FULL_CORPUS, INVALID_GGUF, VALID_GGUF, corpus_file, corpus_files, manifest, rel, shipped_manifest
from oracles import ggml_read

from gguf_construct import GGUF, FormatError, detect, load
from gguf_construct import validate as validate_file
from gguf_construct.cli.report import info_json

SHIPPED = shipped_manifest()
SHIPPED_BUDGET = 12 * 2**20  # tests/data's ceiling: the compact tier must stay small enough to ship


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_shipped_data_is_what_its_manifest_lists():
    listed = {e["file"] for e in SHIPPED}
    mirrored = {name.split("/")[0] for name in listed}  # the corpus's folders and vectors/; other tests keep their own data beside
    present = {p.relative_to(DATA).as_posix() for p in DATA.rglob("*") if p.is_file() and p.relative_to(DATA).parts[0] in mirrored}
    assert present == listed
    assert sum(e["size"] for e in SHIPPED) <= SHIPPED_BUDGET
    assert all(e["license"] and e["origin"] and e["what"] for e in SHIPPED)


@pytest.mark.parametrize("entry", SHIPPED, ids=lambda e: e["file"])
def test_shipped_file_matches_its_sha256(entry):
    path = DATA / entry["file"]
    assert (path.stat().st_size, _sha256(path)) == (entry["size"], entry["sha256"])
    if FULL_CORPUS is not None and entry.get("corpus_file"):  # the corpus-wide tier: the copy is the corpus's file
        assert _sha256(FULL_CORPUS / entry["corpus_file"]) == entry["sha256"]


@pytest.mark.parametrize("name", sorted(manifest()), ids=str)
def test_every_manifest_file_is_present_with_its_sha256(name):
    entry = manifest()[name]
    assert _sha256(corpus_file(name)) == entry["sha256"]


@pytest.mark.parametrize("entry", [e for e in SHIPPED if "slice_of" in e], ids=lambda e: e["file"])
def test_damaged_slice_shows_the_damage_of_the_whole_file(entry):
    """A shipped slice of a damaged file is rejected by the same rule, at the same field and offset, as the
    whole file (recorded in MANIFEST.json; checked against the whole file in the corpus-wide tier)."""
    whole = entry["slice_of"]
    assert (whole["start"], entry["size"]) == (0, whole["stop"])
    expected = [(entry["damage"]["rule"], entry["damage"]["path"], entry["damage"]["offset"])]
    assert [(i.rule, i.path, i.offset) for i in validate_file(DATA / entry["file"], "spec") if i.severity == "error"] == expected
    assert ggml_read(DATA / entry["file"]) is None
    if FULL_CORPUS is not None:
        full = FULL_CORPUS / whole["file"]
        assert _sha256(full) == whole["sha256"]
        assert full.read_bytes()[: whole["stop"]] == (DATA / entry["file"]).read_bytes()
        assert [(i.rule, i.path, i.offset) for i in validate_file(full, "spec") if i.severity == "error"] == expected


def test_the_tiers_cover_every_kind_of_file():
    """Valid GGUF of both versions in use and both byte orders, files each reference refuses, every legacy kind."""
    assert {load(p).version for p in VALID_GGUF} >= {2, 3}
    assert {load(p).byte_order for p in VALID_GGUF} == {"little", "big"}
    assert len(INVALID_GGUF) >= 3
    assert {detect(p) for p in corpus_files("legacy/*.bin") if "not-a-model" not in p.name} == {"ggml", "ggmf"}
    assert {load(p).version for p in corpus_files("rwkv/*.bin")} == {100, 101}


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


@pytest.mark.parametrize("path", corpus_files("*/*.gguf"), ids=rel)
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
    assert list(ours["metadata"]) == [k["key"] for k in seen["kv"]]
    for m, k in zip(ours["metadata"].values(), seen["kv"]):
        assert m["type"] == k["type"], k["key"]
        if k["type"] == "arr":
            assert (m["array_type"], m["n"]) == (k["array_type"], k["n"]), k["key"]
            for end in ("first", "last"):
                if end in k:
                    assert _c_string(m[end]) == k[end], (k["key"], end)
        else:
            _agree(m["value"], k["value"], k["key"])
    assert [{"name": n} | {f: t[f] for f in ("type", "shape", "offset", "nbytes")} for n, t in ours["tensors"].items()] == seen["tensors"]


def test_big_endian_twin_reads_the_same_values():
    le = load(corpus_file("generated/gguf-py-le.gguf"))
    be = load(corpus_file("generated/gguf-py-be.gguf"))
    assert (le.byte_order, be.byte_order) == ("little", "big")
    assert list(le.metadata) == list(be.metadata)
    for key in le.metadata:
        a, b = le.metadata[key], be.metadata[key]
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b) and (b.dtype.byteorder == ">" or b.dtype.itemsize == 1), key
        else:
            assert list(a) == list(b) if not isinstance(a, (int, float, str)) else a == b
    assert [(t.name, t.shape, t.type, t.offset) for t in le.tensors.values()] == [
        (t.name, t.shape, t.type, t.offset) for t in be.tensors.values()
    ]


def test_tensor_data_is_a_view_of_the_map():
    f = load(corpus_file("generated/ggml-writer-all-types.gguf"))
    t = f.tensors["output_norm.weight"] if "output_norm.weight" in f.tensors else next(iter(f.tensors.values()))
    assert not t.data.flags.owndata and not t.data.flags.writeable
    raw = (corpus_file("generated/ggml-writer-all-types.gguf")).read_bytes()
    start = f.data_offset + t.offset
    assert t.data.tobytes() == raw[start : start + t.nbytes]


def test_v1_layout_reads_and_round_trips(tmp_path):
    """No v1 file is in the corpus: write one from a v2 vocabulary and check that it reads back equal."""
    src = load(corpus_file("gguf/v2-falcon-vocab.gguf"))
    out = tmp_path / "v1.gguf"
    src.save(out, version=1)
    v1 = load(out)
    assert v1.version == 1 and list(v1.metadata) == list(src.metadata)
    assert v1.metadata["tokenizer.ggml.tokens"] == src.metadata["tokenizer.ggml.tokens"]
    data = out.read_bytes()
    assert GGUF.build(GGUF.parse(data)) == data
    # the v1 file is smaller by 4 bytes per count, length and dimension
    assert len(data) < (corpus_file("gguf/v2-falcon-vocab.gguf")).stat().st_size
