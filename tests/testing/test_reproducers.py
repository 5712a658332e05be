"""The reproducers the fuzzers found (tests/reproducers/, docs/findings.md): our behaviour on each, and what the
other reader does today. If an assertion about gguf-py or ggml fails, that reader changed: update the findings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from oracle_pins import known_behaviour

from gguf_construct import GGUF, FormatError, UnsupportedTypeError, from_bytes, load
from gguf_construct import validate as validate_bytes
from gguf_construct.testing.fuzzing.adapters import read_ggml, read_gguf_py
from gguf_construct.testing.fuzzing.runner import _python_worker

REPRO = Path(__file__).parents[1] / "reproducers"


def data(name: str) -> bytes:
    return (REPRO / name).read_bytes()


def errors(name: str, profile: str = "spec") -> set[str]:
    return {i.rule for i in validate_bytes(data(name), profile) if i.severity == "error"}


# -- ours -------------------------------------------------------------------------------------------------
def test_a_parsed_file_with_an_unknown_tensor_type_builds_back():
    """fuzz_parse found build(parse(b)) raising for a tensor type unknown to the table: the builder computed
    every offset even when all were given. Fixed in formats/gguf/schema.py (lay_out keeps given offsets)."""
    raw = data("ours-unknown-tensor-type.gguf")
    assert GGUF.build(GGUF.parse(raw)) == raw
    assert errors("ours-unknown-tensor-type.gguf") == {"tensor.type"}


def test_tensor_type_of_a_leniently_loaded_file_is_an_unknown_type_record():
    """fuzz_load found ``.type`` raising KeyError. Since forward compatibility (tests/api/test_forward_compat.py)
    an unknown id is a ``GGMLType`` named ``unknown(N)`` without sizes, and ``to_numpy`` raises the FormatError."""
    f = from_bytes(data("ours-unknown-tensor-type.gguf"), strict=False)
    t = f.tensors["w"].type
    assert not t.known and not t.sized and t.name == f"unknown({t.id})"
    with pytest.raises(UnsupportedTypeError):
        f.tensors["w"].to_numpy()


def test_to_numpy_of_a_tensor_with_a_partial_block_raises_a_format_error():
    """ne0 = 40 for Q4_0 (block size 32): the byte size rounds down to one block, dequantization gives 32 values,
    and reshaping them to (40,) raised numpy's ValueError (also: 0 dimensions, more than 64, zero dims)."""
    f = from_bytes(data("ours-to-numpy-partial-block.gguf"), strict=False)
    assert "tensor.block" in errors("ours-to-numpy-partial-block.gguf")
    with pytest.raises(FormatError):
        f.tensors["w"].to_numpy()


def test_a_valid_file_allocates_little_beyond_its_output_once_tables_are_built():
    """fuzz_load flagged 1.6 MB allocated for this 1280-byte file: the f16 lookup table (and its intermediates)
    built on first use, a one-time cost the harness now pays before fuzzing. Warm, the file stays in budget."""
    import tracemalloc

    raw = data("ours-cold-table-allocation.gguf")

    def load_and_dequantize() -> int:
        f = from_bytes(raw, strict=True)
        return sum(t.to_numpy().nbytes for t in f.tensors.values())

    produced = load_and_dequantize()  # builds the tables
    tracemalloc.start()
    try:
        load_and_dequantize()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert produced > 0 and peak <= 2 * len(raw) + 2 * produced + (1 << 20), peak


def test_the_string_scan_allocates_in_proportion_to_its_window_not_the_file():
    """fuzz_dequant: 1.1 MB allocated parsing this 33 KB file, whose string array claims more strings than it
    holds over a region of zeros (every position a candidate for the speculative scan, whose window spanned the
    region). Windows are now at most 1/16 of the file; the file is rejected within the fuzzers' budget."""
    import tracemalloc

    raw = data("ours-string-scan-window.gguf")
    with pytest.raises(FormatError):
        from_bytes(raw, strict=False)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError) as info:
            from_bytes(raw, strict=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.rule == "string.length"
    from gguf_construct.formats.gguf.string_scan import SCAN_WINDOW

    assert peak <= 2 * len(raw) + 33 * SCAN_WINDOW + (64 << 10), peak  # before: 1.04 MB


# -- gguf-py ------------------------------------------------------------------------------------------------
def test_q8_1_blocks_are_36_bytes():
    path = REPRO / "gguf-py-q8_1-block-size.gguf"
    assert load(path).tensors["w"].nbytes == 36 == read_ggml(str(path))["tensors"][0][4]
    assert read_gguf_py(str(path))["tensors"][0][4] == 40, known_behaviour(
        "gguf", "sizes a Q8_1 block at 40 bytes (GGML_QUANT_SIZES[Q8_1] = (32, 4 + 4 + 32))"
    )


def test_big_endian_tensors_dequantize_in_their_byte_order():
    path = REPRO / "gguf-py-big-endian-dequant.gguf"
    expected = np.arange(32, dtype=np.float32) / 4
    f = load(path)
    assert f.byte_order == "big"
    for name in ("w.f32", "w.f16"):
        assert np.array_equal(f.tensors[name].to_numpy(), expected)
    from gguf import GGUFReader
    from gguf import quants as gq

    t = next(t for t in GGUFReader(path).tensors if t.name == "w.f32")
    with np.errstate(all="ignore"):
        theirs = np.asarray(gq.dequantize(np.asarray(t.data), t.tensor_type)).reshape(-1)
    assert not np.array_equal(theirs, expected), known_behaviour("gguf", "dequantizes big-endian words as native ones")


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("gguf-py-accepts-overlap.gguf", "tensor.overlap"),
        ("gguf-py-accepts-misaligned-offset.gguf", "tensor.offset_alignment"),
        ("gguf-py-accepts-bool-2.gguf", "value.bool"),
        ("gguf-py-accepts-zero-dim.gguf", "tensor.shape"),
    ],
)
def test_files_gguf_py_accepts_and_we_reject(name, rule):
    assert rule in errors(name)
    with pytest.raises(FormatError) as info:
        from_bytes(data(name))
    assert info.value.rule == rule
    try:
        read_gguf_py(str(REPRO / name))  # gguf-py reads it without complaint
    except Exception as e:
        raise AssertionError(known_behaviour("gguf", f"reads {name} without complaint")) from e


def test_huge_array_count_is_rejected_at_once_while_gguf_py_hangs():
    name = "gguf-py-hangs-huge-array-count.gguf"
    assert errors(name) == {"array.length"}
    worker = _python_worker("gguf-py", "spec", 1024, timeout=3.0)
    try:
        answer = worker.ask(str(REPRO / name))
    finally:
        worker.close()
    assert answer.status == "hang", (known_behaviour("gguf", "hangs on a huge array count"), answer)


# -- ggml (ggml-python 0.0.45) ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("ggml-accepts-exabyte-tensor.gguf", "tensor.nbytes_overflow"),
        ("ggml-accepts-zero-dims.gguf", "tensor.n_dims"),
        ("ggml-accepts-truncated-data.gguf", "tensor.bounds"),
    ],
)
def test_files_ggml_reads_metadata_of_and_we_reject(name, rule):
    """ggml's metadata-only read (no_alloc) does not hold tensor data against the file size, and takes n_dims 0
    as a scalar; both profiles reject these files."""
    for profile in ("spec", "ggml"):
        assert rule in errors(name, profile)
    assert read_ggml(str(REPRO / name))["tensors"], known_behaviour("ggml-python", f"reads the metadata of {name}")
