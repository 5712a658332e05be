"""Byte sources for any path or URL (``open_source``), and the file objects of each format over one: the same
schemas and file objects as for local files. GGUF (``api.file.gguf_from_source``) and safetensors read only their
header; tensors are fetched when read. Legacy formats interleave headers and data, so they are fetched whole
(within ``max_bytes``). Which format a source holds, and so which of these opens it: ``registry.load_url``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import rules
from ..errors import FormatError, LayoutError
from .options import RemoteOptions
from .source import ByteSource, MappedSource, RangedSource
from .urls import hf_url, local_path, scheme_of

if TYPE_CHECKING:
    from ..api.legacy import LegacyFile
    from ..api.safetensors import SafetensorsFile

#: gguf-split shards whose headers are read at once (@huggingface/gguf reads 20 at a time)
SHARD_CONCURRENCY = 16


def open_source(source: Any, opts: RemoteOptions | None = None, *, headers: dict[str, str] | None = None, digest: str | None = None, expected_size: int | None = None) -> ByteSource:
    """A ``ByteSource`` for a path (memory map) or an http(s)://, hf:// or fsspec URL (ranged reads)."""
    scheme = scheme_of(source)
    if scheme is None:
        return MappedSource(source)
    if scheme == "file":
        return MappedSource(local_path(source))
    from .http import open_http

    if scheme in ("http", "https"):
        return open_http(source, opts, headers, digest=digest, expected_size=expected_size)
    if scheme == "hf":
        url, auth = hf_url(source)
        return open_http(url, opts, {**auth, **(headers or {})}, digest=digest)
    if scheme == "ollama":
        raise rules.REMOTE_URL.error("an ollama:// name is a model, not one file: open it with load()", url=source)
    return open_fsspec(source, opts)


def open_fsspec(url: str, opts: RemoteOptions | None = None) -> RangedSource:
    """Any URL fsspec knows (s3://, gs://, memory://, ...), read by ranges through ``fs.cat_file``."""
    try:
        import fsspec
    except ImportError:
        raise rules.REMOTE_SCHEME.error(f"no reader for {scheme_of(url)}:// URLs (install fsspec for them)", url=url) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
        size = int(fs.size(path))
    except (ImportError, ValueError) as e:
        raise rules.REMOTE_SCHEME.error(f"fsspec cannot open it: {e}", url=url) from None
    except OSError as e:
        raise rules.REMOTE_OPEN.error(f"{type(e).__name__}: {e}", url=url) from None

    def fetch(start: int, into: memoryview) -> None:
        try:
            data = fs.cat_file(path, start=start, end=start + len(into))
        except OSError as e:
            raise rules.REMOTE_READ.error(f"{type(e).__name__}: {e}", url=url) from None
        if len(data) != len(into):
            raise rules.REMOTE_READ.error(f"asked for {len(into)} bytes at {start}, got {len(data)}", url=url)
        into[:] = data

    return RangedSource(url, size, fetch, opts)


# -- file objects over a source ------------------------------------------------------------------------------
def safetensors_from_source(src: ByteSource, *, strict: bool = True, profile: str = "spec", hint: str | None = None, **_: Any) -> SafetensorsFile:
    """A SafetensorsFile whose tensors fetch their bytes when read (``LazyRegion``)."""
    from ..api.safetensors import SafetensorsFile
    from ..formats.safetensors import SAFETENSORS

    container = src.parse_header(SAFETENSORS, "data")
    container.header.json  # noqa: B018 - header errors raise here, as in from_bytes
    if strict:
        from ..validation import raise_first
        from ..validation.safetensors import check_safetensors

        raise_first(check_safetensors(container, profile))
    try:
        if isinstance(src, RangedSource):
            from .safetensors import RemoteSafetensorsFile

            return RemoteSafetensorsFile(container, src, hint=hint)
        return SafetensorsFile(container, src.view(), src.name, hint=hint)
    except FormatError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
        raise LayoutError(f"internal.{type(e).__name__}", str(e)) from None


def legacy_from_source(src: ByteSource, fmt: str, *, strict: bool = True, profile: str = "spec", **_: Any) -> LegacyFile:
    """GGML/GGMF/GGJT and rwkv.cpp files: their tensors' headers sit between the tensors, so the file is read whole."""
    from ..api.legacy import from_container, rwkv_from_container
    from ..validation import raise_first

    view = src.ensure(0, src.size)
    if fmt == "rwkv":
        from ..formats.rwkv import RWKV
        from ..validation.legacy import check_rwkv

        c = RWKV.parse(view)
        if strict:
            raise_first(check_rwkv(c, profile))
        return rwkv_from_container(c, src.name)
    from ..formats.ggml import GGML
    from ..validation.legacy import check_legacy

    c = GGML.parse(view)
    if strict:
        raise_first(check_legacy(c, profile))
    return from_container(c, src.name)


def manifest_from_source(src: ByteSource, **_: Any) -> Any:
    """An Ollama manifest names blobs by digest, which a URL of the manifest alone cannot reach: refused."""
    raise rules.REMOTE_MANIFEST.error("a manifest by URL: open the model as ollama://[REGISTRY/]NAMESPACE/MODEL:TAG", url=src.name)
