"""The public API over the schemas: load, edit and save files."""

from typing import Any

from .file import GGUFFile, from_bytes, new
from .metadata import Metadata, MetadataField
from .tensors import TensorInfo, Tensors


def __getattr__(name: str) -> Any:
    """``load`` (any format) lives in ``gguf_construct.registry``, above this package: kept here, imported on
    first use, for one release."""
    if name == "load":
        from ..registry import load

        return load
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GGUFFile", "Metadata", "MetadataField", "TensorInfo", "Tensors", "from_bytes", "load", "new"]
