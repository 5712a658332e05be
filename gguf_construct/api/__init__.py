"""The public API over the schemas: the file objects (load, edit, save), the format registry, safe writes.

- ``gguf_file`` (``GGUFFile``), ``legacy_file``, ``safetensors_file``, ``ollama_model``, ``shard_set``: one file
  object per format, all ``protocol.ModelFile``; ``metadata``, ``tensors``, ``values``, ``standard_keys``: their
  parts;
- ``fileio``: every write goes to a temporary file, checked, then renamed into place;
- ``openers``: each format's file object over a byte source, remote shard sets, Ollama registries;
- ``registry``: every format in one table: ``load``, ``detect``, ``schema_for``, ``validate_file``,
  ``validate_bytes`` (the top of the library).

Imports: everything below (``core``, ``formats``, ``quants``, ``validation``, ``sources``); the file objects
import neither ``openers`` nor ``registry``, ``openers`` does not import ``registry``; nothing here imports the
tools above (convert, migration, planning, security, testing, cli).
"""

from .gguf_file import GGUFFile, from_bytes, new
from .metadata import Metadata, MetadataField
from .tensors import TensorInfo, Tensors

__all__ = ["GGUFFile", "Metadata", "MetadataField", "TensorInfo", "Tensors", "from_bytes", "new"]
