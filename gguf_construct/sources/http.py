"""HTTP(S) range reads with urllib3: retries with backoff on 5xx and on dropped connections, timeouts, a limit on
redirects, and ``If-Range`` with the first response's ETag so a file that changes between reads is an error.

urllib3 is the optional ``remote`` extra: it is small, has no dependencies of its own, and has the retry,
backoff, timeout and redirect machinery built in (``Retry``, ``Timeout``); ``requests`` sits on top of it.

What urllib3 does not have is written here, each piece small:

- a deadline per request, from connecting to the body's last byte: urllib3's timeouts bound each socket
  operation, so a server sending a byte just inside every read timeout would hold a read for ever. The pools'
  connections (``_watched_pools``) hand their socket to a watchdog thread (``_Watchdog``) that shuts it at the
  deadline (from the TCP connection on, so a TLS handshake too); the same hook counts every request, retries
  and redirects included, against the command's budget;
- header numbers (``Content-Range``, ``Content-Length``) read as at most 20 ASCII digits and bounded by
  ``MAX_SIZE`` (``header_number``): ``int()`` takes other scripts' digits and thousands of digits;
- redirects and the retries of 429/5xx answers are followed here, not by urllib3, which would drain each
  answer's body (read it whole, uncounted by the budget) before the next try: the body of an answer that is not
  used is never read, its connection closed instead; on a redirect to another origin (scheme, host or port)
  every header the caller supplied is dropped, not only Authorization/Cookie;
- a body without a Content-Length (chunked) is downloaded into a temporary file under the byte limits, then
  into the source's buffer (memory within ``--max-memory``, else disk): no buffer grows with the body.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass
from functools import cache
from typing import Any, cast
from urllib.parse import urlsplit

from ..core import rules
from ..errors import FormatError, RemoteError
from .budget import Budget, budgeted
from .byte_source import MAX_SIZE, RangedSource
from .options import RemoteOptions, options

USER_AGENT = "gguf-construct/0.1 (urllib3)"
#: A header's number: ASCII digits only (``\d`` and ``int()`` take other scripts' digits), at most 20 of them.
_NUMBER = r"([0-9]{1,20})"
_CONTENT_RANGE = re.compile(rf"bytes[ \t]+{_NUMBER}-{_NUMBER}/({_NUMBER[1:-1]}|\*)[ \t]*\Z")
_UNSATISFIABLE = re.compile(rf"bytes[ \t]+\*/{_NUMBER}[ \t]*\Z")
_LENGTH = re.compile(rf"[ \t]*{_NUMBER}[ \t]*\Z")
#: headers a request needs to be the request it is; every other header the caller set is dropped on a redirect
#: to another origin
_PROTOCOL_HEADERS = frozenset({"range", "if-range", "accept-encoding", "accept", "user-agent"})
#: statuses worth retrying (urllib3 backs off between tries and honours Retry-After)
RETRY_STATUSES = (429, 500, 502, 503, 504)
#: answers followed to their Location (any method stays GET: only GETs are made)
REDIRECT_STATUSES = (301, 302, 303, 307, 308)

_pool_lock = threading.Lock()
_pools: dict[str | None, Any] = {}


def _urllib3() -> Any:
    try:
        import urllib3
    except ImportError:
        raise rules.REMOTE_MISSING_EXTRA.error("reading URLs needs urllib3: pip install 'gguf-construct[remote]'") from None
    return urllib3


def _forget_pools() -> None:
    global _pools, _watchdog
    _pools = {}  # a forked worker (info -j, validate -j) must not share its parent's sockets
    _watchdog = _Watchdog()  # nor its watchdog (the thread did not come along)


def header_number(text: str | None) -> int | None:
    """A ``Content-Length``-like header as an int: ASCII digits (at most 20), else None."""
    m = _LENGTH.match(text or "")
    return int(m.group(1)) if m else None


def _shown(value: str | None, most: int = 80) -> str:
    """A header value for a message: a hostile one may be thousands of characters long."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 5] + "...'" + f" ({len(value or '')} characters)"


