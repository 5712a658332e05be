"""A loopback HTTP server for the tests and benchmarks: files by path with ``Range``, ``ETag`` and ``If-Range``,
redirects (to any URL: another server's port is another origin), a required header, files made on demand
(``generate``: a shard set of any size), and faults on demand: no range support, 503s, dropped connections, a
slow server, headers and bodies dripped a byte at a time, lying ``Content-Range`` / ``Content-Length`` headers,
416 answers. It counts requests and body bytes sent and records each request's headers. Standard library only;
``with TestServer() as s:`` stops it.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_RANGE = re.compile(r"bytes=(\d*)-(\d*)\Z")


@dataclass
class Faults:
    no_ranges: bool = False  # ignore Range: always 200 with the whole file
    fail_next: int = 0  # answer the next N requests with 503
    drop_next: int = 0  # send half of the next N bodies, then close the connection
    delay: float = 0.0  # seconds to wait before each answer
    no_etag: bool = False
    retry_after: str | None = None  # the Retry-After header of the 503s
    content_range: str | None = None  # send this Content-Range on 206 answers instead of the true one
    content_length: str | None = None  # send this Content-Length instead of the true one (the body stays true)
    unsatisfiable: str | None = None  # answer every ranged request 416 with this Content-Range ("bytes */N")
    drip_headers: float = 0.0  # seconds between the bytes of the status line and headers
    drip_body: float = 0.0  # seconds between the bytes of the body


@dataclass
class Counts:
    requests: int = 0
    bytes: int = 0
    proxied: int = 0  # requests made to this server as a proxy (absolute URLs)
    ranges: list[tuple[str, str]] = field(default_factory=list)  # (path, Range header) of each request
    headers: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (path, request headers) of each request


class TestServer:
    """``add(path, data)`` serves ``data`` at ``path``; ``url(path)`` is its address."""

    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.etags: dict[str, str] = {}
        self.redirects: dict[str, str] = {}
        self.required: dict[str, str] = {}
        self.generators: dict[str, Callable[[str], bytes | None]] = {}
        self._stop = threading.Event()
        self.faults = Faults()
        self.counts = Counts()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                server._answer(self, head=True)

            def do_GET(self) -> None:
                server._answer(self, head=False)

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # many clients connect at once (scan): no refused connections, no retries

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that hangs up (a timeout test, a closed pool) is not news

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    # -- set up --------------------------------------------------------------------------------------------
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def add(self, path: str, data: bytes) -> str:
        """Serve (or replace) ``data`` at ``path``; a new content gets a new ETag. Returns the URL."""
        with self._lock:
            self.files[path] = bytes(data)
            self.etags[path] = '"' + hashlib.sha1(data).hexdigest()[:16] + f'-{time.monotonic_ns()}"'
        return self.url(path)

    def add_file(self, path: str, filename: str | os.PathLike[str]) -> str:
        """Serve the file ``filename`` at ``path``, memory-mapped (a sparse file of hundreds of GB costs nothing);
        its ETag is made from its size and modification time. Returns the URL."""
        with open(filename, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        st = os.stat(filename)
        with self._lock:
            self.files[path] = data  # type: ignore[assignment]
            self.etags[path] = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        return self.url(path)

    def generate(self, prefix: str, make: Callable[[str], bytes | None]) -> None:
        """Serve ``make(path)`` (None: 404) for every path under ``prefix`` that is not a file: many files made on
        demand, e.g. the shards of a set whose name claims 99999."""
        self.generators[prefix] = make

    def reset_counts(self) -> None:
        with self._lock:
            self.counts = Counts()

    def close(self) -> None:
        self._stop.set()  # a dripping answer stops
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> TestServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- answering -------------------------------------------------------------------------------------------
    def _answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = h.path.split("?", 1)[0]
        if path.startswith(("http://", "https://")):  # asked as a forward proxy: serve the path as our own
            self.counts.proxied += 1
            path = "/" + path.split("/", 3)[-1] if path.count("/") >= 3 else "/"
        rng = h.headers.get("Range")
        with self._lock:
            self.counts.requests += 1
            self.counts.ranges.append((path, rng or ""))
            self.counts.headers.append((path, dict(h.headers.items())))
            f = self.faults
            fail = f.fail_next > 0
            if fail:
                f.fail_next -= 1
            drop = not fail and f.drop_next > 0 and path in self.files
            if drop:
                f.drop_next -= 1
            data, etag = self.files.get(path), self.etags.get(path)
            make = next((fn for prefix, fn in self.generators.items() if path.startswith(prefix)), None) if data is None else None
        if make is not None:
            data = make(path)
            etag = None if data is None else '"' + hashlib.sha1(data).hexdigest()[:16] + '"'
        if f.delay:
            time.sleep(f.delay)
        if fail:
            return self._send(h, 503, b"busy", {"Retry-After": f.retry_after} if f.retry_after else {}, head)
        for name, value in self.required.items():
            if h.headers.get(name) != value:
                return self._send(h, 401, b"unauthorized", {}, head)
        if path in self.redirects:
            return self._send(h, 302, b"", {"Location": self.redirects[path]}, head)
        if data is None:
            return self._send(h, 404, b"not found", {}, head)
        headers = {"Accept-Ranges": "bytes"} if not f.no_ranges else {}
        if etag and not f.no_etag:
            headers["ETag"] = etag
        if_range = h.headers.get("If-Range")
        m = _RANGE.match(rng or "")
        if f.no_ranges or m is None or (if_range is not None and if_range != etag):
            return self._send(h, 200, data, headers, head, drop)
        a, b = m.group(1), m.group(2)
        size = len(data)
        if a == "":
            start, end = max(0, size - int(b or 0)), size
        else:
            start, end = int(a), min(size, int(b) + 1 if b else size)
        if f.unsatisfiable is not None or start >= size or start >= end:
            return self._send(h, 416, b"", {**headers, "Content-Range": f.unsatisfiable or f"bytes */{size}"}, head)
        headers["Content-Range"] = f.content_range or f"bytes {start}-{end - 1}/{size}"
        return self._send(h, 206, data[start:end], headers, head, drop)

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str], head: bool, drop: bool = False) -> None:
        """Write the answer by hand (not ``send_response``): its head may drip a byte at a time."""
        f = self.faults
        lines = [f"HTTP/1.1 {status} {h.responses.get(status, ('',))[0]}", *(f"{k}: {v}" for k, v in headers.items())]
        lines.append(f"Content-Length: {f.content_length if f.content_length is not None else len(body)}")
        if drop:
            lines.append("Connection: close")
            h.close_connection = True
        raw_head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        try:
            self._write(h, raw_head, f.drip_headers)
            if head:
                return
            sent = body[: len(body) // 2] if drop else body
            with self._lock:  # counted before sending: the client may look at the counts as soon as it has them
                self.counts.bytes += len(sent)
            self._write(h, sent, f.drip_body)
            if drop:
                h.connection.shutdown(2)  # the client sees the body end early
        except (BrokenPipeError, ConnectionResetError, OSError):
            h.close_connection = True

    def _write(self, h: BaseHTTPRequestHandler, data: bytes, drip: float) -> None:
        if not drip:
            h.wfile.write(data)
            h.wfile.flush()
            return
        for i in range(len(data)):
            if self._stop.wait(drip):
                raise ConnectionResetError("the server is closing")
            h.wfile.write(data[i : i + 1])
            h.wfile.flush()


class DripServer:
    """A loopback TCP server that answers every connection with ``data`` a byte every ``interval`` seconds, then
    holds it open: a TLS server that never finishes its handshake (``TLS_STALL``), or any byte stream.
    ``with DripServer(data) as s:`` stops it."""

    __test__ = False

    def __init__(self, data: bytes, interval: float = 0.05):
        import socket

        self.data, self.interval = data, interval
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: Any) -> None:
        with conn:
            try:
                for i in range(len(self.data)):
                    if self._stop.wait(self.interval):
                        return
                    conn.sendall(self.data[i : i + 1])
                self._stop.wait()
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self.thread.join(timeout=5)

    def __enter__(self) -> DripServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: a TLS record header announcing a 16 KiB handshake message, then zeros: a client waits for the rest
TLS_STALL = b"\x16\x03\x03\x40\x00" + bytes(16384)
