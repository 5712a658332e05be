"""Deprecated module name: the safetensors validators live in ``gguf_construct.validation.safetensors`` (kept for one release)."""

from __future__ import annotations

import warnings

from .validation.safetensors import *  # noqa: F403
from .validation.safetensors import __all__  # noqa: F401

warnings.warn("gguf_construct.validation_safetensors is deprecated: import gguf_construct.validation.safetensors", DeprecationWarning, stacklevel=2)
