"""The output rule: a command writes only regular files (or new names). A FIFO, a device, a socket, or a symlink
to one, named as an output is refused by ``stat`` before anything is opened for writing (exit 2,
``output.not_regular``) and is still what it was afterwards; an output is never one of the command's inputs
(``--value-file``, the list files of ``scan``); a rewrite of a file moved or modified meanwhile is refused
(``output.changed``); names that become paths (Ollama model names) are checked part by part; the input files
of a command are read as bounded regular files."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.api import ollama_model as ollama
from gguf_construct.api.fileio import check_writable, open_append, write_atomic
from gguf_construct.cli.main import main
from gguf_construct.errors import FormatError

KQUANTS = "generated/ggml-writer-kquants.gguf"
LEGACY = "legacy/ggmf-v1-llama-vocab.bin"
ROOT = Path(__file__).resolve().parents[2]


def code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:
        return int(e.code or 0)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _model(tmp_path: Path, name: str = "m.gguf", rel: str = KQUANTS) -> Path:
    p = tmp_path / name
    shutil.copy(corpus_file(rel), p)
    return p


# -- special files named as outputs ----------------------------------------------------------------------------
def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.fspath(path))
    return s


SPECIALS = ["fifo", "socket", "directory", "fifo-symlink", "null-device", "null-symlink"]


def special(kind: str, path: Path, keep: list) -> int:
    """Make ``path`` a special file of ``kind``; its file type (``stat.S_IFMT``), to check it is still that."""
    if kind in ("null-device", "null-symlink"):
        if os.geteuid() != 0:
            pytest.skip("making a character device needs root")
        dev = path.with_name(path.name + ".dev") if kind == "null-symlink" else path
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the null device's numbers: writing to it is harmless
        if kind == "null-symlink":
            path.symlink_to(dev)
    elif kind.startswith("fifo"):
        target = path.with_name(path.name + ".fifo") if kind == "fifo-symlink" else path
        _fifo(target)
        if kind == "fifo-symlink":
            path.symlink_to(target)
    elif kind == "socket":
        keep.append(_socket(path))
    else:
        path.mkdir()
    return stat.S_IFMT(os.stat(path).st_mode)


COMMANDS = {
    # name: (input name, corpus file, output name, argv from (input, output))
    "set": ("m.gguf", KQUANTS, "o.gguf", lambda i, o: ["set", i, "general.name", "x", "-o", o]),
    "delete": ("m.gguf", KQUANTS, "o.gguf", lambda i, o: ["delete", i, "general.name", "--missing-ok", "-o", o]),
    "rename-tensor": ("m.gguf", KQUANTS, "o.gguf", lambda i, o: ["rename-tensor", i, "output.weight", "x.weight", "-o", o]),
    "convert": ("m.gguf", KQUANTS, "o.gguf", lambda i, o: ["convert", i, o, "--byte-order", "big"]),
    "convert-safetensors": ("m.gguf", KQUANTS, "o.safetensors", lambda i, o: ["convert", i, o]),
    "quantize": ("m.gguf", KQUANTS, "o.gguf", lambda i, o: ["quantize", i, o, "--type", "q8_0"]),
    "dequant": ("m.gguf", KQUANTS, "o.npz", lambda i, o: ["dequant", i, o]),
    "migrate": ("m.bin", LEGACY, "o.gguf", lambda i, o: ["migrate", i, o]),
    "export": ("m.gguf", KQUANTS, "o.bin", lambda i, o: ["export", i, o, "--to", "ggjt"]),
    "merge": ("m.gguf", KQUANTS, "o.gguf", None),  # set up below: a shard set
    "scan": ("m.gguf", KQUANTS, "o.jsonl", lambda i, o: ["scan", i, "--out", o]),
}


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_command_writes_a_special_file(command, kind, tmp_path, monkeypatch, capsys):
    name, rel, out_name, argv = COMMANDS[command]
    src = _model(tmp_path, name, rel)
    monkeypatch.chdir(tmp_path)
    if command == "merge":
        assert code(["split", src.name, "s", "--max-tensors", "2"]) == 0
        capsys.readouterr()
        first = sorted(tmp_path.glob("s-00001-of-*.gguf"))[0].name
        argv = lambda i, o: ["merge", first, o]  # noqa: E731
    keep: list = []
    out = tmp_path / out_name
    kind_before = special(kind, out, keep)
    try:
        assert code(argv(src.name, out.name)) == 2
        err = capsys.readouterr().err
        assert "output.not_regular" in err, err
        assert stat.S_IFMT(os.stat(out).st_mode) == kind_before  # still the FIFO, the device, the socket
        assert os.path.islink(out) == kind.endswith("symlink")
    finally:
        for s in keep:
            s.close()


@pytest.mark.parametrize("kind", SPECIALS)
def test_the_python_writers_refuse_a_special_file_before_opening_it(kind, tmp_path):
    keep: list = []
    target = tmp_path / "out"
    before = special(kind, target, keep)
    called = []
    with pytest.raises(FormatError) as e:
        write_atomic(target, lambda f: called.append(f.write(b"x")))
    assert e.value.rule == "output.not_regular" and called == []  # nothing was even built
    assert stat.S_IFMT(os.stat(target).st_mode) == before
    with pytest.raises(FormatError):
        open_append(target)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    for s in keep:
        s.close()


def test_a_fifo_swapped_in_during_the_write_is_not_replaced(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def write(f):
        f.write(b"new")
        target.unlink()
        os.mkfifo(target)  # what the rename would have replaced

    with pytest.raises(FormatError) as e:
        write_atomic(target, write)
    assert e.value.rule == "output.not_regular" and stat.S_ISFIFO(os.stat(target).st_mode)


def test_regular_files_and_new_names_are_written(tmp_path):
    check_writable(tmp_path / "absent")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    check_writable(tmp_path / "dangling")
    (tmp_path / "f").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    check_writable(tmp_path / "link")
    with pytest.raises(FormatError) as e:
        check_writable("a\0b")
    assert e.value.rule == "output.not_regular"
    with open_append(tmp_path / "f") as f:
        f.write("y")
    assert (tmp_path / "f").read_text() == "xy"


def test_system_places_are_refused_by_their_names_alone(tmp_path, capsys):
    """``/dev/stdout`` and its like: a link to a process's descriptor is refused even when the descriptor is a
    regular file (the rename would replace the link itself), and so is any name under /dev, /proc or /sys. The
    real paths are only ``stat``ed here; the command runs against a link in the test's own folder."""
    for name in ("/dev/null", "/dev/stdout", "/dev/new-file", "/proc/self/fd/1", "/sys/kernel/x"):
        with pytest.raises(FormatError) as e:
            check_writable(name)
        assert e.value.rule == "output.not_regular"
    src = _model(tmp_path)
    log = tmp_path / "log"
    with open(log, "w") as fh:
        fd = fh.fileno()
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{fd}")  # a regular file behind a process's descriptor, as /dev/stdout often is
        assert code(["set", os.fspath(src), "general.name", "x", "-o", os.fspath(link)]) == 2
        assert "output.not_regular" in capsys.readouterr().err
        assert link.is_symlink() and os.readlink(link) == f"/proc/self/fd/{fd}"


