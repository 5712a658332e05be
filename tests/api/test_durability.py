"""When a write is fsynced (fileio's durability policy): like ``cp`` for a new file, crash-safe when it replaces one.

``os.fsync`` and the early write-back hook (``streaming.start_writeback``, sync_file_range) are counted through the
API (``save(durable=...)``, ``fileio.durability``) and through the command line (``set``, ``-o``, ``--sync``,
``--in-place``, ``split``, ``convert``), for a new path, an existing path, and when asked for.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.api import fileio
from gguf_construct.cli.main import main
from gguf_construct.formats import streaming


class Calls:
    """Counts os.fsync (on files and on folders) and streaming.start_writeback, still doing what they do."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files = self.folders = self.writebacks = 0
        real_fsync, real_writeback = os.fsync, streaming.start_writeback

        def fsync(fd: int) -> None:
            if _is_dir(fd):
                self.folders += 1
            else:
                self.files += 1
            real_fsync(fd)

        def writeback(fd: int, offset: int, length: int) -> None:
            self.writebacks += 1
            real_writeback(fd, offset, length)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(streaming, "start_writeback", writeback)

    @property
    def seen(self) -> tuple[int, int, bool]:
        """(file fsyncs, folder fsyncs, whether any early write-back was started)."""
        return self.files, self.folders, self.writebacks > 0


def _is_dir(fd: int) -> bool:
    import stat

    return stat.S_ISDIR(os.fstat(fd).st_mode)


def model(path, n_tensors: int = 3) -> os.PathLike:
    """A GGUF file whose tensors, once loaded, are views of the file (so saving copies them with copy_span)."""
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["general.name"] = "durability"
    rng = np.random.default_rng(0)
    for i in range(n_tensors):
        f.tensors.add(f"blk.{i}.w", rng.standard_normal(4096, dtype=np.float32))
    f.save(path, durable=False)
    return path


@pytest.fixture
def src(tmp_path):
    return model(tmp_path / "m.gguf")


# -- the policy through the API -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("existing", "durable", "expected"),
    [
        (False, None, (0, 0, False)),  # a new path: cp's semantics
        (True, None, (1, 0, True)),  # replacing a file: fsynced before the rename
        (False, True, (1, 1, True)),  # asked for: the file and its folder
        (True, True, (1, 1, True)),
        (False, False, (0, 0, False)),
        (True, False, (0, 0, False)),  # refused even when replacing
    ],
)
def test_save_fsyncs_as_the_policy_says(tmp_path, src, monkeypatch, existing, durable, expected):
    out = tmp_path / "out.gguf"
    if existing:
        out.write_bytes(b"old")
    f = gc.load(src)
    f.metadata["general.name"] = "edited"
    calls = Calls(monkeypatch)
    f.save(out, durable=durable)
    assert calls.seen == expected
    g = gc.load(out)
    assert g.metadata["general.name"] == "edited"
    assert [bytes(t.data) for t in g.tensors.values()] == [bytes(t.data) for t in gc.load(src).tensors.values()]


def test_saving_over_the_file_itself_fsyncs(src, monkeypatch):
    f = gc.load(src)
    f.metadata["general.name"] = "in place"
    calls = Calls(monkeypatch)
    f.save(src)
    assert calls.seen == (1, 0, True)
    assert gc.load(src).metadata["general.name"] == "in place"


def test_durability_context_and_explicit_argument(tmp_path, src, monkeypatch):
    calls = Calls(monkeypatch)
    with fileio.durability(True):
        gc.load(src).save(tmp_path / "a.gguf")  # a new path, made durable by the context
    assert calls.seen == (1, 1, True)
    calls = Calls(monkeypatch)
    with fileio.durability(True):
        gc.load(src).save(tmp_path / "b.gguf", durable=False)  # the caller's own word wins
    assert calls.seen == (0, 0, False)
    calls = Calls(monkeypatch)
    with fileio.durability(False):
        gc.load(src).save(src)  # replacing, but durability refused
    assert calls.seen == (0, 0, False)
    assert fileio._DURABLE.get() is None  # each block restored the default


def test_a_symlink_at_the_target_counts_as_existing(tmp_path, src, monkeypatch):
    link = tmp_path / "link.gguf"
    link.symlink_to(tmp_path / "nowhere.gguf")  # dangling: the rename still replaces an entry
    calls = Calls(monkeypatch)
    gc.load(src).save(link)
    assert calls.seen == (1, 0, True)


def test_other_writers_follow_the_policy(tmp_path, src, monkeypatch):
    from gguf_construct.api.safetensors_file import save_safetensors
    from gguf_construct.api.shard_set import split

    calls = Calls(monkeypatch)
    paths = split(gc.load(src), tmp_path / "s", max_tensors=1)
    assert len(paths) == 3 and calls.seen == (0, 0, False)
    split(gc.load(src), tmp_path / "s", max_tensors=1)  # the same shards again: each replaces its old self
    assert calls.files == 3
    calls = Calls(monkeypatch)
    save_safetensors(tmp_path / "t.safetensors", {"w": np.ones(4, np.float32)}, durable=True)
    assert calls.seen[:2] == (1, 1)


# -- the command line ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-o", "{out}"], (0, 0, False)),  # -o onto a new path: like cp
        (["-o", "{out}", "--sync"], (1, 1, True)),
        ([], (1, 0, True)),  # the file itself is replaced
        (["-o", "{existing}"], (1, 0, True)),  # -o onto an existing file
    ],
)
def test_cli_set(tmp_path, src, monkeypatch, capsys, args, expected):
    existing = tmp_path / "existing.gguf"
    existing.write_bytes(b"old")
    argv = ["set", str(src), "general.name", "cli", *(a.format(out=tmp_path / "out.gguf", existing=existing) for a in args)]
    calls = Calls(monkeypatch)
    assert main(argv) == 0
    assert calls.seen == expected
    written = argv[argv.index("-o") + 1] if "-o" in argv else str(src)
    assert gc.load(written).metadata["general.name"] == "cli"


def test_cli_set_in_place_fsyncs_only_with_sync(src, monkeypatch, capsys):
    calls = Calls(monkeypatch)
    assert main(["set", str(src), "general.name", "abcdefghij", "--in-place"]) == 0
    assert calls.seen == (0, 0, False)
    assert main(["set", str(src), "general.name", "0123456789", "--in-place", "--sync"]) == 0
    assert calls.seen == (1, 0, False)
    assert gc.load(src).metadata["general.name"] == "0123456789"


def test_cli_sync_reaches_every_writing_command(tmp_path, src, monkeypatch, capsys):
    calls = Calls(monkeypatch)
    assert main(["split", str(src), str(tmp_path / "s"), "--max-tensors", "1", "--sync"]) == 0
    assert calls.seen == (3, 3, True)
    calls = Calls(monkeypatch)
    assert main(["convert", str(src), str(tmp_path / "big.gguf"), "--byte-order", "big"]) == 0
    assert calls.seen == (0, 0, False)
    assert main(["convert", str(src), str(tmp_path / "big2.gguf"), "--byte-order", "big", "--sync"]) == 0
    assert calls.seen[:2] == (1, 1)
    for command in (
        ["delete", str(src), "general.name", "-o", str(tmp_path / "d.gguf")],
        ["rename-tensor", str(src), "blk.0.w", "blk.9.w", "-o", str(tmp_path / "r.gguf")],
    ):
        calls = Calls(monkeypatch)
        assert main([*command, "--sync"]) == 0
        assert calls.seen[:2] == (1, 1)
