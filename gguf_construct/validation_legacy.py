"""Deprecated module name: the legacy validators live in ``gguf_construct.validation.legacy`` (kept for one release)."""

from __future__ import annotations

import warnings

from .validation.legacy import *  # noqa: F403
from .validation.legacy import __all__  # noqa: F401

warnings.warn("gguf_construct.validation_legacy is deprecated: import gguf_construct.validation.legacy", DeprecationWarning, stacklevel=2)