# -- inputs --------------------------------------------------------------------------------------------------
def test_an_output_is_never_the_value_file(tmp_path, monkeypatch, capsys):
    src = _model(tmp_path)
    value = tmp_path / "v.txt"
    value.write_text("my model")
    monkeypatch.chdir(tmp_path)
    for out in ("v.txt", "./v.txt"):
        assert code(["set", "m.gguf", "general.name", "--value-file", "v.txt", "-o", out]) == 2
        assert "output.input" in capsys.readouterr().err
    os.link(value, tmp_path / "hard.txt")
    assert code(["set", "m.gguf", "general.name", "--value-file", "v.txt", "-o", "hard.txt"]) == 2
    assert value.read_text() == "my model" and digest(src) == digest(Path(corpus_file(KQUANTS)))


@pytest.mark.parametrize("argv", [["set", "M", "general.name", "--value-file", "F"], ["scan", "F.txt"]])
def test_input_files_that_are_fifos_or_devices_are_refused_without_blocking(argv, tmp_path):
    """A value file or a list of sources that is a FIFO (with no writer: reading it would wait for ever) or
    ``/dev/zero`` (endless) is refused at once, in a child process bounded in time."""
    src = _model(tmp_path)
    fifo = tmp_path / ("F.txt" if argv[0] == "scan" else "F")
    os.mkfifo(fifo)
    for name in (fifo, Path("/dev/zero")):
        if argv[0] == "scan" and name == Path("/dev/zero"):
            continue  # a list is known by its suffix
        args = [os.fspath(name) if a in ("F", "F.txt") else os.fspath(src) if a == "M" else a for a in argv]
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "gguf_construct.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": os.fspath(ROOT)},
        )
        assert run.returncode == 2, run.stderr
        assert "not a regular file" in run.stderr or "not_regular" in run.stderr, run.stderr
        assert time.monotonic() - started < 30


