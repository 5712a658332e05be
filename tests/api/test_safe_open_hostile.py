"""``safe_open`` and Ollama models on hostile ground: a FIFO or a device is refused as ``load`` refuses it (never
waited on), sub-byte dtypes (F4, F6_E2M3, F6_E3M2) are a clean ``UnsupportedTypeError`` where the safetensors
library, with numpy, refuses them too (and mlx cannot load them), and an Ollama model of one blob per tensor
opens under the usual limit of 1,024 open files."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.errors import FormatError

ROOT = Path(__file__).resolve().parents[2]


def _safetensors(path: Path, dtype: str, shape: list[int], nbytes: int) -> Path:
    header = json.dumps({"t": {"dtype": dtype, "shape": shape, "data_offsets": [0, nbytes]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(range(nbytes)))
    return path


def test_safe_open_refuses_a_fifo_at_once(tmp_path):
    """In a child process bounded in time: a FIFO with no writer would block an ``open()`` for ever."""
    fifo = tmp_path / "m.safetensors"
    os.mkfifo(fifo)
    code = f"import gguf_construct as gc\ntry:\n    gc.safe_open({os.fspath(fifo)!r})\nexcept gc.FormatError as e:\n    print(e.rule)\n"
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.fspath(ROOT)}
    )
    assert run.stdout.strip() == "file.not_regular", run.stderr


@pytest.mark.parametrize("special", ["/dev/zero", "directory"])
def test_safe_open_refuses_what_load_refuses(special, tmp_path):
    path = tmp_path if special == "directory" else Path(special)
    with pytest.raises(FormatError) as ours:
        gc.safe_open(path)
    with pytest.raises(FormatError) as loaded:
        gc.load(path)
    assert ours.value.rule == loaded.value.rule == "file.not_regular"


PACKED = [("F4", [2, 4], 4), ("F6_E2M3", [2, 4], 6), ("F6_E3M2", [4], 3)]


@pytest.mark.parametrize(("dtype", "shape", "nbytes"), PACKED)
def test_sub_byte_dtypes_are_a_clean_refusal_as_the_oracles_give(dtype, shape, nbytes, tmp_path):
    from safetensors import safe_open as oracle_open

    path = _safetensors(tmp_path / "p.safetensors", dtype, shape, nbytes)
    with oracle_open(os.fspath(path), framework="numpy") as theirs, pytest.raises(Exception):  # noqa: B017, PT011 - its own error
        theirs.get_tensor("t")  # the oracle has no numpy array for it either
    with gc.safe_open(path) as ours:
        assert ours.keys() == ["t"]
        with pytest.raises(FormatError) as e:
            ours.get_tensor("t")
    assert e.value.rule == "tensor.dtype" and dtype in e.value.message
    assert bytes(gc.load(path).tensors["t"].data) == bytes(range(nbytes))  # the packed bytes stay readable


def test_mlx_cannot_load_sub_byte_dtypes_either(tmp_path):
    mx = pytest.importorskip("mlx.core")
    for dtype, shape, nbytes in PACKED:
        path = _safetensors(tmp_path / f"{dtype}.safetensors", dtype, shape, nbytes)
        with pytest.raises(Exception):  # noqa: B017, PT011 - mlx's own error
            mx.load(os.fspath(path))


def test_whole_byte_dtypes_still_match_the_oracle(tmp_path):
    from safetensors import safe_open as oracle_open

    for dtype, width in (("U8", 1), ("I16", 2), ("F32", 4), ("BOOL", 1)):
        path = _safetensors(tmp_path / f"{dtype}.safetensors", dtype, [2], 2 * width)
        with gc.safe_open(path) as ours, oracle_open(os.fspath(path), framework="numpy") as theirs:
            a, b = ours.get_tensor("t"), theirs.get_tensor("t")
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_a_600_tensor_ollama_model_opens_under_1024_open_files(tmp_path):
    """One blob per tensor, as Ollama's Go writer stores them: the model opens, is read whole and validates in a
    child process whose limit of open files is 1,024 (two descriptors per blob would need over 1,200)."""
    code = textwrap.dedent(
        f"""
        import resource, numpy as np
        from gguf_construct.api import ollama_model as ollama
        from gguf_construct.formats.safetensors.schema import SAFETENSORS
        import gguf_construct as gc

        def blob(name, i):
            data = np.full((2, 3), i, dtype=np.float32)
            return SAFETENSORS.build({{"tensors": {{name: {{"dtype": "F32", "shape": [2, 3], "data": data}}}}, "style": "ollama"}})

        blobs = [(f"t{{i}}.weight", blob(f"t{{i}}.weight", i)) for i in range(600)]
        path = ollama.write_model({os.fspath(tmp_path)!r}, "many:latest", blobs, {{"model_format": "safetensors"}})
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        assert gc.validate(path) == []
        model = gc.load(path)
        assert len(model.tensors) == 600
        assert float(model.tensors["t599.weight"].to_numpy().sum()) == 599 * 6
        print("ok", len(model.blobs))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.fspath(ROOT)}
    )
    assert run.stdout.split() == ["ok", "600"], run.stderr[-2000:]
