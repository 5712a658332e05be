"""Open model files from any source (``load_url``): the same schemas and file objects as for local files, over a
``ByteSource``. GGUF and safetensors read only their header; tensors are fetched when read. Legacy formats
interleave headers and data, so they are fetched whole (within ``max_bytes``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import FormatError, LayoutError
from .errors import RemoteError
from .options import RemoteOptions
from .source import ByteSource, MappedSource, RangedSource
from .urls import hf_url, local_path, scheme_of

if TYPE_CHECKING:
    from ..api.file import GGUFFile
    from ..api.legacy import LegacyFile
    from ..api.protocol import ModelFile
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
        raise RemoteError("remote.url", "an ollama:// name is a model, not one file: open it with load()", url=source)
    return open_fsspec(source, opts)


def open_fsspec(url: str, opts: RemoteOptions | None = None) -> RangedSource:
    """Any URL fsspec knows (s3://, gs://, memory://, ...), read by ranges through ``fs.cat_file``."""
    try:
        import fsspec
    except ImportError:
        raise RemoteError("remote.scheme", f"no reader for {scheme_of(url)}:// URLs (install fsspec for them)", url=url) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
        size = int(fs.size(path))
    except (ImportError, ValueError) as e:
        raise RemoteError("remote.scheme", f"fsspec cannot open it: {e}", url=url) from None
    except OSError as e:
        raise RemoteError("remote.open", f"{type(e).__name__}: {e}", url=url) from None

    def fetch(start: int, into: memoryview) -> None:
        try:
            data = fs.cat_file(path, start=start, end=start + len(into))
        except OSError as e:
            raise RemoteError("remote.read", f"{type(e).__name__}: {e}", url=url) from None
        if len(data) != len(into):
            raise RemoteError("remote.read", f"asked for {len(into)} bytes at {start}, got {len(data)}", url=url)
        into[:] = data

    return RangedSource(url, size, fetch, opts)


# -- file objects over a source ------------------------------------------------------------------------------
def load_url(source: str, *, strict: bool = True, profile: str = "spec", byte_order: str | None = None, shards: bool = True, hint: str | None = None, opts: RemoteOptions | None = None) -> ModelFile:
    """``load()`` for a remote source: a GGUFFile (a ShardedGGUF from a first shard's URL when ``shards``), a
    SafetensorsFile, an OllamaModel (``ollama://``) or a LegacyFile."""
    if scheme_of(source) == "ollama":
        from .ollama import load_ollama

        return load_ollama(source, strict=strict, hint=hint, opts=opts)
    src = open_source(source, opts)
    fmt = detect_source(src)
    if fmt == "gguf" and shards and byte_order is None:
        from .shards import first_shard_urls

        urls = first_shard_urls(source)
        if urls:
            from .shards import load_remote_shards

            return load_remote_shards(urls, src, strict=strict, profile=profile, opts=opts)
    return load_source(src, fmt, strict=strict, profile=profile, byte_order=byte_order, hint=hint)


def detect_source(src: ByteSource) -> str:
    from ..formats.detect import PREFIX_SIZE, detect

    return detect(bytes(src.ensure(0, PREFIX_SIZE)))


def load_source(src: ByteSource, fmt: str | None = None, *, strict: bool = True, profile: str = "spec", byte_order: str | None = None, hint: str | None = None) -> ModelFile:
    fmt = fmt or detect_source(src)
    if fmt == "gguf":
        return gguf_from_source(src, strict=strict, profile=profile, byte_order=byte_order)
    if fmt == "safetensors":
        return safetensors_from_source(src, strict=strict, profile=profile, hint=hint)
    if fmt == "ollama":
        raise RemoteError("remote.manifest", "a manifest by URL: open the model as ollama://[REGISTRY/]NAMESPACE/MODEL:TAG", url=src.name)
    return legacy_from_source(src, fmt, strict=strict, profile=profile)


def gguf_from_source(src: ByteSource, *, strict: bool = True, profile: str = "spec", byte_order: str | None = None, unknown_types: str = "error") -> GGUFFile:
    """A GGUFFile: the header through ``GGUF`` on the source's prefix, tensor data left where it is. A value of
    an unknown type raises with ``error.partial``, the keys before it (``api.file.readable_prefix``)."""
    from ..api.file import GGUFFile, readable_prefix
    from ..errors import UnsupportedTypeError
    from ..formats.gguf import GGUF

    try:
        container = src.parse_header(GGUF, "tensor_data", **({"byte_order": byte_order} if byte_order else {}))
    except UnsupportedTypeError as e:
        if e.rule == "value.type":
            e.partial = readable_prefix(src.view(), e, src.name)
        raise
    if strict:
        from ..validation import check, raise_first

        raise_first(check(container, src.size, profile=profile, unknown_types=unknown_types))
    rest = container.get("tensor_data")
    if rest is not None:
        container["tensor_data"] = src.lazy(src.size - len(rest), src.size)
    return GGUFFile(container, src.view(), src.name)


def safetensors_from_source(src: ByteSource, *, strict: bool = True, profile: str = "spec", hint: str | None = None) -> SafetensorsFile:
    """A SafetensorsFile whose tensors fetch their bytes when read (``LazyRegion``)."""
    from ..api.safetensors import SafetensorsFile
    from ..formats.safetensors import SAFETENSORS

    container = src.parse_header(SAFETENSORS, "data")
    container.header.json  # noqa: B018 - header errors raise here, as in from_bytes
    if strict:
        from ..validation import raise_first
        from ..validation_safetensors import check_safetensors

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


def legacy_from_source(src: ByteSource, fmt: str, *, strict: bool = True, profile: str = "spec") -> LegacyFile:
    """GGML/GGMF/GGJT and rwkv.cpp files: their tensors' headers sit between the tensors, so the file is read whole."""
    from ..api.legacy import from_container, rwkv_from_container
    from ..validation import raise_first

    view = src.ensure(0, src.size)
    if fmt == "rwkv":
        from ..formats.rwkv import RWKV
        from ..validation_legacy import check_rwkv

        c = RWKV.parse(view)
        if strict:
            raise_first(check_rwkv(c, profile))
        return rwkv_from_container(c, src.name)
    from ..formats.ggml import GGML
    from ..validation_legacy import check_legacy

    c = GGML.parse(view)
    if strict:
        raise_first(check_legacy(c, profile))
    return from_container(c, src.name)


def validate_url(source: str, profile: str = "spec") -> list[Any]:
    """``validate_file`` for a remote source: every issue of its header (and of the whole file for the formats
    that are read whole); a failure to read is one issue with its rule (``remote.*``)."""
    from ..validation import Issue

    try:
        if scheme_of(source) == "ollama":
            from .ollama import validate_ollama

            return validate_ollama(source)
        src = open_source(source)
        fmt = detect_source(src)
        from ..formats.registry import FORMATS
        from ..formats.registry import PROFILES as ALL_PROFILES

        if profile not in FORMATS[fmt].profiles and profile in ALL_PROFILES:
            profile = "spec"
        if fmt == "gguf":
            from ..formats.gguf import GGUF
            from ..validation import check

            return check(src.parse_header(GGUF, "tensor_data"), src.size, profile)
        if fmt == "safetensors":
            from ..formats.safetensors import SAFETENSORS
            from ..validation_safetensors import check_safetensors

            c = src.parse_header(SAFETENSORS, "data")
            c.header.json  # noqa: B018
            return check_safetensors(c, profile)
        from ..validation import validate_bytes

        return validate_bytes(src.ensure(0, src.size), profile)
    except FormatError as e:
        return [Issue(e.rule, e.message, e.path, e.offset)]