def test_reading_an_input_never_blocks(tmp_path, monkeypatch):
    """A regular file whose read would wait (a kernel file such as ``/proc/kmsg``, simulated: reading it here
    would consume the kernel's messages) is refused, not waited on: the descriptor is non-blocking."""
    from gguf_construct.formats import base

    path = tmp_path / "v.txt"
    path.write_text("x")
    seen = []

    def read(fd, n):
        seen.append(os.get_blocking(fd))
        raise BlockingIOError(11, "would block")

    monkeypatch.setattr(base.os, "read", read)
    with pytest.raises(FormatError) as e:
        base.read_regular(path, what="--value-file")
    assert e.value.rule == "file.not_regular" and seen == [False]


def test_a_value_file_is_read_within_the_size_limit(tmp_path):
    """In a child process: ``--limit`` changes the limits for the rest of the process."""
    src = _model(tmp_path)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2000)
    run = subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "--limit", "header_bytes=1000", "set", os.fspath(src), "general.name"]
        + ["--value-file", os.fspath(big)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.fspath(ROOT)},
    )
    assert run.returncode == 2 and "header_bytes" in run.stderr, run.stderr


def test_a_list_of_sources_that_is_not_utf8_is_a_usage_error(tmp_path, capsys):
    listing = tmp_path / "l.txt"
    listing.write_bytes(b"\xff\xfe m.gguf\n")
    assert code(["scan", os.fspath(listing)]) == 2
    assert "not UTF-8" in capsys.readouterr().err


# -- a rewrite replaces only the file it opened ----------------------------------------------------------------
@pytest.mark.parametrize("how", ["moved-into-place", "modified", "removed"])
def test_a_rewrite_refuses_a_file_changed_since_it_was_opened(how, tmp_path):
    path = _model(tmp_path)
    f = gc.load(path, strict=False)
    f.metadata["general.name"] = "edited"
    other = tmp_path / "other.gguf"
    shutil.copy(path, other)
    if how == "moved-into-place":
        os.replace(other, path)  # a new inode at the name
    elif how == "modified":
        with open(path, "r+b") as fh:
            fh.seek(0, 2)
            fh.write(b"\0" * 32)
    else:
        path.unlink()
    expected = None if how == "removed" else digest(path)
    with pytest.raises(FormatError) as e:
        f.save(path)
    assert e.value.rule == "output.changed"
    assert (not path.exists()) if expected is None else digest(path) == expected
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_rewrite_of_an_unchanged_file_goes_through(tmp_path):
    path = _model(tmp_path)
    f = gc.load(path, strict=False)
    f.metadata["general.name"] = "edited"
    f.save(path)
    assert gc.load(path).metadata["general.name"] == "edited"


def test_set_without_output_refuses_a_file_replaced_during_the_edit(tmp_path, monkeypatch, capsys):
    """The CLI's rewrite: the file is replaced between the load and the save (here from the value's parser,
    the step between them), and the replacement is left as it is with exit 2."""
    import gguf_construct.cli.edit as edit

    path = _model(tmp_path)
    other = tmp_path / "other.gguf"
    shutil.copy(path, other)
    real = edit.parse_value

    def parse_and_swap(text, type_spec):
        os.replace(other, path)
        return real(text, type_spec)

    monkeypatch.setattr(edit, "parse_value", parse_and_swap)
    before_inode = os.stat(other).st_ino
    assert code(["set", os.fspath(path), "general.name", "x"]) == 2
    assert "output.changed" in capsys.readouterr().err
    assert os.stat(path).st_ino == before_inode


# -- names that become paths --------------------------------------------------------------------------------
BAD_NAMES = [
    "m:/abs/file",
    "m:../../../../x",
    "../m",
    "ns/../m",
    "m:..",
    "m:.",
    "m:.hidden",
    "m:-x",
    "a/b/c/d",
    "m:a\\b",
    "m\\..\\x",
    "m:a\0b",
    "m:é",
    "ｍ",
    "m:",
    "/m",
    "m/",
    "h..io/ns/m",
    "ns.x/m",
    "m:" + "t" * 129,
    "m" * 81,
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_model_names_never_become_paths(name, tmp_path, capsys):
    src = _model(tmp_path)
    out = tmp_path / "store"
    victim = tmp_path / "x"
    victim.write_text("keep")
    assert code(["convert", os.fspath(src), os.fspath(out) + "/", "--model", name]) == 2
    assert victim.read_text() == "keep"
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))  # refused before any blob was written
    with pytest.raises((FormatError, ValueError)):
        ollama.write_model(tmp_path / "api-store", name, [], {})
    assert not (tmp_path / "api-store").exists() or not any(p.is_file() for p in (tmp_path / "api-store").rglob("*"))


def test_good_model_names_land_under_manifests(tmp_path):
    for name, parts in (
        ("m", ("registry.ollama.ai", "library", "m", "latest")),
        ("me/m_1.2:q4_K-M", ("registry.ollama.ai", "me", "m_1.2", "q4_K-M")),
        ("localhost:11434/me/m:t", ("localhost:11434", "me", "m", "t")),
    ):
        assert ollama.split_model(name) == parts
        path = ollama.write_model(tmp_path, name, [], {"model_format": "safetensors"})
        assert path == tmp_path.joinpath("manifests", *parts) and path.is_file()


