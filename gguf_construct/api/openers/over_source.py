"""Each format's file object over a ``sources.byte_source.ByteSource``: the same schemas, checks and file objects as
for a local file. GGUF's is ``api.gguf_file.gguf_from_source`` (a local GGUF file is read through a memory-mapped
source too). Safetensors reads only its header, its tensors fetched when read; the legacy formats interleave
headers and data, so they are fetched whole (within the byte budgets of ``sources.budget``). Which format a
source holds, and so which of these opens it: ``api.registry``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core import rules
from ...errors import FormatError, LayoutError
from ...formats.safetensors.schema import SAFETENSORS
from ...sources.byte_source import ByteSource, LazyRegion, RangedSource
from ...validation import raise_first
from ..safetensors_file import SafetensorsFile

if TYPE_CHECKING:
    from ..legacy_file import LegacyFile


class RemoteSafetensorsFile(SafetensorsFile):
    """Its tensors slice a ``LazyRegion`` (each slice fetches its byte range first); ``to_bytes`` fetches the
    whole file before rebuilding it."""

    def __init__(self, container: Any, src: RangedSource, *, hint: str | None = None):
        super().__init__(container, src.view(), src.name, hint=hint)
        self.source = src
        region = LazyRegion(src, src.size - len(container.data), src.size)
        for t in (*self.entries.values(), *self.tensors.values()):
            t._region = region  # what SafetensorsTensor slices its data from

    def to_bytes(self) -> bytes:
        self.source.ensure(0, self.source.size)
        return super().to_bytes()


def safetensors_from_source(
    src: ByteSource, *, strict: bool = True, profile: str = "spec", hint: str | None = None, **_: Any
) -> SafetensorsFile:
    """A SafetensorsFile whose tensors fetch their bytes when read (``LazyRegion``)."""
    from ...validation.safetensors_checks import check_safetensors

    container = src.parse_header(SAFETENSORS, "data")
    container.header.json  # noqa: B018 - header errors raise here, as in from_bytes
    if strict:
        raise_first(check_safetensors(container, profile))
    try:
        if isinstance(src, RangedSource):
            return RemoteSafetensorsFile(container, src, hint=hint)
        return SafetensorsFile(container, src.view(), src.name, hint=hint)
    except FormatError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as e:
        raise LayoutError(f"internal.{type(e).__name__}", str(e)) from None


def legacy_from_source(src: ByteSource, fmt: str, *, strict: bool = True, profile: str = "spec", **_: Any) -> LegacyFile:
    """GGML/GGMF/GGJT and rwkv.cpp files: their tensors' headers sit between the tensors, so the file is read whole."""
    from ..legacy_file import from_container, rwkv_from_container  # as above: loaded for a legacy file only

    view = src.ensure(0, src.size)
    if fmt == "rwkv":
        from ...formats.rwkv.schema import RWKV
        from ...validation.legacy_checks import check_rwkv

        c = RWKV.parse(view)
        if strict:
            raise_first(check_rwkv(c, profile))
        return rwkv_from_container(c, src.name)
    from ...formats.legacy.schema import GGML
    from ...validation.legacy_checks import check_legacy

    c = GGML.parse(view)
    if strict:
        raise_first(check_legacy(c, profile))
    return from_container(c, src.name)


def manifest_from_source(src: ByteSource, **_: Any) -> Any:
    """An Ollama manifest names blobs by digest, which a URL of the manifest alone cannot reach: refused."""
    raise rules.REMOTE_MANIFEST.error("a manifest by URL: open the model as ollama://[REGISTRY/]NAMESPACE/MODEL:TAG", url=src.name)
