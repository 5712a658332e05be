"""Byte sources for any path or URL (``open_source``), and the file objects of each format over one: the same
schemas and file objects as for local files. GGUF (``api.gguf_file.gguf_from_source``) and safetensors read only their
header; tensors are fetched when read. Legacy formats interleave headers and data, so they are fetched whole
(within the byte budgets: ``sources.budget``). Which format a source holds, and so which of these opens it: ``registry.load_url``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core import rules
from ..errors import FormatError, LayoutError
from .budget import budgeted
from .byte_source import MAX_SIZE, ByteSource, MappedSource, RangedSource
from .options import RemoteOptions, options
from .urls import hf_url, local_path, scheme_of

if TYPE_CHECKING:
    from ..api.legacy_file import LegacyFile
    from ..api.safetensors_file import SafetensorsFile

#: gguf-split shards whose headers are read at once (@huggingface/gguf reads 20 at a time)
SHARD_CONCURRENCY = 16


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


# -- file objects over a source ------------------------------------------------------------------------------
def safetensors_from_source(
    src: ByteSource, *, strict: bool = True, profile: str = "spec", hint: str | None = None, **_: Any
) -> SafetensorsFile:
    """A SafetensorsFile whose tensors fetch their bytes when read (``LazyRegion``)."""
    from ..api.safetensors_file import SafetensorsFile
    from ..formats.safetensors.schema import SAFETENSORS

    container = src.parse_header(SAFETENSORS, "data")
    container.header.json  # noqa: B018 - header errors raise here, as in from_bytes
    if strict:
        from ..validation import raise_first
        from ..validation.safetensors_checks import check_safetensors

        raise_first(check_safetensors(container, profile))
    try:
        if isinstance(src, RangedSource):
            from .ranged_safetensors import RemoteSafetensorsFile

            return RemoteSafetensorsFile(container, src, hint=hint)
        return SafetensorsFile(container, src.view(), src.name, hint=hint)
    except FormatError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
        raise LayoutError(f"internal.{type(e).__name__}", str(e)) from None


def legacy_from_source(src: ByteSource, fmt: str, *, strict: bool = True, profile: str = "spec", **_: Any) -> LegacyFile:
    """GGML/GGMF/GGJT and rwkv.cpp files: their tensors' headers sit between the tensors, so the file is read whole."""
    from ..api.legacy_file import from_container, rwkv_from_container
    from ..validation import raise_first

    view = src.ensure(0, src.size)
    if fmt == "rwkv":
        from ..formats.rwkv.schema import RWKV
        from ..validation.legacy_checks import check_rwkv

        c = RWKV.parse(view)
        if strict:
            raise_first(check_rwkv(c, profile))
        return rwkv_from_container(c, src.name)
    from ..formats.legacy.schema import GGML
    from ..validation.legacy_checks import check_legacy

    c = GGML.parse(view)
    if strict:
        raise_first(check_legacy(c, profile))
    return from_container(c, src.name)


def manifest_from_source(src: ByteSource, **_: Any) -> Any:
    """An Ollama manifest names blobs by digest, which a URL of the manifest alone cannot reach: refused."""
    raise rules.REMOTE_MANIFEST.error("a manifest by URL: open the model as ollama://[REGISTRY/]NAMESPACE/MODEL:TAG", url=src.name)
