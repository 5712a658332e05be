"""A safetensors file over a ranged source: the same file object, its tensors fetched when read."""

from __future__ import annotations

from typing import Any

from ..api.safetensors_file import SafetensorsFile
from .byte_source import LazyRegion, RangedSource


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