# -- deadlines on the socket, requests counted -------------------------------------------------------------
@dataclass(eq=False)
class _Call:
    """One logical request of an ``HttpFile`` (its retries, redirects and resumes included): the URL, the
    deadline it must finish by, the budget it counts against, and ``head_time``: how long one attempt may wait
    for its status line and headers in all (the read timeout). While an attempt waits for them its sockets are
    shut at ``phase``, the sooner of the two; once they are in, at ``deadline``."""

    url: str
    deadline: float
    budget: Budget
    head_time: float
    phase: float = 0.0

    def start_attempt(self) -> None:
        self.phase = min(self.deadline, time.monotonic() + self.head_time)

    def check(self) -> None:
        if time.monotonic() >= self.deadline:
            raise rules.REMOTE_DEADLINE.error(
                "the request passed its deadline (request_deadline, or the command's --max-seconds)", url=self.url
            )

    def check_head(self) -> None:
        self.check()
        if self.phase and time.monotonic() >= self.phase:
            raise rules.REMOTE_DEADLINE.error(
                f"the status line and headers timed out: they took more than {self.head_time:g} s in all (the read timeout)", url=self.url
            )


_current = threading.local()  # .call: the _Call the pool is serving on this thread, or None


class _Watchdog:
    """Shuts each watched socket at its call's deadline, which wakes a thread blocked reading it (the read sees
    the connection end). One daemon thread, started on first use."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sockets: dict[Any, tuple[float, _Call, bool]] = {}  # socket -> (deadline, call, ours to close)
        self._thread: threading.Thread | None = None

    def watch(self, sock: Any, call: _Call, *, owned: bool = False) -> None:
        """Shut ``sock`` at ``call``'s deadline; ``owned``: a duplicate made for watching, closed when forgotten."""
        with self._cond:
            self._sockets[sock] = (call.phase or call.deadline, call, owned)  # a pooled socket now serves this call
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gguf-construct-deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()

    def extend(self, call: _Call) -> None:
        """The call's headers are in: its sockets now run to its deadline."""
        with self._cond:
            for sock, (_, c, owned) in list(self._sockets.items()):
                if c is call:
                    self._sockets[sock] = (call.deadline, call, owned)

    def forget(self, call: _Call) -> None:
        with self._cond:
            for sock in [s for s, (_, c, _) in self._sockets.items() if c is call]:
                _, _, owned = self._sockets.pop(sock)
                if owned:
                    sock.close()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for sock in [s for s, (d, _, _) in self._sockets.items() if d <= now]:
                    _, _, owned = self._sockets.pop(sock)
                    with contextlib.suppress(OSError, TypeError):  # already closed
                        # the plain socket's shutdown: an SSLSocket's own would drop its TLS state under the reader
                        socket.socket.shutdown(sock, socket.SHUT_RDWR)
                    if owned:
                        sock.close()
                nearest = min((d for d, _, _ in self._sockets.values()), default=None)
                self._cond.wait(None if nearest is None else max(0.0, nearest - now))


_watchdog = _Watchdog()


