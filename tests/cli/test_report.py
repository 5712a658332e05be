"""``info``: the readable report, --json, --markdown, any file object, many files on a process pool."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.api.safetensors_file import SafetensorsDType
from gguf_construct.cli.main import main
from gguf_construct.cli.report import info_json, info_markdown, info_text, summary
from gguf_construct.data import example_path


def run(*args):
    return subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_summary_counts_parameters_and_sizes():
    f = gc.load(example_path())
    s = summary(f, str(example_path()))
    assert s["architecture"] == "llama"
    assert s["parameters"] == sum(int(np.prod(t.shape)) for t in f.tensors.values()) == 21_152
    assert {g["type"]: g["nbytes"] for g in s["size_by_type"]} == {"f16": 41_984, "f32": 640}
    assert s["tensor_bytes"] == sum(t.nbytes for t in f.tensors.values())
    assert s["tokenizer"]["tokens"] == 16 and s["tokenizer"]["bos"] == {"id": 1, "text": "<s>"}
    assert s["file_type"] == "MOSTLY_F16" and s["general"]["general.name"] == "gguf-construct example"
    # the shipped file's name follows the naming convention and agrees with its metadata
    assert {k: s["name"][k] for k in ("BaseName", "SizeLabel", "Version", "Encoding")} == {
        "BaseName": "gguf-construct-example",
        "SizeLabel": "21K",
        "Version": "v1.0",
        "Encoding": "F16",
    }
    assert s["name_warnings"] == []


def test_text_report_has_every_section(tmp_path):
    f = gc.load(example_path())
    f.metadata["tokenizer.chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
    f.metadata["general.basename"] = "Example"
    path = tmp_path / "Other-21K-v1.0-F16.gguf"
    f.save(path)
    text = info_text(gc.load(path), str(path))
    for needle in (
        "architecture      llama",
        "parameters        21K (21,152)",
        "f16",
        "98.5%",
        "chat template:",
        "{% for m in messages %}",
        "tokenizer         model llama, tokens 16",
        "BaseName Other",
    ):
        assert needle in text, needle
    assert "warning: the name's BaseName is 'Other', the metadata says 'Example'" in text


def test_json_keeps_its_shape_and_adds_summary(capsys):
    assert main(["info", "--json", str(example_path())]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"format", "version", "byte_order", "alignment", "data_offset", "metadata", "tensors"} <= set(out)
    assert out["summary"]["parameters"] == 21_152
    assert out["tensors"]["token_embd.weight"] == {"type": "f16", "shape": [32, 16], "offset": 0, "nbytes": 1024}
    assert out["metadata"]["general.architecture"] == {"type": "str", "value": "llama"}


def test_markdown_tables():
    name = example_path().name
    md = info_markdown(gc.load(example_path()), name)
    assert md.startswith(f"# {name}\n") and "- File name: BaseName `gguf-construct-example`" in md
    assert "| POS | TYPE | Count | Key | Value |" in md and "| 1 | str | 1 | general.architecture | `llama` |" in md
    assert "| 0 | token_embd.weight | f16 | 32 × 16 | 512 | 1,024 | 0x0 |" in md
    r = run("info", "--markdown", example_path())
    assert r.returncode == 0 and r.stdout == md


class _Tensor:
    def __init__(self, name, arr):
        self.name, self._arr = name, arr
        self.shape, self.type, self.nbytes = tuple(reversed(arr.shape)), SafetensorsDType.of("F32"), arr.nbytes
        self.data = arr.view(np.uint8).reshape(-1)

    def to_numpy(self):
        return self._arr


class _OtherFormat:
    """A file object of the common protocol that is not a GGUFFile (as a safetensors or legacy loader gives)."""

    format = "safetensors"
    path = "model.safetensors"

    def __init__(self):
        self.metadata = {"format": "pt", "general.architecture": "llama"}
        self.tensors = {"w": _Tensor("w", np.ones((2, 3), dtype=np.float32))}


def test_any_file_object():
    f = _OtherFormat()
    j = info_json(f)
    assert j["format"] == "safetensors" and j["version"] is None
    assert j["metadata"]["format"] == {"type": "str", "value": "pt"}
    assert j["tensors"] == {"w": {"type": "F32", "shape": [3, 2], "offset": None, "nbytes": 24}}
    assert j["summary"]["parameters"] == 6
    assert "safetensors" in info_text(f, "model.safetensors") and "| 0 | w | F32 | 3 × 2 |" in info_markdown(f, "m")


def test_many_files_and_directories_on_a_pool(tmp_path):
    for name in ("gguf-py-le.gguf", "ggml-writer-kquants.gguf"):
        shutil.copy(corpus_file(f"generated/{name}"), tmp_path / name)
    (tmp_path / "README.txt").write_text("not a model")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    r = run("info", "--jobs", "2", tmp_path)
    assert r.returncode == 1  # one file is unreadable
    assert "gguf-py-le.gguf" in r.stdout and "ggml-writer-kquants.gguf" in r.stdout and "README" not in r.stdout
    assert "3 files, 2 read, 1 unreadable" in r.stdout
    r = run("info", "--json", "-j", "2", tmp_path / "gguf-py-le.gguf", tmp_path / "ggml-writer-kquants.gguf")
    rows = json.loads(r.stdout)
    assert r.returncode == 0 and [row["tensors"] for row in rows] == [9, 9] and all(row["ok"] for row in rows)


def test_help_texts():
    for cmd in ("info", "validate", "set", "delete", "rename-tensor", "diff", "hash", "split", "merge"):
        r = run(cmd, "--help")
        assert r.returncode == 0 and "usage:" in r.stdout, cmd
