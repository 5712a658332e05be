"""Byte-order conversion of whole files and dequantization through the API and the CLI."""

from __future__ import annotations

import numpy as np
from conftest import corpus_file

from gguf_construct import load
from gguf_construct.cli.main import main


def test_le_to_be_equals_gguf_py_converter_output(tmp_path):
    out = tmp_path / "be.gguf"
    assert main(["convert", str(corpus_file("generated/gguf-py-le.gguf")), str(out), "--byte-order", "big"]) == 0
    assert out.read_bytes() == (corpus_file("generated/gguf-py-be.gguf")).read_bytes()


def test_every_type_converts_both_ways_with_equal_values(tmp_path, capsys):
    src = corpus_file("generated/ggml-writer-all-types.gguf")
    main(["convert", str(src), str(tmp_path / "be.gguf"), "--byte-order", "big"])
    n = len(load(src).tensors)
    assert f"{n} verified equal by value" in capsys.readouterr().out  # the command reopened and compared its output
    main(["convert", str(tmp_path / "be.gguf"), str(tmp_path / "le.gguf"), "--byte-order", "little"])
    assert (tmp_path / "le.gguf").read_bytes() == src.read_bytes()
    le, be = load(src), load(tmp_path / "be.gguf")
    assert be.byte_order == "big"
    for name in le.tensors:
        a, b = le.tensors[name].to_numpy(), be.tensors[name].to_numpy()
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), name


def test_to_numpy_shape_and_values():
    f = load(corpus_file("generated/gguf-py-le.gguf"))
    t = f.tensors["blk.0.f32.weight"]
    assert t.to_numpy().shape == (3, 512)
    assert np.array_equal(t.to_numpy().ravel(), t.data.view("<f4"))


def test_dequant_cli_writes_npz_and_npy(tmp_path):
    src = str(corpus_file("generated/ggml-writer-kquants.gguf"))
    assert main(["dequant", src, str(tmp_path / "all.npz")]) == 0
    f = load(src)
    with np.load(tmp_path / "all.npz") as z:
        assert sorted(z.files) == sorted(f.tensors)
        assert np.array_equal(z["blk.2.q4_K.weight"], f.tensors["blk.2.q4_K.weight"].to_numpy())
    assert main(["dequant", src, "--tensor", "blk.4.q6_K.weight", str(tmp_path / "one.npy")]) == 0
    assert np.load(tmp_path / "one.npy").shape == (4, 512)


def test_version_conversion_to_v2_and_back(tmp_path):
    src = corpus_file("gguf/v3-llama-vocab.gguf")
    main(["convert", str(src), str(tmp_path / "v2.gguf"), "--version", "2"])
    main(["convert", str(tmp_path / "v2.gguf"), str(tmp_path / "v3.gguf"), "--version", "3"])
    assert load(tmp_path / "v2.gguf").version == 2
    assert (tmp_path / "v3.gguf").read_bytes() == src.read_bytes()
