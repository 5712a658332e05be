"""Validation profile names, declared once: each format's as a ``Literal`` and as the tuple of its names.

'spec' is each format's own document; 'ggml' adds what ggml's readers demand (GGUF and the legacy formats);
'hf' adds what the safetensors library demands (safetensors files and Ollama's tensor blobs).
"""

from __future__ import annotations

from typing import Literal, get_args

Profile = Literal["spec", "ggml", "hf"]
GGUFProfile = Literal["spec", "ggml"]
LegacyProfile = Literal["spec", "ggml"]
SafetensorsProfile = Literal["spec", "hf"]
OllamaProfile = Literal["spec"]

PROFILES: tuple[str, ...] = get_args(Profile)
GGUF_PROFILES: tuple[str, ...] = get_args(GGUFProfile)
LEGACY_PROFILES: tuple[str, ...] = get_args(LegacyProfile)
SAFETENSORS_PROFILES: tuple[str, ...] = get_args(SafetensorsProfile)
OLLAMA_PROFILES: tuple[str, ...] = get_args(OllamaProfile)


def require(profile: str, allowed: tuple[str, ...]) -> None:
    """ValueError unless ``profile`` is one of ``allowed`` (a caller's mistake, not the file's)."""
    if profile not in allowed:
        raise ValueError(f"profile must be one of {allowed}")
