"""A file cut inside its tensor data never looks healthy: ``info`` flags it (alone, in the many-files table, as
JSON, over HTTP), and no command reports a hash of bytes it did not read (``hash`` exits 1 naming the rule)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil

import pytest
from conftest import corpus_file
from http_testserver import TestServer

import gguf_construct as gc
from gguf_construct.cli.main import main
from gguf_construct.errors import LayoutError
from gguf_construct.sources import configure

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
EMPTY_SHA1 = hashlib.sha1(b"").hexdigest()


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cut(tmp_path):
    """The k-quants sample cut in the middle of its tensor data (and the whole file beside it)."""
    whole = tmp_path / "whole.gguf"
    shutil.copy(corpus_file("generated/ggml-writer-kquants.gguf"), whole)
    f = gc.load(whole)
    data = whole.read_bytes()
    middle = f.data_offset + sum(t.nbytes for t in f.tensors.values()) // 2
    short = tmp_path / "cut.gguf"
    short.write_bytes(data[:middle])
    return short, whole


def test_info_flags_a_cut_file(cut):
    short, whole = cut
    code, out, err = cli("info", str(short))
    assert code == 1 and "tensor.bounds" in out and "cut short" in err
    code, out, _ = cli("info", "--json", str(short))
    assert code == 1 and json.loads(out)["summary"]["errors"]
    code, out, _ = cli("info", str(whole), str(short))
    assert code == 1
    rows = {line.split()[0]: line for line in out.splitlines() if ".gguf " in line}
    assert "TRUNCATED" in rows[str(short)] and rows[str(whole)].endswith(" ok") and "1 truncated" in out
    code, out, _ = cli("info", "--json", str(whole), str(short))
    assert code == 1 and [bool(r["errors"]) for r in json.loads(out)] == [False, True]
    assert cli("info", str(whole))[0] == 0


def test_no_hash_of_bytes_not_read(cut):
    short, whole = cut
    code, out, err = cli("hash", str(short))
    assert code == 1 and "tensor.bounds" in err
    assert EMPTY_SHA256 not in out and EMPTY_SHA1 not in out
    assert cli("hash", str(whole), "--against", str(short))[0] == 1
    f = gc.load(short, strict=False)
    for t in f.tensors.values():
        if t.bytes_present < t.nbytes:
            with pytest.raises(LayoutError, match="cut short"):
                t.data  # noqa: B018
            with pytest.raises(LayoutError):
                t.to_numpy()


def test_scan_marks_a_cut_file_invalid(cut, tmp_path):
    short, _ = cut
    code, out, _ = cli("scan", str(short))
    line = json.loads(out)
    assert code == 1 and not line["ok"] and any(i["rule"] == "tensor.bounds" for i in line["issues"])


def test_a_cut_file_over_http_is_flagged_without_reading_its_data(cut):
    short, _ = cut
    previous = configure(retries=1, backoff=0.01, connect_timeout=5.0, read_timeout=10.0, request_deadline=30.0)
    try:
        with TestServer() as server:
            url = server.add("/m/cut.gguf", short.read_bytes())
            code, out, err = cli("info", url)
            assert code == 1 and "cut short" in err
            code, out, err = cli("hash", url)
            assert code == 1 and "tensor.bounds" in err and EMPTY_SHA256 not in out
    finally:
        configure(previous)
