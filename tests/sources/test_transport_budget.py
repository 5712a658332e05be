"""Budgets at the transport, against a hostile server on 127.0.0.1: the bodies of redirects and of retried
5xx answers are never read (urllib3 would drain them, uncounted), so a server sending 300 MB with each of them
costs a command a few socket buffers, not 300 MB; a chunked download (no Content-Length) is spooled to disk, so
the memory of the process stays bounded whatever its length. Each command runs in a child process, bounded in
time; the server counts what it managed to send and stops with the test."""

from __future__ import annotations

import functools
import gzip
import os
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HUGE = 300_000_000
PIECE = b"\0" * 65536


class Hostile(socketserver.ThreadingTCPServer):
    """Answers every request by ``mode``: "redirect" (a 302 to itself with a 300 MB body), "503" (a 503 with a
    300 MB body), "chunked" (200, no ranges, ``chunked_size`` bytes sent chunked). ``sent`` counts body bytes the
    kernel took; ``requests`` the requests."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str, chunked_size: int = 0):
        self.mode, self.chunked_size = mode, chunked_size
        self.sent = self.requests = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/model.gguf"

    def count(self, n: int) -> None:
        with self.lock:
            self.sent += n


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: Hostile = self.server  # type: ignore[assignment]
        sock = self.request
        sock.settimeout(10)
        try:
            while not server.stop.is_set():
                head = b""
                while b"\r\n\r\n" not in head:
                    got = sock.recv(4096)
                    if not got:
                        return
                    head += got
                with server.lock:
                    server.requests += 1
                self.answer(server, sock)
        except OSError:
            return

    def answer(self, server: Hostile, sock: socket.socket) -> None:
        if server.mode == "chunked":
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            left = server.chunked_size
            while left > 0 and not server.stop.is_set():
                n = min(left, len(PIECE))
                sock.sendall(b"%x\r\n" % n + PIECE[:n] + b"\r\n")
                server.count(n)
                left -= n
            sock.sendall(b"0\r\n\r\n")
            sock.close()
            return
        if server.mode == "gzip":  # a small body that inflates to 256 MiB, announced as gzip-encoded
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(BOMB()) + BOMB())
            server.count(len(BOMB()))
            return
        if server.mode == "redirect-file":
            sock.sendall(b"HTTP/1.1 302 Found\r\nLocation: file:///etc/passwd\r\nContent-Length: 0\r\n\r\n")
            return
        status = b"302 Found\r\nLocation: /model.gguf" if server.mode == "redirect" else b"503 Service Unavailable"
        sock.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: %d\r\n\r\n" % HUGE)
        left = HUGE
        while left > 0 and not server.stop.is_set():
            n = sock.send(PIECE[: min(left, len(PIECE))])  # raises once the client has closed the connection
            server.count(n)
            left -= n


@functools.cache
def BOMB() -> bytes:  # noqa: N802 - a constant made once, on first use
    return gzip.compress(b"\0" * (256 << 20), compresslevel=1)


@pytest.fixture
def hostile(request) -> Iterator[Hostile]:
    server = Hostile(*request.param)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def run(argv: list[str]) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in KiB) of the CLI in a child process."""
    # VmHWM, the peak of this program's own memory (ru_maxrss would carry over the peak of the forked test process)
    code = (
        "import runpy, sys\n"
        "sys.argv = ['gguf-construct', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('gguf_construct.cli.main', run_name='__main__')\n"
        "finally:\n"
        "    hwm = [line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')]\n"
        "    print('PEAK_RSS_KIB', hwm[0] if hwm else 0, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": os.fspath(ROOT)},
    )
    peak = int(proc.stderr.rsplit("PEAK_RSS_KIB", 1)[1].split()[0]) if "PEAK_RSS_KIB" in proc.stderr else 0
    return proc.returncode, proc.stderr, peak


@pytest.mark.parametrize("hostile", [("redirect",), ("503",)], indirect=True, ids=["redirect-loop", "retried-503"])
def test_bodies_of_redirects_and_retries_are_never_read(hostile):
    rc, err, _ = run(["info", hostile.url, "--max-bytes", "1000000"])
    assert rc == 2, err
    assert "remote.redirects" in err or "remote.status" in err, err
    assert hostile.requests >= 2  # the redirects or the retries were made
    # each unread body costs at most what the sockets' buffers held before the connection was closed
    assert hostile.sent < 48_000_000, hostile.sent  # of the 300 MB each answer announces, a few buffers' worth in all


def _chunked_peak(size: int) -> int:
    server = Hostile("chunked", size)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        rc, err, peak_kib = run(["info", server.url, "--download", "--max-memory", str(8 << 20)])
        assert rc == 1, err  # downloaded whole, then judged: zeros are no model
        assert server.sent == size
        return peak_kib
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


def test_a_chunked_download_is_spooled_not_held():
    """96 MiB sent chunked, under --max-memory 8 MiB: the process's peak memory is that of a 1 MiB download
    plus little (a growing buffer held 3 times the body at its peak)."""
    small, large = _chunked_peak(1 << 20), _chunked_peak(96 << 20)
    assert large < small + 24 * 1024, f"peak RSS {large} KiB for a 96 MiB chunked body, {small} KiB for 1 MiB"


@pytest.mark.parametrize("hostile", [("chunked", 8 << 20)], indirect=True, ids=["chunked-8MiB"])
def test_a_chunked_download_counts_against_max_bytes(hostile):
    rc, err, _ = run(["info", hostile.url, "--download", "--max-bytes", "1000000"])
    assert rc == 2 and "remote.max_bytes" in err, err
    assert hostile.sent < 8 << 20 or "remote.max_bytes" in err


@pytest.mark.parametrize("hostile", [("gzip",)], indirect=True)
def test_a_compressed_body_is_never_inflated(hostile):
    """Content-Encoding is not honoured (identity is asked for): the 256 MiB a gzip bomb inflates to never exist;
    its few hundred KB are read as they are and judged as a file (not a model: exit 1)."""
    rc, err, peak_kib = run(["info", hostile.url, "--download"])
    assert rc == 1 and "format.unknown" in err, err
    assert peak_kib < 128 * 1024, peak_kib


@pytest.mark.parametrize("hostile", [("redirect-file",)], indirect=True)
def test_a_redirect_leaves_http_never(hostile):
    rc, err, _ = run(["info", hostile.url])
    assert rc == 2 and "remote.redirects" in err and "root:" not in err, err


@pytest.mark.parametrize("hostile", [("redirect",), ("503",)], indirect=True, ids=["redirect-loop", "retried-503"])
def test_no_answer_is_drained(hostile, monkeypatch):
    """In this process: urllib3's ``drain_conn`` (which reads a body whole, uncounted) is never called; every
    answer not used is closed unread."""
    import urllib3.response

    import gguf_construct as gc
    from gguf_construct.sources.options import configure

    drained: list[int] = []
    monkeypatch.setattr(urllib3.response.HTTPResponse, "drain_conn", lambda self: drained.append(self.status))
    previous = configure(retries=2, backoff=0.01, max_bytes=1_000_000)
    try:
        with pytest.raises(gc.FormatError) as e:
            gc.load(hostile.url)
    finally:
        configure(previous)
    assert e.value.rule in ("remote.redirects", "remote.status")
    assert drained == [] and hostile.requests >= 3
