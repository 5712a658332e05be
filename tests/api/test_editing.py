"""The editing API: typed metadata, tensors from numpy or bytes, atomic streamed saves, detect/schema_for."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import corpus_file

from gguf_construct import GGUF, FormatError, UnknownFormatError, detect, from_bytes, load, new, schema_for
from gguf_construct.data import EXAMPLE, build_example


def test_metadata_keeps_types_and_infers_standard_ones(tmp_path):
    f = load(corpus_file("gguf/v3-llama-vocab.gguf"))
    assert f.metadata.type_of("llama.context_length") == "u32"
    assert f.metadata.type_of("tokenizer.ggml.tokens") == "arr[str]"
    assert isinstance(f.metadata["tokenizer.ggml.scores"], np.ndarray)
    f.metadata["llama.context_length"] = 8192  # keeps u32
    f.metadata["general.alignment"] = 64  # a standard key: u32
    f.metadata["tokenizer.chat_template"] = "{{ messages }}" * 1000  # a string longer than the file's old header
    f.metadata["my.flag"] = True
    f.metadata.set("my.big", 2**40, type="u64")
    f.metadata.set("my.nested", [[1, 2], [3]], type="arr[arr[u8]]")
    del f.metadata["general.name"]
    out = tmp_path / "edited.gguf"
    f.save(out)
    g = load(out)
    assert [g.metadata.type_of(k) for k in ("llama.context_length", "general.alignment", "my.flag", "my.big", "my.nested")] == [
        "u32",
        "u32",
        "bool",
        "u64",
        "arr[arr]",
    ]
    assert g.metadata["llama.context_length"] == 8192 and "general.name" not in g.metadata
    assert [list(x) for x in g.metadata["my.nested"]] == [[1, 2], [3]]
    assert g.metadata["tokenizer.ggml.tokens"] == f.metadata["tokenizer.ggml.tokens"]


@pytest.mark.parametrize(
    ("key", "value", "vtype"), [("a.b", 300, "u8"), ("a.b", -1, "u32"), ("a.b", "x", "i32"), ("a.b", 1.5, "u16"), ("a.b", [1, "x"], None)]
)
def test_values_that_do_not_fit_are_refused(key, value, vtype):
    f = new()
    with pytest.raises(ValueError):
        f.metadata.set(key, value, type=vtype)


def test_tensors_from_numpy_and_bytes_in_both_byte_orders(tmp_path):
    for order in ("little", "big"):
        f = new(byte_order=order)
        f.metadata["general.architecture"] = "test"
        f.tensors.add("a", np.arange(64, dtype=np.float32).reshape(2, 32))
        f.tensors.add("b", np.arange(5, dtype=np.int16))
        f.tensors.add("q", bytes(range(34)), ggml_type="q8_0", shape=[32])
        out = tmp_path / f"{order}.gguf"
        f.save(out)
        g = load(out, profile="spec")
        assert g.byte_order == order
        assert g.tensors["a"].shape == (32, 2) and g.tensors["a"].type.name == "f32"
        assert np.array_equal(g.tensors["a"].data.view(("<" if order == "little" else ">") + "f4"), np.arange(64, dtype=np.float32))
        assert g.tensors["q"].data.tobytes() == bytes(range(34))
        assert all(t.offset % g.alignment == 0 for t in g.tensors.values())
    with pytest.raises(ValueError):
        f.tensors.add("bad", bytes(33), ggml_type="q8_0", shape=[32])
    with pytest.raises(ValueError):
        f.tensors.add("bad", bytes(34), ggml_type="q8_0", shape=[31])


def test_replace_and_remove_tensors_keep_the_rest(tmp_path):
    f = load(corpus_file("generated/ggml-writer-kquants.gguf"))
    before = {t.name: t.data.tobytes() for t in f.tensors.values()}
    f.tensors.replace("output_norm.weight", np.zeros(1001, dtype=np.float32))
    del f.tensors["test.i8_odd"]
    f.save(tmp_path / "x.gguf")
    g = load(tmp_path / "x.gguf", profile="ggml")
    assert "test.i8_odd" not in g.tensors
    assert not g.tensors["output_norm.weight"].data.any()
    for name, data in before.items():
        if name not in ("output_norm.weight", "test.i8_odd"):
            assert g.tensors[name].data.tobytes() == data


def test_rename_keeps_place_and_data_and_checks_the_name(tmp_path):
    f = load(corpus_file("generated/ggml-writer-kquants.gguf"))
    names = list(f.tensors)
    data = {n: f.tensors[n].data.tobytes() for n in names}
    f.tensors.rename(names[1], "renamed")
    assert list(f.tensors) == [names[0], "renamed", *names[2:]]
    with pytest.raises(ValueError):
        f.tensors.rename(names[0], "renamed")
    with pytest.raises(ValueError):
        f.tensors.rename(names[0], "x" * 65)
    with pytest.raises(KeyError):
        f.tensors.rename(names[1], "y")
    f.save(tmp_path / "r.gguf")
    g = load(tmp_path / "r.gguf")
    assert g.tensors["renamed"].data.tobytes() == data[names[1]]
    assert [g.tensors[n].data.tobytes() for n in g.tensors if n != "renamed"] == [data[n] for n in names if n != names[1]]


def test_unmodified_save_reproduces_the_file(tmp_path):
    for path in (
        corpus_file("generated/gguf-py-le.gguf"),
        corpus_file("generated/gguf-py-be.gguf"),
        corpus_file("gguf/v3-llama-vocab.gguf"),
        corpus_file("gguf/v2-falcon-vocab.gguf"),
    ):
        load(path).save(tmp_path / "same.gguf")
        assert (tmp_path / "same.gguf").read_bytes() == path.read_bytes()


def test_save_is_atomic_and_leaves_the_input_alone(tmp_path):
    src = tmp_path / "in.gguf"
    src.write_bytes((corpus_file("generated/gguf-py-le.gguf")).read_bytes())
    f = load(src)
    f.tensors.add("broken", np.zeros(4, dtype=np.float32))
    f.tensors._sources[-1] = b"short"  # a data source of the wrong size makes the build fail midway
    with pytest.raises(ValueError):
        f.save(src)
    assert src.read_bytes() == (corpus_file("generated/gguf-py-le.gguf")).read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["in.gguf"]  # no temporary file left behind


def test_overwriting_the_open_file_keeps_reading_the_old_data(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_bytes((corpus_file("generated/gguf-py-le.gguf")).read_bytes())
    f = load(src)
    f.metadata["general.name"] = "x" * 500
    f.save(src)
    assert load(src).metadata["general.name"] == "x" * 500
    assert load(src).tensors["odd.f32"].data.tobytes() == load(corpus_file("generated/gguf-py-le.gguf")).tensors["odd.f32"].data.tobytes()


def test_detect_and_schema_for():
    data = (corpus_file("generated/gguf-py-le.gguf")).read_bytes()
    assert detect(data) == "gguf" and detect(data[:8]) == "gguf" and detect(corpus_file("generated/gguf-py-le.gguf")) == "gguf"
    assert schema_for(data) is GGUF
    with pytest.raises(UnknownFormatError):
        detect((corpus_file("legacy/not-a-model-raw-vocab.bin")).read_bytes())
    with pytest.raises(UnknownFormatError):
        detect(b"")


def test_from_bytes_and_forced_byte_order():
    data = (corpus_file("generated/gguf-py-be.gguf")).read_bytes()
    assert from_bytes(data).byte_order == "big"
    with pytest.raises(FormatError):
        GGUF.parse(data, byte_order="little")


def test_shipped_example_is_reproducible_and_valid(tmp_path):
    build_example(tmp_path / "example.gguf")
    assert (tmp_path / "example.gguf").read_bytes() == EXAMPLE.read_bytes()
    f = load(EXAMPLE, profile="ggml")
    assert f.metadata["general.architecture"] == "llama" and len(f.tensors) == 20  # every tensor llama.cpp requires
