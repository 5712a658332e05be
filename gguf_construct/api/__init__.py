"""The public API over the schemas: load, edit and save files."""

from .file import GGUFFile, from_bytes, load, new
from .metadata import Metadata, MetadataField
from .tensors import TensorInfo, Tensors

__all__ = ["GGUFFile", "Metadata", "MetadataField", "TensorInfo", "Tensors", "from_bytes", "load", "new"]
