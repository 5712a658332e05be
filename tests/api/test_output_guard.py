"""The output guard: no command writes over one of its inputs (by any name: the same path, ``./x``, a symlink, a
hard link, a shard of the set), every write is atomic (an interrupted one leaves no partial target), and ``scan
--out`` never truncates or appends to a file it did not write."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.api.fileio import TEMP_TAG, check_output, reading, write_atomic
from gguf_construct.cli.main import main
from gguf_construct.errors import InvalidValueError

KQUANTS = "generated/ggml-writer-kquants.gguf"
LEGACY = "legacy/ggmf-v1-llama-vocab.bin"
ALIASES = ("same", "dot", "symlink", "hardlink")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def alias(kind: str, target: Path, name: str) -> str:
    """``target`` named another way, from the working directory ``target.parent``: itself, ``./name``, a
    symlink or a hard link called ``name``."""
    if kind == "same":
        return target.name
    if kind == "dot":
        return f"./{target.name}"
    link = target.parent / name
    if kind == "symlink":
        link.symlink_to(target.name)
    else:
        os.link(target, link)
    return name


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if TEMP_TAG in p.name and p.name.endswith(".tmp")]


def code(argv: list[str]) -> int:
    """``main``'s exit code (a usage error leaves it as SystemExit)."""
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def refused(capsys, argv: list[str]) -> None:
    assert code(argv) == 2
    assert "output.input" in capsys.readouterr().err


# -- every writing command x every alias of its input ------------------------------------------------------------
def _model(tmp_path: Path, name: str = "m.gguf", rel: str = KQUANTS) -> Path:
    p = tmp_path / name
    shutil.copy(corpus_file(rel), p)
    return p


COMMANDS = {
    # name: (input file name, corpus file, argv from (input, output))
    "dequant": ("m.npz", KQUANTS, lambda i, o: ["dequant", i, o]),
    "quantize": ("m.gguf", KQUANTS, lambda i, o: ["quantize", i, o, "--type", "q8_0"]),
    "convert": ("m.gguf", KQUANTS, lambda i, o: ["convert", i, o, "--byte-order", "big"]),
    "convert-quantize": ("m.gguf", KQUANTS, lambda i, o: ["convert", i, o, "--type", "q8_0"]),
    "convert-safetensors": ("m.safetensors", KQUANTS, lambda i, o: ["convert", i, o]),  # a GGUF file named as the output kind
    "migrate": ("m.gguf", LEGACY, lambda i, o: ["migrate", i, o]),
    "export": ("m.gguf", KQUANTS, lambda i, o: ["export", i, o, "--to", "ggjt"]),
    "set": ("m.gguf", KQUANTS, lambda i, o: ["set", i, "general.name", "x", "-o", o]),
    "delete": ("m.gguf", KQUANTS, lambda i, o: ["delete", i, "general.name", "--missing-ok", "-o", o]),
    "rename-tensor": ("m.gguf", KQUANTS, lambda i, o: ["rename-tensor", i, "output.weight", "out2.weight", "-o", o]),
    "scan": ("m.gguf", KQUANTS, lambda i, o: ["scan", i, "--out", o]),
}


@pytest.mark.parametrize("kind", ALIASES)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_command_writes_over_its_input(command, kind, tmp_path, monkeypatch, capsys):
    name, rel, argv = COMMANDS[command]
    src = _model(tmp_path, name, rel)
    before = digest(src)
    monkeypatch.chdir(tmp_path)
    out = alias(kind, src, "alias" + src.suffix)
    refused(capsys, argv(src.name, out))
    assert digest(src) == before and src.stat().st_nlink == (2 if kind == "hardlink" else 1)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", ("symlink", "hardlink"))
def test_merge_and_split_refuse_a_shard_of_their_inputs(kind, tmp_path, monkeypatch, capsys):
    src = _model(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["split", "m.gguf", "s", "--max-tensors", "4"]) == 0
    shards = sorted(tmp_path.glob("s-*.gguf"))
    assert len(shards) >= 2
    before = [digest(p) for p in shards]
    for shard in (shards[0], shards[-1]):  # the first shard, and one the name does not give
        out = alias(kind, shard, f"merged-{shard.name}")
        refused(capsys, ["merge", shards[0].name, out])
    refused(capsys, ["merge", shards[0].name, shards[1].name])  # a shard by its own name
    assert [digest(p) for p in shards] == before
    # split: an output shard that is the input, by a symlink or a hard link, is refused before any shard is written
    m_before = digest(src)
    alias(kind, src, "t-00002-of-00002.gguf")
    assert code(["split", "m.gguf", "t", "--max-tensors", str(len(gc.load(src).tensors) - 1)]) == 2
    assert "output.input" in capsys.readouterr().err
    assert digest(src) == m_before and not (tmp_path / "t-00001-of-00002.gguf").exists()


def test_an_edit_without_o_still_replaces_its_own_file(tmp_path, capsys):
    src = _model(tmp_path)
    assert main(["set", str(src), "general.name", "edited"]) == 0
    assert gc.load(src).metadata["general.name"] == "edited"


