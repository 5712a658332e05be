"""Validation: every rule a readable file can still break, per format, as ``Issue`` findings.

- ``issue``: ``Issue``, ``raise_first`` and ``parse_then_check``; ``profiles``: each format's profile names;
- ``gguf_checks``, ``legacy_checks`` (GGML/GGMF/GGJT, rwkv.cpp), ``safetensors_checks``, ``ollama_checks``;
- the scan of chat templates (``validate --security``) is ``gguf_construct.security``.

Imports: ``errors``, ``core``, ``formats`` and ``quants``; never sources, api or above.
"""

from __future__ import annotations

from .gguf_checks import check, check_keys, densest_type, key_issues, model_issues, parameter_issue, tensor_issues, validate_gguf_bytes
from .issue import Issue, Severity, parse_then_check, raise_first
from .profiles import GGUFProfile, LegacyProfile, OllamaProfile, Profile, SafetensorsProfile

__all__ = [
    "GGUFProfile",
    "Issue",
    "LegacyProfile",
    "OllamaProfile",
    "Profile",
    "SafetensorsProfile",
    "Severity",
    "check",
    "check_keys",
    "densest_type",
    "key_issues",
    "model_issues",
    "parameter_issue",
    "parse_then_check",
    "raise_first",
    "tensor_issues",
    "validate_gguf_bytes",
]
