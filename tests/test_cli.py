"""The command line: info (text, JSON), validate (profiles, exit codes), example."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import CORPUS

from gguf_construct.cli.main import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_info_json_shape(capsys):
    assert main(["info", "--json", str(CORPUS / "generated/ggml-writer-kquants.gguf")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"format", "version", "byte_order", "alignment", "data_offset", "metadata", "tensors", "summary"}
    arr = next(m for m in out["metadata"] if m["key"] == "test.arr_str")
    assert arr["type"] == "arr" and arr["array_type"] == "str" and arr["n"] == 4 and "values" not in arr
    assert out["tensors"][0] == {"name": "blk.0.q2_K.weight", "type": "q2_K", "shape": [512, 4], "offset": 0, "nbytes": 672}


def test_info_full_lists_values(capsys):
    assert main(["info", "--json", "--full", str(CORPUS / "generated/ggml-writer-kquants.gguf")]) == 0
    arr = next(m for m in json.loads(capsys.readouterr().out)["metadata"] if m["key"] == "test.arr_str")
    assert arr["values"][-1] == "<|endoftext|>"


def test_info_text_and_validate_exit_codes():
    r = run("info", CORPUS / "gguf/v3-llama-vocab.gguf")
    assert r.returncode == 0 and "tokenizer.ggml.tokens" in r.stdout and "arr[str]" in r.stdout
    r = run("validate", CORPUS / "gguf/v3-llama-vocab.gguf", CORPUS / "corrupt/damaged-gpt-2-vocab.gguf")
    assert r.returncode == 1
    assert "[string.length] metadata_kv[8].key at offset 347" in r.stdout and "Traceback" not in r.stdout + r.stderr
    r = run("validate", "--profile", "ggml", CORPUS / "generated/gguf-py-nested-array.gguf")
    assert r.returncode == 1 and "[array.nested]" in r.stdout
    assert run("validate", CORPUS / "generated/gguf-py-nested-array.gguf").returncode == 0


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
    assert r.returncode == 0 and r.stdout.strip().endswith("example.gguf")
    assert run("info", r.stdout.strip()).returncode == 0
