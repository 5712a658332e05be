"""GGUF → safetensors → GGUF keeps every GGUF key (typed ``gguf:`` entries of ``__metadata__``) and every tensor:
the two GGUF files compared key by key, tensor by tensor and byte for byte; the safetensors file still loads in
the ``safetensors`` library."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.cli.main import main
from gguf_construct.convert.gguf_keys_json import PREFIX, decode_keys, encode_keys, restore_keys
from gguf_construct.data import example_path


def round_trip(src: Path, tmp_path: Path) -> tuple[Path, Path]:
    st, back = tmp_path / "m.safetensors", tmp_path / "back.gguf"
    assert main(["convert", str(src), str(st)]) == 0
    assert main(["convert", str(st), str(back)]) == 0
    return st, back


def same_value(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()  # NaN payloads too
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(p, q) for p, q in zip(a, b))  # type: ignore[arg-type]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def assert_same_gguf(a: Path, b: Path) -> None:
    fa, fb = gc.load(a), gc.load(b)
    assert list(fa.metadata) == list(fb.metadata)
    for key in fa.metadata:
        assert fa.metadata.type_of(key) == fb.metadata.type_of(key), key
        assert same_value(list(fa.metadata[key]) if fa.metadata.type_of(key) == "arr[str]" else fa.metadata[key],
                          list(fb.metadata[key]) if fb.metadata.type_of(key) == "arr[str]" else fb.metadata[key]), key  # fmt: skip
    assert list(fa.tensors) == list(fb.tensors)
    for name in fa.tensors:
        ta, tb = fa.tensors[name], fb.tensors[name]
        assert (ta.type, ta.shape, bytes(ta.data)) == (tb.type, tb.shape, bytes(tb.data)), name


def test_the_example_comes_back_exactly(tmp_path: Path) -> None:
    st, back = round_trip(example_path(), tmp_path)
    assert_same_gguf(example_path(), back)
    assert back.read_bytes() == example_path().read_bytes()


def test_the_safetensors_library_reads_the_keys(tmp_path: Path) -> None:
    from safetensors import safe_open

    st, _ = round_trip(example_path(), tmp_path)
    source = gc.load(example_path())
    with safe_open(str(st), "np") as f:
        stored = f.metadata()
        assert set(f.keys()) == set(source.tensors)
        for name in f.keys():  # noqa: SIM118  (a safe_open handle is not iterable)
            assert np.array_equal(f.get_tensor(name), source.tensors[name].to_numpy())
    entries = {k: v for k, v in stored.items() if k.startswith(PREFIX)}
    assert sorted(k[len(PREFIX) :] for k in entries) == sorted(source.metadata)
    assert [key for key, _, _ in decode_keys(stored)] == list(source.metadata)  # the recorded order, from a hash map
    arch = json.loads(entries[PREFIX + "general.architecture"])
    assert arch == {"type": "str", "value": source.metadata["general.architecture"]}


def test_every_value_type_and_awkward_values_come_back(tmp_path: Path) -> None:
    f = gc.load(example_path())
    bits = np.array([0x7FC00001, 0xFF800000, 0x7F800000, 0x80000000], np.uint32).view(np.float32)  # a NaN payload, ±inf, -0
    odd = {
        "test.u8": (255, "u8"), "test.i8": (-128, "i8"), "test.u16": (65535, "u16"), "test.i16": (-32768, "i16"),
        "test.u32": (2**32 - 1, "u32"), "test.i32": (-(2**31), "i32"), "test.u64": (2**64 - 1, "u64"),
        "test.i64": (-(2**63), "i64"), "test.f32.nan": (bits[0], "f32"), "test.f64": (float(np.float64(1) / 3), "f64"),
        "test.f64.inf": (-math.inf, "f64"), "test.bool": (True, "bool"), "test.str": ('a "quote", \\, \x00 and é', "str"),
        "test.empty": ("", "str"), "test.arr.f32": (bits, "arr[f32]"), "test.arr.str": (["", "x", "\n"], "arr[str]"),
        "test.arr.empty": ([], "arr[u8]"), "test.arr.bool": ([True, False], "arr[bool]"),
        "test.arr.arr": ([np.array([1, 2], np.uint8), np.array([3], np.uint8)], "arr[arr[u8]]"),
    }  # fmt: skip
    for key, (value, kind) in odd.items():
        f.metadata.set(key, value, type=kind)
    src = tmp_path / "odd.gguf"
    f.save(src)
    _, back = round_trip(src, tmp_path)
    assert_same_gguf(src, back)
    assert back.read_bytes() == src.read_bytes()


def test_a_type_change_is_said_and_the_type_keys_are_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q = tmp_path / "q.gguf"
    assert main(["quantize", str(example_path()), str(q), "--type", "q8_0"]) == 0
    capsys.readouterr()
    st, back = tmp_path / "q.safetensors", tmp_path / "q-back.gguf"
    assert main(["convert", str(q), str(st)]) == 0
    assert "general.file_type and general.quantization_version are not kept" in capsys.readouterr().err
    fq, fb = gc.load(q), gc.load(back) if main(["convert", str(st), str(back)]) == 0 else None
    assert fb is not None
    kept = [k for k in fq.metadata if k not in ("general.file_type", "general.quantization_version")]
    assert list(fb.metadata)[: len(kept)] == kept
    assert fb.metadata["general.file_type"] != fq.metadata["general.file_type"]  # described anew: BF16/F32 now
    assert "general.quantization_version" not in fb.metadata  # no quantized tensor left


BROKEN = [
    "{",
    '{"type": 1, "value": 2}',
    '["u8", 1]',
    '{"type": "f32", "value": "0xzz"}',
    '{"type": "f64", "value": "-0x1"}',
    '{"type": "f32", "value": "0x1ffffffff"}',
    '{"type": "arr[f32]", "value": 3}',
    '{"type": "u8", "value": 300}',
    '{"type": "u9", "value": 1}',
    '{"type": "str", "value": 5}',
    '{"type": "arr[arr[u8]]", "value": [[1], 2]}',
    '{"type": "arr[u8]", "value": ' + "[" * 100_000 + "]" * 100_000 + "}",  # deeper than Python's recursion limit
]


@pytest.mark.parametrize("text", BROKEN, ids=range(len(BROKEN)))
def test_a_broken_entry_is_refused_by_rule_and_name(text: str) -> None:
    f = gc.new()
    with pytest.raises(gc.InvalidValueError) as refused:
        restore_keys(f.metadata, {PREFIX + "k": text})
    assert refused.value.rule == "convert.gguf_keys" and "gguf:k" in str(refused.value)


def test_a_hostile_safetensors_file_is_an_invalid_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st, _ = round_trip(example_path(), tmp_path)
    from gguf_construct.api.safetensors_file import load_safetensors, save_safetensors

    f = load_safetensors(st)
    entries = {n: f.tensors[n].to_numpy() for n in f.tensors}
    save_safetensors(tmp_path / "hostile.safetensors", entries, {**f.metadata, PREFIX + "general.name": '{"type": "u8", "value": -1}'})
    assert main(["convert", str(tmp_path / "hostile.safetensors"), str(tmp_path / "h.gguf")]) == 1
    assert "[convert.gguf_keys]" in capsys.readouterr().err and not (tmp_path / "h.gguf").exists()


def test_entries_of_other_writers_are_left_alone() -> None:
    assert list(decode_keys({"other": "{", "format": "pt"})) == []


def test_encoding_is_json_the_safetensors_library_accepts() -> None:
    f = gc.load(example_path())
    f.metadata.set("test.nan", float("nan"), type="f64")
    for text in encode_keys(f.metadata).values():
        json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