def test_a_symlink_in_the_store_cannot_lead_a_manifest_out(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    store = tmp_path / "store"
    (store / "manifests" / "registry.ollama.ai").mkdir(parents=True)
    (store / "manifests" / "registry.ollama.ai" / "library").symlink_to(outside)
    with pytest.raises(FormatError) as e:
        ollama.write_model(store, "m:latest", [], {})
    assert e.value.rule == "output.name" and list(outside.iterdir()) == []


def test_names_that_differ_only_by_case_are_refused(tmp_path):
    ollama.write_model(tmp_path, "Model:Tag", [], {})
    for other in ("model:Tag", "Model:tag", "MODEL:TAG"):
        with pytest.raises(FormatError) as e:
            ollama.write_model(tmp_path, other, [], {})
        assert e.value.rule == "output.name"
    ollama.write_model(tmp_path, "Model:Tag", [], {})  # the same name again: rewritten


def test_blob_paths_are_one_name_per_digest():
    assert ollama.blob_path("/m", "sha256:" + "AB" * 32) == ollama.blob_path("/m", "sha256:" + "ab" * 32)
    for bad in ("sha256:../" + "a" * 61, "sha256:" + "a" * 63 + "/", "sha256:" + "a" * 64 + "\n", "sha512:" + "a" * 64):
        with pytest.raises(FormatError):
            ollama.blob_path("/m", bad)


@pytest.mark.parametrize("name", ["../../evil", "/abs", "a/../../b", "a\\b", "C:x"])
def test_dequant_refuses_tensor_names_that_unpack_out_of_their_folder(name, tmp_path, capsys):
    f = gc.load(corpus_file(KQUANTS), strict=False)
    f.tensors.rename(list(f.tensors)[0], name)
    model = tmp_path / "m.gguf"
    f.save(model)
    out = tmp_path / "o.npz"
    assert code(["dequant", os.fspath(model), os.fspath(out)]) == 2
    assert "output.name" in capsys.readouterr().err and not out.exists()
    assert code(["dequant", os.fspath(model), os.fspath(out), "--tensor", list(f.tensors)[1]]) == 0  # the others still can


def test_a_store_keeps_only_blobs_that_hold_their_digest(tmp_path):
    data = b"blob bytes"
    layer = ollama.write_blob(tmp_path, data, "application/vnd.ollama.image.json")
    path = ollama.blob_path(tmp_path, layer.digest)
    path.write_bytes(b"tampered")  # a wrong file under the blob's name is replaced
    ollama.write_blob(tmp_path, data, "application/vnd.ollama.image.json")
    assert path.read_bytes() == data
    outside = tmp_path / "outside"
    outside.write_bytes(data)
    path.unlink()
    path.symlink_to(outside)  # a link, even to the right bytes, is replaced by the blob itself
    ollama.write_blob(tmp_path, data, "application/vnd.ollama.image.json")
    assert not path.is_symlink() and path.read_bytes() == data
    path.unlink()
    os.mkfifo(path)  # a FIFO is refused, never written or waited on
    with pytest.raises(FormatError) as e:
        ollama.write_blob(tmp_path, data, "application/vnd.ollama.image.json")
    assert e.value.rule == "output.not_regular" and stat.S_ISFIFO(os.lstat(path).st_mode)


def test_convert_writes_into_an_existing_models_folder(tmp_path, capsys):
    """An Ollama output is a folder: an existing one is a models root to add to, not a special file."""
    src = _model(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    for model in ("a:b", "c"):
        assert code(["convert", os.fspath(src), os.fspath(store), "--model", model]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (store / "manifests" / "registry.ollama.ai" / "library").iterdir()) == ["a", "c"]


def test_the_outputs_benchmark_cases_run(tmp_path):
    """``benchmarks/bench_hostile.py --outputs``: two of its cases, so that the section cannot rot unnoticed
    (CI's smoke run of the script takes its default section)."""
    sys.path.insert(0, os.fspath(ROOT / "benchmarks"))
    try:
        import bench_hostile
    finally:
        sys.path.remove(os.fspath(ROOT / "benchmarks"))
    assert bench_hostile._outputs_case(ROOT, tmp_path, "FIFO as -o", True, 60) == "exit 2 [output.not_regular] | FIFO → FIFO"
    row = bench_hostile._outputs_case(ROOT, tmp_path, "--value-file V -o V", True, 60)
    assert row == "exit 2 [output.input] | value file intact"
