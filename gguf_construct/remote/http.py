"""HTTP(S) range reads with urllib3: retries with backoff on 5xx and on dropped connections, timeouts, a limit on
redirects, and ``If-Range`` with the first response's ETag so a file that changes between reads is an error.

urllib3 is the optional ``remote`` extra: it is small, has no dependencies of its own, and has the retry,
backoff, timeout and redirect machinery built in (``Retry``, ``Timeout``); ``requests`` sits on top of it.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from functools import cache
from typing import Any, cast

from .. import rules
from ..errors import RemoteChangedError, RemoteError
from .options import RemoteOptions, options
from .source import RangedSource

USER_AGENT = "gguf-construct/0.1 (urllib3)"
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)\s*\Z")
_UNSATISFIABLE = re.compile(r"bytes\s+\*/(\d+)\s*\Z")
#: statuses worth retrying (urllib3 backs off between tries and honours Retry-After)
RETRY_STATUSES = (429, 500, 502, 503, 504)

_pool_lock = threading.Lock()
_pools: dict[str | None, Any] = {}


def _urllib3() -> Any:
    try:
        import urllib3
    except ImportError:
        raise rules.REMOTE_MISSING_EXTRA.error("reading URLs needs urllib3: pip install 'gguf-construct[remote]'") from None
    return urllib3


def _forget_pools() -> None:
    global _pools
    _pools = {}  # a forked worker (info -j, validate -j) must not share its parent's sockets


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def _retry_after(most: float) -> dict[str, Any]:
    """Honour ``Retry-After`` up to ``most`` seconds (urllib3 >= 2.5 caps it); an older urllib3 cannot cap it, so
    there it is ignored rather than let a server make us sleep for hours."""
    if _caps_retry_after():
        return {"respect_retry_after_header": True, "retry_after_max": most}
    return {"respect_retry_after_header": False}


@cache
def _caps_retry_after() -> bool:
    import inspect

    return "retry_after_max" in inspect.signature(_urllib3().Retry.__init__).parameters


def proxy_for(url: str) -> str | None:
    """The proxy ``HTTPS_PROXY``/``HTTP_PROXY`` name for ``url``, unless ``NO_PROXY`` or a loopback host bypasses it."""
    import urllib.request
    from urllib.parse import urlsplit

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
            _pools[proxy] = u3.ProxyManager(proxy, **kw) if proxy else u3.PoolManager(**kw)
        return _pools[proxy]


class HttpFile:
    """One URL read by ranges. ``open()`` makes the first ranged request and returns a ``RangedSource``."""

    def __init__(self, url: str, opts: RemoteOptions | None = None, headers: dict[str, str] | None = None, *, digest: str | None = None, expected_size: int | None = None):
        self.url = url
        self.opts = opts or options()
        self.headers = {"Accept-Encoding": "identity", **self.opts.headers, **(headers or {})}
        self.digest = digest
        self.expected_size = expected_size
        self.etag: str | None = None  # the first response's ETag
        self.validator: str | None = None  # what If-Range sends: the ETag, else Last-Modified
        self.size: int | None = None

    # -- one request ------------------------------------------------------------------------------------
    def _request(self, headers: dict[str, str]) -> Any:
        u3 = _urllib3()
        o = self.opts
        retry = u3.Retry(
            total=o.retries, connect=o.retries, read=o.retries, status=o.retries, redirect=o.max_redirects,
            backoff_factor=o.backoff, backoff_max=max(o.backoff * 16, 1.0), status_forcelist=RETRY_STATUSES,
            allowed_methods=frozenset({"GET", "HEAD"}), raise_on_status=False, raise_on_redirect=True, **_retry_after(o.max_retry_after),
        )  # fmt: skip
        try:
            return pool(self.url).request("GET", self.url, headers={**self.headers, **headers}, retries=retry, redirect=True, preload_content=False, decode_content=False,
                                  timeout=u3.Timeout(connect=o.connect_timeout, read=o.read_timeout))  # fmt: skip
        except u3.exceptions.MaxRetryError as e:
            reason = e.reason
            if isinstance(reason, u3.exceptions.ResponseError) and "redirect" in str(reason):
                raise rules.REMOTE_REDIRECTS.error(f"more than {o.max_redirects} redirects", url=self.url) from None
            raise rules.REMOTE_CONNECTION.error(f"no answer after {o.retries + 1} tries: {_reason(reason)}", url=self.url) from None
        except (u3.exceptions.HTTPError, OSError, ValueError) as e:
            raise rules.REMOTE_CONNECTION.error(_reason(e), url=self.url) from None

    def _fail(self, resp: Any) -> RemoteError:
        status = resp.status
        what = {401: "unauthorized (a token? --header 'Authorization: Bearer ...' or HF_TOKEN)", 403: "forbidden", 404: "not found", 416: "range not satisfiable"}.get(status)
        resp.release_conn() if status < 500 else resp.drain_conn()
        return cast(RemoteError, rules.REMOTE_STATUS.error(what or f"the server answered {status} {resp.reason or ''}".strip(), url=self.url, status=status))

    def _read_body(self, resp: Any, into: memoryview, pos: int, deadline: float) -> int:
        """Read ``resp``'s body into ``into[pos:]`` (in place: a large tensor is not held twice); the new position."""
        try:
            while pos < len(into):
                if time.monotonic() > deadline:
                    raise rules.REMOTE_DEADLINE.error(f"the request took more than {self.opts.request_deadline:g} s", url=self.url, status=resp.status)
                n = resp.readinto(into[pos : pos + (1 << 20)])
                if not n:
                    break
                pos += n
        finally:
            resp.release_conn() if pos >= len(into) else resp.close()
        return pos

    # -- the first request: size, validator, range support ------------------------------------------------
    def open(self) -> RangedSource:
        o = self.opts
        first_chunk = max(1, min(o.first_chunk, o.max_bytes)) if o.max_bytes is not None else o.first_chunk
        resp = self._request({"Range": f"bytes=0-{first_chunk - 1}"})
        self.etag = resp.headers.get("ETag")
        self.validator = self.etag or resp.headers.get("Last-Modified")
        first: memoryview | bytearray = bytearray()
        deadline = time.monotonic() + o.request_deadline
        if resp.status == 206:
            start, last, total = self._content_range(resp)
            if start != 0 or total is None:
                resp.close()
                raise rules.REMOTE_CONTENT_RANGE.error(f"asked for bytes 0.., got Content-Range {resp.headers.get('Content-Range')!r}", url=self.url, status=206)
            self.size = total
            first = memoryview(bytearray(min(total, first_chunk, last + 1)))  # a server may send less than asked
            self._read_ranged(resp, 0, first, deadline)
        elif resp.status == 416:
            m = _UNSATISFIABLE.match(resp.headers.get("Content-Range", ""))
            resp.release_conn()
            if not m or int(m.group(1)) != 0:
                raise self._fail(resp)
            self.size = 0
        elif resp.status == 200:
            if not o.download:
                resp.close()
                raise rules.REMOTE_NO_RANGES.error("the server does not support range requests (it sent the whole file); --download fetches it whole", url=self.url, status=200)
            length = resp.headers.get("Content-Length")
            first = bytearray()
            self._download(resp, int(length) if length and length.isdigit() else None, first, deadline)
            self.size = len(first)
        else:
            raise self._fail(resp)
        if self.expected_size is not None and self.size != self.expected_size:
            raise RemoteChangedError("blob.size", f"the server has {self.size} bytes, the manifest says {self.expected_size}", url=self.url)
        return RangedSource(self.url, self.size, self.fetch, o, first=first, digest=self.digest)

    def _download(self, resp: Any, length: int | None, into: bytearray, deadline: float) -> None:
        """A whole body, with a progress bar on a terminal."""
        from ..progress import progress

        bar: Any = None
        if length and sys.stderr.isatty():
            bar = progress(range(0), length, f"downloading {self.url.rsplit('/', 1)[-1]}", unit="B", minimum=0)
            bar = bar if hasattr(bar, "update") else None
        limit = self.opts.max_bytes
        try:
            while True:
                if time.monotonic() > deadline:
                    raise rules.REMOTE_DEADLINE.error(f"the download took more than {self.opts.request_deadline:g} s", url=self.url, status=200)
                piece = resp.read(1 << 20)
                if not piece:
                    break
                into += piece
                if bar is not None:
                    bar.update(len(piece))
                if limit is not None and len(into) > limit:
                    raise rules.REMOTE_MAX_BYTES.error(f"more than {limit} bytes", url=self.url, status=200)
        except _urllib3().exceptions.HTTPError as e:
            raise rules.REMOTE_DROPPED.error(f"the download broke off after {len(into)} bytes: {_reason(e)}", url=self.url, status=200) from None
        finally:
            resp.close()
            if bar is not None:
                bar.close()
        if length is not None and len(into) != length:
            raise rules.REMOTE_DROPPED.error(f"the download ended after {len(into)} of {length} bytes", url=self.url, status=200)

    def _content_range(self, resp: Any) -> tuple[int, int, int | None]:
        m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
        if not m:
            resp.close()
            raise rules.REMOTE_CONTENT_RANGE.error(f"a 206 answer without a valid Content-Range ({resp.headers.get('Content-Range')!r})", url=self.url, status=206)
        return int(m.group(1)), int(m.group(2)), None if m.group(3) == "*" else int(m.group(3))

    def _read_ranged(self, resp: Any, start: int, into: memoryview, deadline: float) -> None:
        """Read a 206 body for bytes ``[start, start + len(into))`` into ``into``, resuming after a dropped
        connection (a new ranged request with If-Range for the rest) up to ``retries`` times."""
        u3 = _urllib3()
        end, pos, tries = start + len(into), 0, 0
        while True:
            try:
                pos = self._read_body(resp, into, pos, deadline)
            except (u3.exceptions.HTTPError, OSError) as e:
                if tries >= self.opts.retries:
                    raise rules.REMOTE_DROPPED.error(f"the connection broke off {tries + 1} times reading bytes {start}..{end}: {_reason(e)}", url=self.url, status=206) from None
            if pos >= len(into):
                return
            tries += 1
            if tries > self.opts.retries:
                raise rules.REMOTE_DROPPED.error(f"the body of bytes {start}..{end} ended after {pos} bytes, {tries} times", url=self.url, status=206)
            time.sleep(min(self.opts.backoff * (2 ** (tries - 1)), 5.0))
            resp = self._range_request(start + pos, end)

    def _range_request(self, start: int, end: int) -> Any:
        headers = {"Range": f"bytes={start}-{end - 1}"}
        if self.validator:
            headers["If-Range"] = self.validator
        resp = self._request(headers)
        if resp.status == 200:
            resp.close()
            raise rules.REMOTE_CHANGED.error("the file changed since it was opened (the server sent the whole new file in answer to If-Range)", url=self.url, status=200)
        if resp.status != 206:
            raise self._fail(resp)
        got_start, _, total = self._content_range(resp)
        etag = resp.headers.get("ETag")
        if (total is not None and total != self.size) or (etag and self.etag and etag != self.etag):
            resp.close()
            raise rules.REMOTE_CHANGED.error(f"the file changed since it was opened (size {total}, ETag {etag}; was {self.size}, {self.validator})", url=self.url, status=206)
        if got_start != start:
            resp.close()
            raise rules.REMOTE_CONTENT_RANGE.error(f"asked for bytes {start}.., got Content-Range {resp.headers.get('Content-Range')!r}", url=self.url, status=206)
        return resp

    # -- later ranges ---------------------------------------------------------------------------------
    def fetch(self, start: int, into: memoryview) -> None:
        """Fill ``into`` with the bytes from ``start``; RemoteChangedError if the file is no longer the one opened."""
        resp = self._range_request(start, start + len(into))
        self._read_ranged(resp, start, into, time.monotonic() + self.opts.request_deadline)


def _reason(e: Any) -> str:
    text = str(e)
    return text.split(": ", 1)[-1] if "Connection" in text and ": " in text else text


def open_http(url: str, opts: RemoteOptions | None = None, headers: dict[str, str] | None = None, **kw: Any) -> RangedSource:
    return HttpFile(url, opts, headers, **kw).open()
