"""``set``, ``delete``, ``rename-tensor``: atomic rewrites read back by gguf-py, in-place same-size edits, typing."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import corpus_file
from gguf import GGUFReader

import gguf_construct as gc
from gguf_construct.cli.edit import parse_value


def run(*args):
    return subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.gguf"
    shutil.copy(corpus_file("generated/gguf-py-le.gguf"), path)
    path.chmod(0o644)
    return path


def _tensor_bytes(path):
    return {t.name: bytes(t.data.data) for t in GGUFReader(path).tensors}


def test_set_any_type_and_size_rewrites_atomically(model):
    before = _tensor_bytes(model)
    template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}" * 20
    (model.parent / "t.jinja").write_text(template)
    assert run("set", model, "tokenizer.chat_template", "--value-file", model.parent / "t.jinja").returncode == 0
    assert run("set", model, "general.name", "a new, much longer name").returncode == 0
    assert run("set", model, "my.ids", "[1, 2, 65535]", "--type", "arr[u16]").returncode == 0
    assert run("set", model, "my.ratio", "0.25").returncode == 0
    r = GGUFReader(model)
    assert r.fields["tokenizer.chat_template"].contents() == template
    assert r.fields["general.name"].contents() == "a new, much longer name"
    assert r.fields["my.ids"].contents() == [1, 2, 65535] and r.fields["my.ids"].types[-1].name == "UINT16"
    assert r.fields["my.ratio"].types[0].name == "FLOAT32"
    assert _tensor_bytes(model) == before  # tensor data streamed unchanged
    assert not list(model.parent.glob(".*.tmp"))  # no temporary file left behind


def test_output_leaves_the_input_untouched(model, tmp_path):
    original = model.read_bytes()
    out = tmp_path / "out.gguf"
    assert run("set", model, "general.name", "x", "-o", out).returncode == 0
    assert model.read_bytes() == original and GGUFReader(out).fields["general.name"].contents() == "x"


def test_standard_keys_are_type_checked(model):
    r = run("set", model, "general.name", "5", "--type", "u32")
    assert r.returncode == 2 and "standard key" in r.stderr
    assert run("set", model, "llama.context_length", "not-a-number").returncode == 2
    assert run("set", model, "llama.context_length", "4096").returncode == 0
    assert gc.load(model).metadata.type_of("llama.context_length") == "u32"  # the standard type, not JSON's i32
    assert run("set", model, "general.name", "5", "--type", "u32", "--force").returncode == 0


def test_in_place_same_size_only(model):
    assert run("set", model, "llama.context_length", "4096").returncode == 0
    size = model.stat().st_size
    inode = model.stat().st_ino
    r = run("set", model, "llama.context_length", "8192", "--in-place")
    assert r.returncode == 0 and "in place" in r.stdout
    assert model.stat().st_ino == inode and model.stat().st_size == size  # the same file, edited
    assert GGUFReader(model).fields["llama.context_length"].contents() == 8192
    r = run("set", model, "general.name", "a name of another length", "--in-place")
    assert r.returncode == 2 and "same size" in r.stderr
    assert [i for i in gc.validate(model) if i.severity == "error"] == []  # still a valid file


def test_delete_and_rename_tensor(model):
    names = [t.name for t in GGUFReader(model).tensors]
    data = _tensor_bytes(model)
    assert run("delete", model, "general.name").returncode == 0
    assert "general.name" not in GGUFReader(model).fields
    assert run("delete", model, "no.such.key").returncode == 2
    assert run("delete", model, "no.such.key", "--missing-ok").returncode == 0
    assert run("rename-tensor", model, names[1], "renamed.weight").returncode == 0
    after = [t.name for t in GGUFReader(model).tensors]
    assert after == [names[0], "renamed.weight", *names[2:]]
    assert _tensor_bytes(model)["renamed.weight"] == data[names[1]]
    assert run("rename-tensor", model, names[0], "renamed.weight").returncode == 2  # exists
    assert run("rename-tensor", model, "nope", "x").returncode == 2


def test_parse_value():
    assert parse_value("true", "bool") == (True, "bool")
    assert parse_value("0x10", "u8") == (16, "u8")
    assert parse_value("[1, 2]", None) == ([1, 2], "arr[i32]")
    assert parse_value("hello", None) == ("hello", "str")
    assert parse_value("1e-5", "f32") == (1e-5, "f32")
    with pytest.raises(ValueError):
        parse_value("maybe", "bool")
    with pytest.raises(ValueError):
        gc.new().metadata.set("k", parse_value("[1, 300]", "arr[u8]")[0], type="arr[u8]")  # 300 does not fit u8
    assert np.array_equal(parse_value("[1, 2]", "arr[u8]")[0], [1, 2])
