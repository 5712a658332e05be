"""The command line: info (text, JSON), validate (profiles, exit codes), example."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

from conftest import corpus_file

from gguf_construct.cli.main import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_info_json_shape(capsys):
    assert main(["info", "--json", str(corpus_file("generated/ggml-writer-kquants.gguf"))]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"format", "version", "byte_order", "alignment", "data_offset", "metadata", "tensors", "summary"}
    arr = out["metadata"]["test.arr_str"]
    assert arr["type"] == "arr" and arr["array_type"] == "str" and arr["n"] == 4 and "values" not in arr
    assert next(iter(out["tensors"].items())) == ("blk.0.q2_K.weight", {"type": "q2_K", "shape": [512, 4], "offset": 0, "nbytes": 672})


def test_info_full_lists_values(capsys):
    assert main(["info", "--json", "--full", str(corpus_file("generated/ggml-writer-kquants.gguf"))]) == 0
    arr = json.loads(capsys.readouterr().out)["metadata"]["test.arr_str"]
    assert arr["values"][-1] == "<|endoftext|>"


SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value types → bytes


def first_impossible_key(data: bytes) -> tuple[int, int, int]:
    """Walk a little-endian GGUF v3 header with struct (independently of the schema) to the first key whose
    length runs past the end of the file: (its index, the offset of its bytes, just past the u64 length, the length)."""
    (n_kv,) = struct.unpack_from("<Q", data, 16)
    at = 24
    for index in range(n_kv):
        (key_len,) = struct.unpack_from("<Q", data, at)
        if key_len > len(data) - at - 8:
            return index, at + 8, key_len
        at += 8 + key_len
        (vtype,) = struct.unpack_from("<I", data, at)
        at += 4
        count, etype = 1, vtype
        if vtype == 9:  # array: element type, count
            etype, count = struct.unpack_from("<IQ", data, at)
            at += 12
        for _ in range(count):
            if etype == 8:  # string
                at += 8 + struct.unpack_from("<Q", data, at)[0]
            else:
                at += SCALAR_SIZES[etype]
    raise AssertionError("no impossible key length")


def test_info_text_and_validate_exit_codes():
    r = run("info", corpus_file("gguf/v3-llama-vocab.gguf"))
    assert r.returncode == 0 and "tokenizer.ggml.tokens" in r.stdout and "arr[str]" in r.stdout
    damaged = corpus_file("corrupt/damaged-gpt-2-vocab-head.gguf")
    r = run("validate", corpus_file("gguf/v3-llama-vocab.gguf"), damaged)
    assert r.returncode == 1
    index, offset, length = first_impossible_key(damaged.read_bytes())
    assert length > damaged.stat().st_size - offset
    assert f"[string.length] metadata_kv[{index}].key at offset {offset}" in r.stdout and "Traceback" not in r.stdout + r.stderr
    r = run("validate", "--profile", "ggml", corpus_file("generated/gguf-py-nested-array.gguf"))
    assert r.returncode == 1 and "[array.nested]" in r.stdout
    assert run("validate", corpus_file("generated/gguf-py-nested-array.gguf")).returncode == 0


def test_bad_input_is_one_line_and_exit_1(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    r = run("info", bad)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_usage_errors_exit_2():
    assert run("info").returncode == 2
    assert run("validate", "--profile", "nope", "x").returncode == 2


def test_example_path_is_the_shipped_file():
    r = run("example")
    assert r.returncode == 0 and r.stdout.strip().endswith("gguf-construct-example-21K-v1.0-F16.gguf")
    assert run("info", r.stdout.strip()).returncode == 0