@cache
def _watched_pools() -> dict[str, Any]:
    """urllib3's pool classes with connections that report to the running call: each request is counted against
    the budget (refused past it or past the deadline) and its socket watched until the call ends."""
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class Watched:
        sock: Any

        def _new_conn(self) -> Any:
            sock = super()._new_conn()  # type: ignore[misc]
            call = getattr(_current, "call", None)
            if call is not None:  # a duplicate of the connected socket: TLS takes the original over (detaching it)
                call.start_attempt()  # (an HTTPS pool connects before it sends: the handshake starts the attempt)
                _watchdog.watch(sock.dup(), call, owned=True)  # before its handshake, which the deadline bounds too
            return sock

        def connect(self) -> None:
            super().connect()  # type: ignore[misc]
            call = getattr(_current, "call", None)
            if call is not None:
                _watchdog.watch(self.sock, call)

        def request(self, *args: Any, **kwargs: Any) -> None:
            call = getattr(_current, "call", None)
            if call is not None:
                call.check()
                call.budget.request(call.url)
                call.start_attempt()
                if self.sock is not None:  # a kept-alive connection (a new one is watched once connected)
                    _watchdog.watch(self.sock, call)
            super().request(*args, **kwargs)  # type: ignore[misc]

    class WatchedHTTP(Watched, HTTPConnection):
        pass

    class WatchedHTTPS(Watched, HTTPSConnection):
        pass

    class WatchedHTTPPool(HTTPConnectionPool):
        ConnectionCls = WatchedHTTP

    class WatchedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = WatchedHTTPS

    return {"http": WatchedHTTPPool, "https": WatchedHTTPSPool}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def proxy_for(url: str) -> str | None:
    """The proxy ``HTTPS_PROXY``/``HTTP_PROXY`` name for ``url``, unless ``NO_PROXY`` or a loopback host bypasses it."""
    import urllib.request

    parts = urlsplit(url)
    proxy = urllib.request.getproxies_environment().get(parts.scheme)
    host = parts.hostname or ""
    if not proxy or host in ("localhost", "127.0.0.1", "::1") or urllib.request.proxy_bypass_environment(host):  # type: ignore[attr-defined]  # undocumented, not in typeshed
        return None
    return proxy


def pool(url: str = "") -> Any:
    """The connection pool for ``url`` (one per proxy, one direct), shared by the process's threads; it keeps
    connections alive between the ranges of a file."""
    proxy = proxy_for(url) if url else None
    u3 = _urllib3()  # imported before taking the lock: an import under a lock can wait on another thread's import
    with _pool_lock:
        if proxy not in _pools:
            kw = {"num_pools": 64, "maxsize": 64, "block": False, "headers": {"User-Agent": USER_AGENT}}
            manager = u3.ProxyManager(proxy, **kw) if proxy else u3.PoolManager(**kw)
            manager.pool_classes_by_scheme = _watched_pools()
            _pools[proxy] = manager
        return _pools[proxy]


