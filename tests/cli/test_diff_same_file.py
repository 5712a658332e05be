"""``diff`` of one file under two names, and of a file that changes while it is being compared: the shortcut
for one unchanged file never hides a difference."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.api import registry
from gguf_construct.cli.main import main
from gguf_construct.data import example_path


def _changed_copy(tmp_path: Path) -> Path:
    """The example with one tensor's bytes changed (same type and shape): only its data differs."""
    f: Any = gc.load(example_path())
    name = "output_norm.weight"
    f.tensors.replace(name, np.full(f.tensors[name].shape, 2.0, dtype=np.float32))
    out = tmp_path / "changed.gguf"
    f.save(out)
    return out


@pytest.mark.parametrize("link", ["same path", "hard link", "symlink"])
def test_one_file_under_two_names_is_the_same(tmp_path: Path, link: str, capsys: pytest.CaptureFixture[str]) -> None:
    a = tmp_path / "a.gguf"
    shutil.copyfile(example_path(), a)
    b = {"same path": a, "hard link": tmp_path / "b.gguf", "symlink": tmp_path / "c.gguf"}[link]
    if link == "hard link":
        os.link(a, b)
    elif link == "symlink":
        b.symlink_to(a)
    assert main(["diff", str(a), str(b)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("same")


@pytest.mark.parametrize("header_only", [False, True])
def test_a_file_replaced_between_the_two_opens_is_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], header_only: bool
) -> None:
    """The path names another file by the time B is opened: its tensor bytes differ, and a full diff says so."""
    path = tmp_path / "m.gguf"
    shutil.copyfile(example_path(), path)
    replacement = _changed_copy(tmp_path)
    real_load = registry.load
    opened: list[str] = []

    def load_then_replace(source: str, **kw: Any) -> Any:
        loaded = real_load(source, **kw)
        if not opened:
            os.replace(replacement, path)  # as an editor or a download saving over it would
        opened.append(source)
        return loaded

    monkeypatch.setattr(registry, "load", load_then_replace)
    argv = ["diff", *(["--header-only"] if header_only else []), str(path), str(path)]
    code = main(argv)
    out = capsys.readouterr().out
    assert len(opened) == 2
    if header_only:
        assert code == 0, out  # headers are equal; tensor bytes are not compared
    else:
        assert code == 1 and "output_norm.weight" in out, out


@pytest.mark.parametrize("change", [-64, 4096])
def test_a_file_resized_between_the_two_opens_is_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], change: int
) -> None:
    """Cut: the last tensor's bytes are short in B and the diff says so. Grown past its data: the same tensors."""
    path = tmp_path / "m.gguf"
    shutil.copyfile(example_path(), path)
    size = path.stat().st_size
    real_load = registry.load
    opened: list[str] = []

    def load_then_resize(source: str, **kw: Any) -> Any:
        if opened:
            os.truncate(path, size + change)
        opened.append(source)
        return real_load(source, **kw)

    monkeypatch.setattr(registry, "load", load_then_resize)
    code = main(["diff", str(path), str(path)])
    captured = capsys.readouterr()
    if change < 0:
        assert code != 0 and "output_norm.weight" in captured.out + captured.err, captured
    else:
        assert code == 0 and captured.out.rstrip().endswith("same"), captured


def _big_model(path: Path, fill: float) -> bytes:
    """A GGUF file of one 4 MiB f32 tensor: its header is a few hundred bytes, its data 4 MiB."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", np.full((1024, 1024), fill, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def test_header_only_over_http_fetches_no_tensor_bytes(tmp_path: Path) -> None:
    import subprocess
    import sys

    from http_testserver import TestServer  # type: ignore[import-not-found]  # tests/ is on the test path, not mypy's

    a, b = _big_model(tmp_path / "a.gguf", 1.0), _big_model(tmp_path / "b.gguf", 2.0)
    with TestServer() as server:
        ua, ub = server.add("/a.gguf", a), server.add("/b.gguf", b)
        for pair in ([ua, ub], [ua, str(tmp_path / "b.gguf")], [ua, ua]):
            server.reset_counts()
            r = subprocess.run(
                [sys.executable, "-m", "gguf_construct.cli.main", "diff", "--header-only", *pair],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert r.returncode == 0 and r.stdout.rstrip().endswith("same"), (pair, r.stdout, r.stderr)
            assert server.counts.bytes <= len(a) // 4, (pair, server.counts.bytes)  # a first read-ahead block per URL at most
        server.reset_counts()
        r = subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", "diff", ua, ub], capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and "w" in r.stdout, r.stdout + r.stderr
        assert server.counts.bytes >= len(a) - (64 << 10)  # a full diff does fetch the tensors: the count is real


def test_header_only_reads_no_tensor_of_another_type(tmp_path: Path) -> None:
    """Tensors whose types differ are listed, their values not compared: that would read every byte of both."""
    import subprocess
    import sys

    from http_testserver import TestServer

    a = _big_model(tmp_path / "a.gguf", 1.0)
    f: Any = gc.load(tmp_path / "a.gguf")
    f.tensors.replace("w", np.ones((1024, 1024), dtype=np.float16))
    f.save(tmp_path / "b.gguf")
    with TestServer() as server:
        ua, ub = server.add("/a.gguf", a), server.add("/b.gguf", (tmp_path / "b.gguf").read_bytes())
        r = subprocess.run(
            [sys.executable, "-m", "gguf_construct.cli.main", "diff", "--header-only", "--json", ua, ub],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 1, r.stdout + r.stderr
        assert server.counts.bytes <= len(a) // 4, server.counts.bytes
    import json

    (changed,) = json.loads(r.stdout)["tensors"]["changed"]
    assert changed == {"name": "w", "type": ["f32", "f16"]}


def test_one_type_in_two_formats_is_not_a_type_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GGUF spells f16 where safetensors spells F16: a converted file has the same tensors."""
    out = tmp_path / "m.safetensors"
    assert main(["convert", str(example_path()), str(out)]) == 0
    capsys.readouterr()
    assert main(["diff", "--json", str(example_path()), str(out)]) in (0, 1)
    import json

    d = json.loads(capsys.readouterr().out)
    assert [e for e in d["tensors"]["changed"] if "type" in e] == []
    assert d["tensors"]["identical"] == len(gc.load(example_path()).tensors)