def test_the_python_api_refuses_a_save_over_a_file_it_copies_from(tmp_path):
    src = _model(tmp_path)
    before = digest(src)
    f = gc.load(src)
    out = gc.new()
    for name in f.tensors:
        t = f.tensors[name]
        out.tensors.add(name, t.data, t.type.name, t.shape)
    for target in (src, tmp_path / "hard.gguf"):
        if target != src:
            os.link(src, target)
        with pytest.raises(InvalidValueError, match=r"output\.input"):
            out.save(target)
    assert digest(src) == before
    out.save(tmp_path / "copy.gguf")  # anywhere else is fine
    f.save(src)  # and a file may replace itself (an edit), atomically
    assert leftovers(tmp_path) == []


def test_check_output_and_reading(tmp_path):
    a = tmp_path / "a"
    a.write_bytes(b"x")
    check_output(tmp_path / "new", [a])  # nothing there yet: no input
    with pytest.raises(InvalidValueError):
        check_output(a, [str(tmp_path / "." / "a")])
    with reading([a]), pytest.raises(InvalidValueError):
        write_atomic(a, lambda f: f.write(b"y"))
    assert a.read_bytes() == b"x"


# -- atomic writes -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("existing", (False, True))
def test_an_interrupted_dequant_leaves_no_partial_target(existing, tmp_path, monkeypatch, capsys):
    """A failure (here Ctrl-C) in the middle of writing the third array: the target is as it was (absent, or the
    previous file), and no temporary file remains."""
    from gguf_construct.api.tensors import TensorInfo

    src = _model(tmp_path)
    target = tmp_path / "out.npz"
    if existing:
        target.write_bytes(b"previous")
    calls = {"n": 0}
    real = TensorInfo.to_numpy

    def interrupted(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(TensorInfo, "to_numpy", interrupted)
    assert main(["dequant", str(src), str(target)]) == 130  # the command's end on Ctrl-C: one line, no traceback
    assert capsys.readouterr().err.splitlines()[-1] == "gguf-construct: interrupted"
    assert (target.read_bytes() == b"previous") if existing else not target.exists()
    assert leftovers(tmp_path) == []


def test_dequant_writes_exactly_the_named_file(tmp_path, capsys):
    src = _model(tmp_path)
    assert code(["dequant", str(src), str(tmp_path / "x.txt")]) == 2
    assert "output.suffix" in capsys.readouterr().err
    assert not list(tmp_path.glob("x.txt*"))
    assert main(["dequant", str(src), str(tmp_path / "X.NPZ")]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'X.NPZ'}:")
    assert not list(tmp_path.glob("X.NPZ.*"))
    f = gc.load(src)
    with np.load(tmp_path / "X.NPZ") as z:  # numpy reads it as the .npz np.savez writes
        assert sorted(z.files) == sorted(f.tensors)
        for n in f.tensors:
            assert np.array_equal(z[n], f.tensors[n].to_numpy())


# -- scan --out -------------------------------------------------------------------------------------------------------
def test_scan_out_never_touches_a_file_it_did_not_write(tmp_path, capsys):
    src = _model(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes, no final newline")
    listing = tmp_path / "models.list"
    listing.write_text(f"{src}\n")
    for out, rule in ((notes, "output.foreign"), (listing, "output.input"), (src, "output.input")):
        before = out.read_bytes()
        assert code(["scan", str(listing), "--out", str(out)]) == 2
        assert rule in capsys.readouterr().err
        assert out.read_bytes() == before
    other = tmp_path / "other.jsonl"
    other.write_bytes(b'{"a": 1}\n')
    assert code(["scan", str(src), "--out", str(other)]) == 2
    assert other.read_bytes() == b'{"a": 1}\n'


def test_scan_resumes_from_its_own_cut_off_line_and_reads_lines_safely(tmp_path, capsys):
    src = _model(tmp_path)
    second = _model(tmp_path, "n.gguf")
    out = tmp_path / "r.jsonl"
    assert main(["scan", str(src), "--out", str(out)]) == 0
    first_line = out.read_bytes()
    out.write_bytes(first_line + b'{"source":"' + str(second).encode()[:5])  # a scan killed mid-line
    assert main(["scan", str(src), str(second), "--out", str(out)]) == 0
    lines = out.read_bytes().splitlines()
    assert lines[0] + b"\n" == first_line and [json.loads(x)["source"] for x in lines] == [str(src), str(second)]
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b"[" * 200_000 + b"]" * 200_000 + b"\n")
    assert code(["scan", str(src), "--out", str(deep)]) == 2
    err = capsys.readouterr().err
    assert "output.foreign" in err and "nests deeper" in err and "Traceback" not in err


def test_save_safetensors_refuses_the_file_its_tensors_are_views_of(tmp_path):
    from gguf_construct.api.safetensors_file import load_safetensors, save_safetensors

    src = tmp_path / "m.safetensors"
    save_safetensors(src, {"a": np.arange(64, dtype=np.float32), "b": np.ones((4, 4), np.float16)})
    before = digest(src)
    f = load_safetensors(src)
    views = {n: f.tensors[n].array() for n in f.tensors}
    hard = tmp_path / "hard.safetensors"
    os.link(src, hard)
    for target in (src, hard):
        with pytest.raises(InvalidValueError, match=r"output\.input"):
            save_safetensors(target, views)
    assert digest(src) == before
    save_safetensors(tmp_path / "copy.safetensors", views)
    assert load_safetensors(tmp_path / "copy.safetensors").tensors["b"].array().shape == (4, 4)