class HttpFile:
    """One URL read by ranges. ``open()`` makes the first ranged request and returns a ``RangedSource``.

    Every request counts against the command's budget (``opts.budget``; a file opened on its own gets one) and
    ends by its deadline: ``request_deadline`` from its start, or the command's end, whichever comes first.
    ``on_complete(view)`` runs once every byte of the file has been fetched (an Ollama blob's digest check)."""

    def __init__(
        self,
        url: str,
        opts: RemoteOptions | None = None,
        headers: dict[str, str] | None = None,
        *,
        on_complete: Any = None,
        first_read: int | None = None,
    ) -> None:
        self.url = url
        self.first_read = first_read  # the first request's size, when not ``opts.first_chunk``
        self.opts = budgeted(opts or options())
        self.budget: Budget = self.opts.budget
        supplied = {**self.opts.headers, **(headers or {})}
        self.headers = {"Accept-Encoding": "identity", **supplied}
        #: dropped on a redirect to another origin: every header the caller supplied (a token may have any name)
        self.private_headers = frozenset(k.lower() for k in supplied if k.lower() not in _PROTOCOL_HEADERS) | {
            "authorization",
            "cookie",
            "proxy-authorization",
        }
        self.on_complete = on_complete
        self.etag: str | None = None  # the first response's ETag
        self.validator: str | None = None  # what If-Range sends: the ETag, else Last-Modified
        self.size: int | None = None

    # -- one request ------------------------------------------------------------------------------------
    def _call(self) -> _Call:
        """A new logical request: its deadline is ``request_deadline`` away or the command's, the sooner."""
        self.budget.check_time(self.url)
        deadline = time.monotonic() + self.opts.request_deadline
        left = self.budget.left()
        return _Call(self.url, deadline if left is None else min(deadline, time.monotonic() + left), self.budget, self.opts.read_timeout)

    def _request(self, headers: dict[str, str], call: _Call) -> Any:
        """One logical GET: urllib3 makes one attempt at a time (retrying only a connection that failed before an
        answer came), and the redirects and the retries of a 429/5xx answer are followed here, each answer's body
        closed unread: urllib3 would drain it (read it whole, uncounted, however large) before its next try."""
        from urllib.parse import urljoin, urlsplit

        o = self.opts
        url, tries, redirects = self.url, 0, 0
        sent = {**self.headers, **headers}
        while True:
            resp = self._attempt(url, sent, call)
            location = resp.headers.get("Location") if resp.status in REDIRECT_STATUSES else None
            if location is not None:
                resp.close()  # the connection is dropped with the body unread
                redirects += 1
                if redirects > o.max_redirects:
                    raise rules.REMOTE_REDIRECTS.error(f"more than {o.max_redirects} redirects", url=self.url)
                target = urljoin(url, location)
                if urlsplit(target).scheme not in ("http", "https"):
                    raise rules.REMOTE_REDIRECTS.error(f"a redirect to {_shown(target)}: not an http(s) URL", url=self.url)
                if _origin(target) != _origin(url):  # every header the caller supplied stays with its origin
                    sent = {k: v for k, v in sent.items() if k.lower() not in self.private_headers}
                url = target
                continue
            if resp.status in RETRY_STATUSES and tries < o.retries:
                wait = self._retry_wait(resp, tries, call)
                resp.close()  # the error page is not read either
                tries += 1
                time.sleep(wait)
                continue
            return resp

    def _retry_wait(self, resp: Any, tries: int, call: _Call) -> float:
        """Seconds before the next try: exponential backoff, or the answer's ``Retry-After`` (in seconds) up to
        ``max_retry_after``; never past the request's deadline."""
        o = self.opts
        left = max(0.0, call.deadline - time.monotonic())
        wait = min(o.backoff * (2**tries), max(o.backoff * 16, 1.0))
        after = header_number(resp.headers.get("Retry-After"))
        if after is not None:
            wait = min(float(after), o.max_retry_after)
        return min(wait, left)

    def _attempt(self, url: str, headers: dict[str, str], call: _Call) -> Any:
        """One request and its answer's status line and headers (the body is left unread): connection failures
        retried by urllib3 (no answer, so no body), no redirect followed, no status retried."""
        u3 = _urllib3()
        o = self.opts
        call.check()
        left = max(0.001, call.deadline - time.monotonic())
        retry = u3.Retry(
            total=o.retries,
            connect=o.retries,
            read=o.retries,
            status=0,
            redirect=False,
            other=0,
            backoff_factor=o.backoff,
            backoff_max=min(max(o.backoff * 16, 1.0), left),
            status_forcelist=(),
            allowed_methods=frozenset({"GET", "HEAD"}),
            raise_on_status=False,
            raise_on_redirect=False,
            respect_retry_after_header=False,
        )
        _current.call = call
        try:
            resp = pool(url).request(
                "GET",
                url,
                headers=headers,
                retries=retry,
                redirect=False,
                preload_content=False,
                decode_content=False,
                timeout=u3.Timeout(connect=min(o.connect_timeout, left), read=min(o.read_timeout, left)),
            )
            if call.phase and time.monotonic() >= call.phase:  # headers cut short by the watchdog read as if they had ended
                resp.close()
                call.check_head()
            call.phase = 0.0
            _watchdog.extend(call)  # the body runs to the request's deadline
            return resp
        except FormatError:
            raise  # the budget or the deadline, from the connection's hook
        except u3.exceptions.MaxRetryError as e:
            call.check_head()
            raise rules.REMOTE_CONNECTION.error(f"no answer after {o.retries + 1} tries: {_reason(e.reason)}", url=self.url) from None
        except (u3.exceptions.HTTPError, OSError, ValueError, OverflowError) as e:
            call.check_head()
            raise rules.REMOTE_CONNECTION.error(_reason(e), url=self.url) from None
        finally:
            _current.call = None

    def _fail(self, resp: Any) -> RemoteError:
        status = resp.status
        what = {
            401: "unauthorized (a token? --header 'Authorization: Bearer ...' or HF_TOKEN)",
            403: "forbidden",
            404: "not found",
            416: "range not satisfiable",
        }.get(status)
        resp.close()
        return cast(
            RemoteError,
            rules.REMOTE_STATUS.error(
                what or f"the server answered {status} {_shown(resp.reason or '')[1:-1]}".strip(), url=self.url, status=status
            ),
        )

    def _read_body(self, resp: Any, into: memoryview, pos: int, call: _Call) -> int:
        """Read ``resp``'s body into ``into[pos:]`` (in place: a large tensor is not held twice); the new position."""
        try:
            while pos < len(into):
                call.check()
                n = resp.readinto(into[pos : pos + (1 << 20)])
                if not n:
                    break
                pos += n
        finally:  # kept alive only when the body was read to its end: a server sending more is not trusted again
            resp.release_conn() if pos >= len(into) and resp.length_remaining == 0 else resp.close()
        return pos

    # -- the first request: size, validator, range support ------------------------------------------------
    def open(self) -> RangedSource:
        call = self._call()
        try:
            return self._open(call)
        finally:
            _watchdog.forget(call)

    def _open(self, call: _Call) -> RangedSource:
        o = self.opts
        first_chunk = self.first_read or o.first_chunk
        first_chunk = max(1, min(first_chunk, o.max_file_bytes)) if o.max_file_bytes is not None else first_chunk
        self.budget.take_bytes(first_chunk, self.url, 0)  # given back below for what does not come
        resp = self._request({"Range": f"bytes=0-{first_chunk - 1}"}, call)
        self.etag = resp.headers.get("ETag")
        self.validator = self.etag or resp.headers.get("Last-Modified")
        first: memoryview | bytearray = bytearray()
        if resp.status == 206:
            start, last, total = self._content_range(resp)
            if start != 0 or total is None or last >= first_chunk:
                resp.close()
                raise rules.REMOTE_CONTENT_RANGE.error(
                    f"asked for bytes 0-{first_chunk - 1}, got Content-Range {_shown(resp.headers.get('Content-Range'))}",
                    url=self.url,
                    status=206,
                )
            self.size = total
            first = memoryview(bytearray(last + 1))  # a server may send less than asked
            self._read_ranged(resp, 0, first, call)
            self.budget.take_bytes(len(first) - first_chunk, self.url)
        elif resp.status == 416:
            value = resp.headers.get("Content-Range", "")
            m = _UNSATISFIABLE.match(value)
            if not m or int(m.group(1)) != 0:
                raise self._fail(resp)
            resp.close()
            self.size = 0
            self.budget.take_bytes(-first_chunk, self.url)
        elif resp.status == 200:
            self.budget.take_bytes(-first_chunk, self.url)
            if not o.download:
                resp.close()
                raise rules.REMOTE_NO_RANGES.error(
                    "the server does not support range requests (it sent the whole file); to fetch it whole, pass --download "
                    "on the command line, or in Python call gguf_construct.sources.configure(download=True) first",
                    url=self.url,
                    status=200,
                )
            length = self._content_length(resp)
            if length is not None:  # straight into the file's sparse buffer (memory or disk, by the budget)
                self._check_file_size(resp, length)
                self.size = length
                src = RangedSource(self.url, length, self.fetch, o, on_complete=self.on_complete)
                src.filled(self._download(resp, length, src.view(), call))
                return src
            return self._download_unsized(resp, call)
        else:
            self.budget.take_bytes(-first_chunk, self.url)
            raise self._fail(resp)
        return RangedSource(self.url, self.size, self.fetch, o, first=first, on_complete=self.on_complete)

    def _download_unsized(self, resp: Any, call: _Call) -> RangedSource:
        """A 200 body of unknown length (chunked): streamed to a temporary file under the byte limits, which then
        becomes the source's buffer on disk, or is copied a piece at a time into memory when the memory budget has
        room for it. Nothing held in memory grows with the body."""
        import tempfile

        with tempfile.TemporaryFile(prefix="gguf-construct-download-") as spool:
            size = self._download(resp, None, spool, call)
            spool.flush()
            src = RangedSource(self.url, size, self.fetch, self.opts, on_complete=self.on_complete, spool=spool)
            spool.seek(0)
            view, pos = src.view(), size if src.adopted else 0
            while pos < size:
                n = spool.readinto(view[pos : pos + (1 << 20)])
                if not n:
                    raise rules.REMOTE_DROPPED.error(f"the downloaded file ended after {pos} of {size} bytes", url=self.url, status=200)
                pos += n
        self.size = size
        src.filled(size)
        return src

    def _content_length(self, resp: Any) -> int | None:
        """A 200 answer's Content-Length (None without one); refused unless ASCII digits within ``MAX_SIZE``."""
        value = resp.headers.get("Content-Length")
        if value is None:
            return None
        length = header_number(value)
        if length is None:
            resp.close()
            raise rules.REMOTE_CONTENT_LENGTH.error(
                f"Content-Length {_shown(value)} is not a number of bytes", url=self.url, status=resp.status
            )
        if length > MAX_SIZE:
            resp.close()
            raise rules.REMOTE_SIZE.error(
                f"the server announces {length} bytes, more than the {MAX_SIZE} the reader maps", url=self.url, status=resp.status
            )
        return length

    def _check_file_size(self, resp: Any, length: int) -> None:
        limit = self.opts.max_file_bytes
        if limit is not None and length > limit:
            resp.close()
            raise rules.REMOTE_MAX_BYTES.error(
                f"the file has {length} bytes, more than the limit of {limit} per file", url=self.url, status=200
            )

    def _download(self, resp: Any, length: int | None, into: Any, call: _Call) -> int:
        """A whole body into ``into`` (a file written in order, or a buffer of ``length`` bytes written in place),
        with a progress bar on a terminal, within the per-file and the command's byte limits (each piece counted
        before it is kept); the bytes read."""
        from ..core.progress import progress

        limit = self.opts.max_file_bytes
        bar: Any = None
        if length and sys.stderr.isatty():
            bar = progress(range(0), length, f"downloading {self.url.rsplit('/', 1)[-1]}", unit="B", minimum=0)
            bar = bar if hasattr(bar, "update") else None
        pos = 0
        try:
            while True:
                call.check()
                piece = resp.read(1 << 20)
                if not piece:
                    break
                self.budget.take_bytes(len(piece), self.url, pos)
                if limit is not None and pos + len(piece) > limit:
                    raise rules.REMOTE_MAX_BYTES.error(f"more than {limit} bytes (the limit per file)", url=self.url, status=200)
                if not isinstance(into, memoryview):
                    into.write(piece)
                elif pos + len(piece) > len(into):
                    raise rules.REMOTE_DROPPED.error(
                        f"the body is longer than its Content-Length of {len(into)} bytes", url=self.url, status=200
                    )
                else:
                    into[pos : pos + len(piece)] = piece
                pos += len(piece)
                if bar is not None:
                    bar.update(len(piece))
        except (_urllib3().exceptions.HTTPError, OSError) as e:
            call.check()
            raise rules.REMOTE_DROPPED.error(f"the download broke off after {pos} bytes: {_reason(e)}", url=self.url, status=200) from None
        finally:
            resp.close()
            if bar is not None:
                bar.close()
        if length is not None and pos != length:
            raise rules.REMOTE_DROPPED.error(f"the download ended after {pos} of {length} bytes", url=self.url, status=200)
        return pos

    def _content_range(self, resp: Any) -> tuple[int, int, int | None]:
        """A 206 answer's ``(first, last, total)``: ASCII digits, first <= last < total <= ``MAX_SIZE``."""
        value = resp.headers.get("Content-Range")
        m = _CONTENT_RANGE.match(value or "")
        start, last = (int(m.group(1)), int(m.group(2))) if m else (0, -1)
        total = None if not m or m.group(3) == "*" else int(m.group(3))
        if not m or last < start or (total is not None and last >= total):
            resp.close()
            raise rules.REMOTE_CONTENT_RANGE.error(
                f"a 206 answer without a valid Content-Range ({_shown(value)})", url=self.url, status=206
            )
        if total is not None and total > MAX_SIZE:
            resp.close()
            raise rules.REMOTE_SIZE.error(
                f"the server announces {total} bytes, more than the {MAX_SIZE} the reader maps", url=self.url, status=206
            )
        return start, last, total

    def _read_ranged(self, resp: Any, start: int, into: memoryview, call: _Call) -> None:
        """Read a 206 body for bytes ``[start, start + len(into))`` into ``into``, resuming after a dropped
        connection (a new ranged request with If-Range for the rest) up to ``retries`` times, all by the call's
        deadline."""
        u3 = _urllib3()
        end, pos, tries = start + len(into), 0, 0
        while True:
            try:
                pos = self._read_body(resp, into, pos, call)
            except (u3.exceptions.HTTPError, OSError) as e:
                call.check()  # the watchdog shut the socket: the deadline, not the server, ended the read
                if tries >= self.opts.retries:
                    raise rules.REMOTE_DROPPED.error(
                        f"the connection broke off {tries + 1} times reading bytes {start}..{end}: {_reason(e)}", url=self.url, status=206
                    ) from None
            if pos >= len(into):
                return
            call.check()
            tries += 1
            if tries > self.opts.retries:
                raise rules.REMOTE_DROPPED.error(
                    f"the body of bytes {start}..{end} ended after {pos} bytes, {tries} times", url=self.url, status=206
                )
            time.sleep(max(0.0, min(self.opts.backoff * (2 ** (tries - 1)), 5.0, call.deadline - time.monotonic())))
            resp = self._range_request(start + pos, end, call)

    def _range_request(self, start: int, end: int, call: _Call) -> Any:
        headers = {"Range": f"bytes={start}-{end - 1}"}
        if self.validator:
            headers["If-Range"] = self.validator
        resp = self._request(headers, call)
        if resp.status == 200:
            resp.close()
            raise rules.REMOTE_CHANGED.error(
                "the file changed since it was opened (the server sent the whole new file in answer to If-Range)", url=self.url, status=200
            )
        if resp.status != 206:
            raise self._fail(resp)
        got_start, got_last, total = self._content_range(resp)
        etag = resp.headers.get("ETag")
        if (total is not None and total != self.size) or (etag and self.etag and etag != self.etag):
            resp.close()
            raise rules.REMOTE_CHANGED.error(
                f"the file changed since it was opened (size {total}, ETag {_shown(etag)}; was {self.size}, {_shown(self.validator)})",
                url=self.url,
                status=206,
            )
        if got_start != start or got_last >= end:
            resp.close()
            raise rules.REMOTE_CONTENT_RANGE.error(
                f"asked for bytes {start}-{end - 1}, got Content-Range {_shown(resp.headers.get('Content-Range'))}",
                url=self.url,
                status=206,
            )
        return resp

    # -- later ranges ---------------------------------------------------------------------------------
    def fetch(self, start: int, into: memoryview) -> None:
        """Fill ``into`` with the bytes from ``start``; RemoteChangedError if the file is no longer the one opened."""
        call = self._call()
        try:
            self._read_ranged(self._range_request(start, start + len(into), call), start, into, call)
        finally:
            _watchdog.forget(call)


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port: a redirect elsewhere drops the caller's headers."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    return parts.scheme.lower(), (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(parts.scheme.lower())


def _reason(e: Any) -> str:
    text = str(e)
    return text.split(": ", 1)[-1] if "Connection" in text and ": " in text else text


def open_http(url: str, opts: RemoteOptions | None = None, headers: dict[str, str] | None = None, **kw: Any) -> RangedSource:
    return HttpFile(url, opts, headers, **kw).open()
