"""``gguf_construct.safe_open`` against the safetensors library's own ``safe_open`` (the oracle), and the
``__metadata__`` round trip safetensors → GGUF → safetensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.convert import convert
from gguf_construct.data import example_path

safetensors = pytest.importorskip("safetensors", reason="the safetensors library is the oracle")
from safetensors import safe_open as oracle_open  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

METADATA = {"format": "pt", "Some-Key": "x y", "quant_type": "int4", "é": "ü", "safetensors.metadata": "{"}


def _files(tmp_path: Path) -> list[Path]:
    rng = np.random.default_rng(3)
    arrays = {
        "a.weight": rng.standard_normal((3, 5)).astype(np.float16),
        "b": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "c": np.arange(-6, 6, dtype=np.int8).reshape(4, 3),
        "d": np.arange(7, dtype=np.int64),
        "e": rng.standard_normal((2, 2)).astype(np.float64),
    }
    plain = tmp_path / "plain.safetensors"
    save_file(arrays, str(plain), metadata=METADATA)
    converted = tmp_path / "example.safetensors"
    convert(example_path(), converted)
    return [plain, converted]


def test_safe_open_matches_the_safetensors_library(tmp_path):
    for path in _files(tmp_path):
        with gc.safe_open(path, framework="numpy") as ours, oracle_open(str(path), framework="numpy") as theirs:
            assert ours.keys() == list(theirs.keys())
            assert ours.metadata() == theirs.metadata()
            for name in theirs.keys():  # noqa: SIM118 - the library's handle is no mapping
                want = theirs.get_tensor(name)
                got = ours.get_tensor(name)
                assert got.dtype == want.dtype and got.shape == want.shape, name
                assert got.tobytes() == want.tobytes(), name


def test_safe_open_on_gguf_gives_numpy_order_and_the_stored_type():
    f = gc.load(example_path())
    with gc.safe_open(example_path()) as s:
        assert s.keys() == sorted(f.tensors)
        t = s.get_tensor("blk.0.ffn_up.weight")
        assert t.dtype == np.float16 and t.shape == tuple(reversed(f.tensors["blk.0.ffn_up.weight"].shape)) == (64, 32)
        assert np.array_equal(t.astype(np.float32), f.tensors["blk.0.ffn_up.weight"].to_numpy().reshape(64, 32))
        assert s.metadata()["general.architecture"] == "llama"


def test_safe_open_refuses_what_it_cannot_give(tmp_path):
    with pytest.raises(ValueError):
        gc.safe_open(example_path(), framework="tf")


def test_metadata_round_trips_through_gguf(tmp_path):
    src = _files(tmp_path)[0]
    convert(src, tmp_path / "mid.gguf")
    assert gc.load(tmp_path / "mid.gguf").metadata["safetensors.format"] == "pt"  # readable in any GGUF tool
    convert(tmp_path / "mid.gguf", tmp_path / "back.safetensors")
    with oracle_open(str(tmp_path / "back.safetensors"), framework="numpy") as f:
        assert f.metadata() == METADATA
