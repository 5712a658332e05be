"""The public API over the schemas: load, edit and save files (``gguf_construct.load`` opens any format)."""

from .file import GGUFFile, from_bytes, new
from .metadata import Metadata, MetadataField
from .tensors import TensorInfo, Tensors

__all__ = ["GGUFFile", "Metadata", "MetadataField", "TensorInfo", "Tensors", "from_bytes", "new"]
