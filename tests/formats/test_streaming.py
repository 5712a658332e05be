"""Tensor bytes streamed from their file (formats/streaming.py) by save, set, split/merge and hash.

Checked: a view of a loaded file is traced to the right file span; each copy path (copy_file_range, sendfile,
bounded chunks) writes the same bytes; hash over many small chunks gives gguf-py's gguf_hash output line for
line; and whole-file commands keep their resident size far below the file's size.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.cli import hash as hash_cli
from gguf_construct.formats import streaming
from gguf_construct.formats.streaming import file_span, read_chunks

ROOT = Path(__file__).resolve().parents[2]


def model(path: Path, sizes: list[int], seed: int = 0) -> Path:
    """A GGUF file of f32 tensors with ``sizes`` values each (random), saved by our writer."""
    rng = np.random.default_rng(seed)
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["general.name"] = "streaming"
    for i, n in enumerate(sizes):
        f.tensors.add(f"blk.{i}.w", rng.standard_normal(n, dtype=np.float32))
    f.save(path)
    return path


def test_views_of_a_loaded_file_are_traced_to_their_span(tmp_path):
    path = model(tmp_path / "m.gguf", [8, 1000, 33])
    f = gc.load(path)
    raw = path.read_bytes()
    fd = os.open(path, os.O_RDONLY)
    try:
        for t in f.tensors.values():
            span = file_span(t.data)
            assert span is not None and span.offset == f.data_offset + t.offset and span.length == t.nbytes
            assert os.pread(span.fd, span.length, span.offset) == raw[span.offset : span.offset + span.length]
    finally:
        os.close(fd)
    assert file_span(b"plain bytes") is None
    assert file_span(np.zeros(4, np.uint8)) is None
    assert file_span(gc.from_bytes(raw).tensors["blk.0.w"].data) is None  # in memory: no file behind it


def _fail(*args, **kwargs):
    raise OSError(38, "not here")


@pytest.mark.parametrize("path_taken", ["copy_file_range", "sendfile", "chunks"])
def test_every_copy_path_writes_the_same_file(tmp_path, monkeypatch, path_taken):
    src = model(tmp_path / "m.gguf", [5000, 7, 3000])
    f = gc.load(src)
    f.metadata["general.name"] = "renamed"
    expected_tensors = {n: bytes(t.data) for n, t in f.tensors.items()}
    calls = []
    real = {name: getattr(os, name) for name in ("copy_file_range", "sendfile")}

    def spy(name):
        def call(*args):
            calls.append(name)
            return real[name](*args)

        return call

    monkeypatch.setattr(streaming, "CHUNK", 4096)
    for name in real:
        order = ["copy_file_range", "sendfile", "chunks"]
        monkeypatch.setattr(os, name, spy(name) if order.index(name) >= order.index(path_taken) else _fail)
    f.save(tmp_path / "out.gguf")
    g = gc.load(tmp_path / "out.gguf")
    assert g.metadata["general.name"] == "renamed"
    assert {n: bytes(t.data) for n, t in g.tensors.items()} == expected_tensors
    if path_taken == "chunks":
        assert calls == []
    else:
        assert calls and set(calls) == {path_taken}


def test_read_chunks_in_small_buffers(tmp_path, monkeypatch):
    path = model(tmp_path / "m.gguf", [10_000])
    t = gc.load(path).tensors["blk.0.w"]
    buffers = iter([bytearray(1000) for _ in range(100)])
    chunks = [bytes(c) for c in read_chunks(t.data, buffers)]
    assert max(map(len, chunks)) == 1000 and b"".join(chunks) == bytes(t.data)
    monkeypatch.setattr(streaming, "CHUNK", 999)
    chunks = [bytes(c) for c in read_chunks(np.asarray(t.data).copy())]  # in memory: slices
    assert max(map(len, chunks)) == 999 and b"".join(chunks) == bytes(t.data)


def test_hash_in_many_chunks_matches_hashlib_and_gguf_hash(tmp_path, monkeypatch):
    """The pipeline against a plain serial hashlib loop and against gguf-py's gguf_hash (the oracle)."""
    path = model(tmp_path / "m.gguf", [4096 * 7 + 13, 1, 4096, 2048])
    monkeypatch.setattr(streaming, "CHUNK", 4096)  # tensors of 0 to 8 chunks, and an odd tail
    f = gc.load(path)
    h = hash_cli.hash_file(f)
    whole = hashlib.sha256()
    for name, t in f.tensors.items():
        data = bytes(t.data)
        assert h["tensors"][name] == {"sha1": hashlib.sha1(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest()}
        whole.update(data)
    assert h["sha256"] == whole.hexdigest()
    assert hash_cli.hash_file(gc.from_bytes(path.read_bytes())) == h  # in memory: the same digests from slices
    theirs = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_hash", str(path)], capture_output=True, text=True, timeout=120)
    assert theirs.returncode == 0
    assert "\n".join(hash_cli.hash_lines(h, str(path))) + "\n" == theirs.stdout


def test_hash_reports_a_failing_digest(tmp_path, monkeypatch):
    path = model(tmp_path / "m.gguf", [4096])

    class Broken:
        def update(self, data):
            raise RuntimeError("digest failed")

    monkeypatch.setattr(hash_cli.hashlib, "sha256", Broken)
    with pytest.raises(RuntimeError, match="digest failed"):
        hash_cli.hash_file(gc.load(path))


PEAK_RSS = """
import sys
sys.path.insert(0, {root!r})
import gguf_construct as gc
from gguf_construct.cli.hash import hash_file
from gguf_construct.api import registry  # noqa: F401 - gc.load imports it on first use: the imports are not what is measured

def peak_kib():  # this process's own high-water mark (ru_maxrss would carry the parent's across fork)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

base = peak_kib()
f = gc.load({path!r}, strict=False)
if {command!r} == "hash":
    hash_file(f)
elif {command!r} == "set":
    f.metadata["general.name"] = "x"
    f.save({out!r})
else:  # big-endian: every tensor transformed, one at a time
    f.save({out!r}, byte_order="big")
print(peak_kib() - base)
"""


@pytest.mark.parametrize(("command", "limit_mib"), [("hash", 48), ("set", 48), ("convert", 110)])
def test_whole_file_commands_do_not_map_the_file_in(tmp_path, command, limit_mib):
    """160 MiB of tensor data in 20 MiB tensors: the peak resident size grows by a bounded amount (for a byte
    order conversion, a few tensors' worth), not by the file's size."""
    path = model(tmp_path / "big.gguf", [5 << 20] * 8)
    script = PEAK_RSS.format(root=str(ROOT), path=str(path), command=command, out=str(tmp_path / "out.gguf"))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    grown_kib = int(r.stdout.strip())
    assert grown_kib < limit_mib << 10, f"{command}: peak RSS grew by {grown_kib} KiB for a 160 MiB file"
    if command != "hash":
        out = gc.load(tmp_path / "out.gguf")
        assert out.byte_order == ("big" if command == "convert" else "little")
        assert [t.to_numpy()[-3:].tolist() for t in out.tensors.values()] == [
            t.to_numpy()[-3:].tolist() for t in gc.load(path).tensors.values()
        ]
    if command == "set":
        assert hash_cli.compare(hash_cli.hash_file(gc.load(path)), hash_cli.hash_file(gc.load(tmp_path / "out.gguf")))["different"] == []


def test_split_and_merge_copy_in_the_kernel(tmp_path, monkeypatch):
    """Every tensor of a split and of the merge goes through copy_file_range, and the merge is the original."""
    from gguf_construct.api.shard_set import merge, split

    src = model(tmp_path / "m.gguf", [3000, 5000, 7000, 11])
    copied = []
    real = os.copy_file_range

    def spy(src_fd, dst_fd, count, offset_src, offset_dst):
        copied.append(count)
        return real(src_fd, dst_fd, count, offset_src, offset_dst)

    monkeypatch.setattr(os, "copy_file_range", spy)
    shards = split(gc.load(src), tmp_path / "part", max_tensors=2)
    assert len(shards) == 2 and sum(copied) == sum(t.nbytes for t in gc.load(src).tensors.values())
    copied.clear()
    merge(shards[0], tmp_path / "merged.gguf")
    assert sum(copied) == sum(t.nbytes for t in gc.load(src).tensors.values())
    assert (tmp_path / "merged.gguf").read_bytes() == src.read_bytes()


def test_tensor_index_kept_through_edits():
    """``add`` keeps the name index instead of rebuilding it (adding n tensors was quadratic in n); lookups stay
    right through adds, deletes and renames."""
    f = gc.new()
    one = np.zeros(8, np.float32)
    for i in range(50):
        f.tensors.add(f"t{i}", one + i)
    assert f.tensors._index is not None and len(f.tensors._index) == 50
    with pytest.raises(KeyError):
        f.tensors.add("t7", one)
    del f.tensors["t3"]
    f.tensors.add("t3", one + 100)
    f.tensors.rename("t10", "ten")
    f.tensors.add("t10", one + 200)
    for name, value in (("t0", 0), ("t49", 49), ("t3", 100), ("ten", 10), ("t10", 200), ("t11", 11)):
        assert float(np.frombuffer(f.tensors[name].data, np.float32)[0]) == value
    assert list(f.tensors)[-3:] == ["t49", "t3", "t10"]
