"""A byte source for any path or URL: ``open_source`` (a memory map for a path, ranged reads for http(s)://, hf://
and any URL fsspec knows), under the byte and request budgets of ``sources.budget``. What the bytes are read into
is decided above: ``api.openers``."""

from __future__ import annotations

from typing import Any

from ..core import rules
from .budget import budgeted
from .byte_source import MAX_SIZE, ByteSource, MappedSource, RangedSource
from .options import RemoteOptions, options
from .urls import hf_url, local_path, scheme_of


def open_source(
    source: Any, opts: RemoteOptions | None = None, *, headers: dict[str, str] | None = None, first_read: int | None = None
) -> ByteSource:
    """A ``ByteSource`` for a path (memory map) or an http(s)://, hf:// or fsspec URL (ranged reads, under the
    budget of ``opts``: see ``budget``); ``first_read``: the first request's size over HTTP, when not
    ``opts.first_chunk``."""
    scheme = scheme_of(source)
    if scheme is None:
        return MappedSource(source)
    if scheme == "file":
        return MappedSource(local_path(source))
    from .http import open_http

    if scheme in ("http", "https"):
        return open_http(source, opts, headers, first_read=first_read)
    if scheme == "hf":
        url, auth = hf_url(source)
        return open_http(url, opts, {**auth, **(headers or {})}, first_read=first_read)
    if scheme == "ollama":
        raise rules.REMOTE_URL.error("an ollama:// name is a model, not one file: open it with load()", url=source)
    return open_fsspec(source, opts)


def open_fsspec(url: str, opts: RemoteOptions | None = None) -> RangedSource:
    """Any URL fsspec knows (s3://, gs://, memory://, ...), read by ranges through ``fs.cat_file``; each call
    counts as a request of the command's budget. fsspec's own errors (any exception class a backend raises)
    become ``sources.open`` / ``sources.read``."""
    try:
        import fsspec
    except ImportError:
        raise rules.REMOTE_SCHEME.error(f"no reader for {scheme_of(url)}:// URLs (install fsspec for them)", url=url) from None
    opts = budgeted(opts or options())
    budget = opts.budget
    budget.request(url)
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:
        raise rules.REMOTE_SCHEME.error(f"fsspec cannot open it: {e}", url=url) from None
    try:
        size = fs.size(path)
    except Exception as e:  # noqa: BLE001 - a backend may raise anything; it is the source's failure, named
        raise rules.REMOTE_OPEN.error(f"{type(e).__name__}: {e}", url=url) from None
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_SIZE:
        raise rules.REMOTE_SIZE.error(f"fsspec gives its size as {str(size)[:40]!r}: not a number of bytes up to {MAX_SIZE}", url=url)

    def fetch(start: int, into: memoryview) -> None:
        budget.request(url)
        try:
            data = fs.cat_file(path, start=start, end=start + len(into))
        except Exception as e:  # noqa: BLE001 - as above
            raise rules.REMOTE_READ.error(f"{type(e).__name__}: {e}", url=url) from None
        if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) != len(into):
            raise rules.REMOTE_READ.error(
                f"asked for {len(into)} bytes at {start}, got "
                f"{len(data) if isinstance(data, (bytes, bytearray, memoryview)) else type(data).__name__}",
                url=url,
            )
        into[:] = data

    return RangedSource(url, size, fetch, opts)
