"""Differential checks against the reference readers and writer: ggml's C reader and gguf-py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import VALID_GGUF, corpus_file, rel
from hypothesis import HealthCheck, given, settings
from oracle_pins import ORACLE_PINS, known_behaviour
from oracles import ggml_read, gguf_py_read, ours, shapeless

from gguf_construct import GGUF, load
from gguf_construct.testing.strategies import TENSOR_TYPES, gguf_files

# ggml-python 0.0.45 and gguf-py 0.19 predate ggml type 42 (q2_0).
ORACLE_TYPES = tuple(t for t in TENSOR_TYPES if t != "q2_0")
# gguf-py sizes a Q8_1 block at 40 bytes, ggml at 36 (docs/findings.md, tests/testing/test_reproducers.py).
GGUF_PY_TYPES = tuple(t for t in ORACLE_TYPES if t != "q8_1")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _as_gguf_py_sees(view):
    """gguf-py loses the element type of an empty array (its adapter gives it as arr[None] with no values)."""
    view["kv"] = [[k, "arr[None]", None] if t.startswith("arr[") and v == [] else [k, t, v] for k, t, v in view["kv"]]
    return view


@pytest.mark.parametrize("path", VALID_GGUF, ids=rel)
def test_ggml_reader_agrees_on_corpus(path):
    theirs = ggml_read(path)
    if theirs is None:
        # ggml refuses big-endian files and nested arrays; ggml-python 0.0.45 predates type 42 (q2_0), which the
        # newer ggml that made manifest.json reads (test_corpus checks us against that record).
        assert path.name in ("gguf-py-be.gguf", "gguf-py-nested-array.gguf", "ggml-writer-all-types.gguf"), known_behaviour(
            "ggml-python", f"reads {path.name}, which it was expected to refuse (big-endian, nested array, or type 42 it predates)"
        )
        return
    mine = shapeless(ours(path))
    # ggml hands strings out NUL-terminated; no corpus file accepted by ggml has a NUL inside a string but one
    mine["kv"] = [[k, t, v.split("\0")[0] if isinstance(v, str) else v] for k, t, v in mine["kv"]]
    assert mine == theirs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(obj=gguf_files(orders=("little",), profile="ggml", tensor_types=ORACLE_TYPES))
def test_ggml_reader_agrees_on_generated_files(obj, tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "f.gguf"
    path.write_bytes(GGUF.build(obj))
    theirs = ggml_read(path)
    assert theirs is not None, "ggml refused a file our ggml profile accepts"
    mine = shapeless(ours(path))
    mine["kv"] = [[k, t, v.split("\0")[0] if isinstance(v, str) else v] for k, t, v in mine["kv"]]
    # ggml's string arrays are C strings too
    mine["kv"] = [[k, t, [s.split("\0")[0] for s in v] if t == "arr[str]" else v] for k, t, v in mine["kv"]]
    assert mine == theirs


# gguf-py flattens nested arrays and, like ggml-python 0.0.45, does not know type 42 (q2_0) of the all-types file.
@pytest.mark.parametrize("path", [p for p in VALID_GGUF if "nested" not in p.name and "all-types" not in p.name], ids=rel)
def test_gguf_py_agrees_on_corpus(path):
    assert_gguf_py_agrees(path)


def assert_gguf_py_agrees(path):
    mine, theirs = _as_gguf_py_sees(ours(path)), _as_gguf_py_sees(gguf_py_read(path))
    if not mine["tensors"]:
        # gguf-py pads the data offset of a file without tensors past its end; ggml and we report the end
        assert theirs["data_offset"] == mine["data_offset"] + (-mine["data_offset"]) % mine["alignment"]
        theirs["data_offset"] = mine["data_offset"]
    assert mine == theirs


@SETTINGS
@given(obj=gguf_files(profile="ggml", tensor_types=GGUF_PY_TYPES))  # gguf-py also wants a power-of-two alignment
def test_gguf_py_reads_what_we_build(obj, tmp_path_factory):
    path = tmp_path_factory.mktemp("p") / "f.gguf"
    path.write_bytes(GGUF.build(obj))
    assert_gguf_py_agrees(path)


@pytest.mark.parametrize("endian", ["little", "big"])
def test_we_read_what_gguf_py_writes(tmp_path, endian):
    import gguf

    path = tmp_path / "w.gguf"
    w = gguf.GGUFWriter(path, "llama", endianess=gguf.GGUFEndian.LITTLE if endian == "little" else gguf.GGUFEndian.BIG)
    w.add_uint8("t.u8", 200)
    w.add_int16("t.i16", -3)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_float64("t.f64", -1.5e300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo 世界")
    w.add_array("t.arr_str", ["a", "", "ü"])
    w.add_array("t.arr_f32", [1.5, -2.0, 3.25])
    w.add_tensor("w.f32", np.arange(64, dtype=np.float32).reshape(2, 32))
    w.add_tensor("w.f16", np.arange(96, dtype=np.float16).reshape(3, 32))
    w.add_tensor("w.i32", np.arange(7, dtype=np.int32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    f = load(path)
    assert f.byte_order == endian
    assert_gguf_py_agrees(path)
    assert f.tensors["w.f32"].shape == (32, 2)
    data = f.tensors["w.f16"].data.view(">f2" if endian == "big" else "<f2")
    assert np.array_equal(data, np.arange(96, dtype=np.float16))
    raw = path.read_bytes()
    assert GGUF.build(GGUF.parse(raw)) == raw


def test_ggml_reads_a_file_we_edited_and_saved(tmp_path):
    src = load(corpus_file("generated/ggml-writer-kquants.gguf"))
    src.metadata["general.name"] = "renamed, and longer than before"
    src.metadata.set("test.new", [1, 2, 3], type="arr[u16]")
    del src.metadata["test.u8"]
    src.save(tmp_path / "edited.gguf")
    theirs = ggml_read(tmp_path / "edited.gguf")
    assert theirs == shapeless(ours(tmp_path / "edited.gguf"))
    before = ggml_read(corpus_file("generated/ggml-writer-kquants.gguf"))
    assert [(n, t, b) for n, t, _, _, b in theirs["tensors"]] == [(n, t, b) for n, t, _, _, b in before["tensors"]]


def test_the_oracles_are_the_pinned_versions():
    """The assertions about the oracles were written against these versions: pyproject's `test` extra pins them,
    and a different installed version fails here first, by name, before any check of its behaviour."""
    import re
    from importlib.metadata import version

    from conftest import ROOT

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^test = \[(.*)\]$", pyproject, re.M).group(1)  # tomllib is 3.11+; the project supports 3.10
    for dist, pinned in ORACLE_PINS.items():
        assert re.search(rf'"{re.escape(dist)}(\[cpu\])?=={re.escape(pinned)}[";]', extra), (dist, extra)
        assert version(dist) == pinned, (
            f"{dist} {version(dist)} is installed; the tests were written against {pinned} (pyproject's test extra)"
        )
