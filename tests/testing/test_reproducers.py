"""The reproducers the fuzzers found (tests/reproducers/, docs/findings.md): our behaviour on each, and what the
other reader does today. If an assertion about another reader fails, that reader changed: update the findings."""

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
    region). A window starts at 16 KiB and grows only as far as the strings go (at most 1 MiB, whatever the
    file's size); the file is rejected within the fuzzers' budget."""
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


# -- the 30-minute campaigns: denial of service in ggml (ggml-python 0.0.45, ggml 0.15.3) --------------------
def _ggml_worker_failure(name: str):
    """What ggml-python's reader does with a reproducer, in a worker process (it may abort or trap)."""
    from gguf_construct.testing.fuzzing.triage import failure

    worker = _python_worker("ggml", "ggml", 1024, timeout=30.0)
    try:
        answer = worker.ask(str(REPRO / name))
    finally:
        worker.close()
    return answer, failure(answer, "ggml")


_NEWER_GGML = """
import ctypes, pathlib, sys, llama_cpp
lib = ctypes.CDLL(str(pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
class Params(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]
lib.gguf_init_from_file.restype = ctypes.c_void_p
lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, Params]
print("accepted" if lib.gguf_init_from_file(sys.argv[1].encode(), Params(True, None)) else "rejected")
"""


def _newer_ggml(name: str) -> str:
    """The verdict of the newer ggml that llama-cpp-python ships (ggml 0.25.3), in a subprocess."""
    import subprocess
    import sys

    pytest.importorskip("llama_cpp")
    done = subprocess.run([sys.executable, "-c", _NEWER_GGML, str(REPRO / name)], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() if done.returncode == 0 else f"died ({done.returncode})"


@pytest.mark.parametrize(
    ("name", "rule", "signature", "newer"),
    [
        ("ggml-assert-empty-key.gguf", "key.empty", "dos/ggml/GGML_ASSERT(!key.empty())@gguf.cpp:143", "rejected"),
        (
            "ggml-assert-alignment-type.gguf",
            "alignment.type",
            "dos/ggml/GGML_ASSERT(type_to_gguf_type<T>::value == type)@gguf.cpp:194",
            "rejected",
        ),
        (
            "ggml-sigfpe-zero-dim.gguf",
            "tensor.shape",
            "crash/ggml/arithmetic-trap@gguf_init_from_file (called from adapters.py)",
            "accepted",
        ),
    ],
)
def test_files_that_kill_ggml_python_and_that_a_newer_ggml_reads_safely(monkeypatch, name, rule, signature, newer):
    """An empty key and a general.alignment of another type abort ggml 0.15.3 (GGML_ASSERT); a zero ne[1] makes its
    element-count check divide by zero. ggml 0.17.0 and 0.20.0 fixed them: the newer ggml refuses the first two and
    reads the third as an empty tensor. Both our profiles refuse all three."""
    monkeypatch.setenv("GGML_NO_BACKTRACE", "1")
    for profile in ("spec", "ggml"):
        assert rule in errors(name, profile)
    answer, found = _ggml_worker_failure(name)
    assert found is not None and found.signature == signature, (known_behaviour("ggml-python", f"dies on {name}"), answer)
    assert _newer_ggml(name) == newer, known_behaviour("llama-cpp-python", f"its ggml {newer} {name}")


# -- llama.cpp's vocabulary loader (llama-cpp-python 0.3.36, llama.cpp 0c1e570) -----------------------------------
@pytest.mark.parametrize(
    ("name", "rule", "signature"),
    [
        (
            "llama-cpp-duplicate-token.gguf",
            "tokenizer.duplicate",
            "dos/llama.cpp/GGML_ASSERT(id_to_token.size() == token_to_id.size())@llama-vocab.cpp:2544",
        ),
        ("llama-cpp-wpm-byte-token.gguf", "tokenizer.byte_token", "dos/llama.cpp/abort(fatal error)@llama-vocab.cpp:3207"),
    ],
)
def test_vocabularies_that_abort_llama_cpp(monkeypatch, name, rule, signature):
    """Two tokens with the same text, and a BYTE-type token in a WPM (bert) vocabulary, abort llama.cpp's
    vocab-only load. GGUF allows both: our validator warns of each (the file stays valid)."""
    pytest.importorskip("llama_cpp")
    from gguf_construct.testing.fuzzing.triage import failure

    monkeypatch.setenv("GGML_NO_BACKTRACE", "1")
    for profile in ("spec", "ggml"):
        issues = {(i.rule, i.severity) for i in validate_bytes(data(name), profile)}
        assert issues == {(rule, "warning")}, (profile, issues)
    worker = _python_worker("llama.cpp", "ggml", 1024, timeout=60.0)
    try:
        answer = worker.ask(str(REPRO / name))
    finally:
        worker.close()
    found = failure(answer, "llama.cpp")
    assert found is not None and found.signature == signature, (known_behaviour("llama-cpp-python", f"aborts on {name}"), answer)


# -- gguf-py 0.19.0: a string past the end of the file --------------------------------------------------------
def test_a_string_running_past_the_end_is_read_cut_short_by_gguf_py():
    """The last value claims a 2^40-byte string and one byte is left: gguf-py slices its memmap past the end
    (numpy clamps the slice) and returns the one byte as the whole string."""
    name = "gguf-py-truncated-string.gguf"
    assert errors(name) == {"string.length"}
    kv = {k: v for k, _t, v in read_gguf_py(str(REPRO / name))["kv"]}
    assert kv.get("a.text") == "t", known_behaviour("gguf", "reads the 2^40-byte string as 't'")


# -- @huggingface/gguf (Node; optional) ------------------------------------------------------------------------
#: The installed @huggingface/gguf's version (its package.json, beside the dist/ folder that require resolves)
_HF_VERSION = r"""JSON.parse(require("fs").readFileSync(
    require.resolve("@huggingface/gguf").replace(/dist[\\/].*$/, "package.json"))).version"""


def _hf_gguf_reader():
    """A line-protocol target for @huggingface/gguf through the example adapter, and its version (the tests that use
    it are marked ``hf_gguf``: deselected, and reported, without node and the package)."""
    import subprocess

    from gguf_construct.testing.fuzzing.targets import LineTarget

    done = subprocess.run(["node", "-p", _HF_VERSION], capture_output=True, text=True, timeout=60, check=True)
    script = Path(__file__).parents[2] / "gguf_construct" / "testing" / "fuzzing" / "examples" / "hf_gguf_reader.cjs"
    return LineTarget(["node", str(script)], timeout=3.0), done.stdout.strip()


def _hf_known(version: str, what: str) -> str:
    return f"@huggingface/gguf 0.4.6 {what}; installed is {version}: if it changed, update docs/findings.md and this test"


@pytest.mark.hf_gguf
def test_hf_gguf_reads_past_the_end_of_a_file_as_zero_bytes():
    """A 24-byte header claiming 3 keys and 3 tensors: the reader's buffer is a whole zero-filled 2 MB chunk, so it
    reads 3 keys and 3 tensors out of nothing, and a 11-byte file claiming 8.4 million tensors keeps it busy for
    seconds (17 s and 416 MB on a 2-core machine) before the 50 MB buffer limit stops it."""
    target, version = _hf_gguf_reader()
    try:
        past_end = target.ask(str(REPRO / "hf-gguf-reads-past-end.gguf"))
        hang = target.ask(str(REPRO / "hf-gguf-hang-tensor-count.gguf"))
    finally:
        target.close()
    assert errors("hf-gguf-reads-past-end.gguf") == {"header.n_kv"}
    assert errors("hf-gguf-hang-tensor-count.gguf") == {"parse.truncated"}
    assert past_end.status == "accepted" and past_end.view is not None, (_hf_known(version, "accepts the 24-byte file"), past_end)
    assert [t[0] for t in past_end.view["tensors"]] == ["", "", ""], _hf_known(version, "reads 3 tensors out of zero bytes")
    # it trusts the count and grows its buffer for 8.4 million tensor infos: seconds of awaits until the 50 MB limit,
    # or, where the runtime caps ArrayBuffer.prototype.resize lower (Node 20.20), a RangeError from that growth at once
    grew = hang.status == "rejected" and "ArrayBuffer.prototype.resize" in hang.error
    assert hang.status == "hang" or grew, (_hf_known(version, "takes seconds on an 11-byte file"), hang)


@pytest.mark.hf_gguf
def test_hf_gguf_pads_to_an_alignment_that_is_not_a_power_of_two_with_a_bit_mask():
    """general.alignment = 24 (a multiple of 8: the spec allows it; ggml and gguf-py refuse it): the data starts at
    120, and @huggingface/gguf computes (x + 23) & ~23 = 104, inside the tensor infos."""
    name = "hf-gguf-alignment-24.gguf"
    f = load(REPRO / name)
    assert (f.alignment, f.data_offset) == (24, 120) and f.tensors["w.weight"].to_numpy().tolist() == list(range(8))
    assert "alignment.value" in errors(name, "ggml") and not errors(name, "spec")
    target, version = _hf_gguf_reader()
    try:
        answer = target.ask(str(REPRO / name))
    finally:
        target.close()
    assert answer.view is not None and answer.view["data_offset"] == 104, (_hf_known(version, "puts the data at 104"), answer)


def test_the_known_lists_silence_every_bug_found_here():
    """fuzz/known/<reader>.txt lists the triaged kinds of each campaign (for --known); each bug above is among them."""
    from gguf_construct.testing.fuzzing.findings_file import load_known

    known = Path(__file__).parents[2] / "fuzz" / "known"
    bugs = {
        "ggml.txt": [
            "dos/ggml/GGML_ASSERT(!key.empty())@gguf.cpp:143",
            "dos/ggml/GGML_ASSERT(type_to_gguf_type<T>::value == type)@gguf.cpp:194",
            "crash/ggml/arithmetic-trap@gguf_init_from_file (called from adapters.py)",
        ],
        "llama.cpp.txt": [
            "dos/llama.cpp/GGML_ASSERT(id_to_token.size() == token_to_id.size())@llama-vocab.cpp:2544",
            "dos/llama.cpp/abort(fatal error)@llama-vocab.cpp:3207",
        ],
        "gguf-py.txt": ["accepted-invalid/gguf-py/string.length", "value-mismatch/gguf-py/dequant:big-endian", "hang/gguf-py"],
        "hf_gguf_reader.txt": ["accepted-invalid/hf_gguf_reader.cjs/header.n_kv", "hang/hf_gguf_reader.cjs"],
        "safetensors.txt": [],
    }
    assert {p.name for p in known.glob("*.txt")} == set(bugs)
    for name, signatures in bugs.items():
        listed = load_known(known / name)
        assert listed and set(signatures) <= set(listed), name
