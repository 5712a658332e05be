"""Validation: every rule a readable file can still break, per format, as ``Issue`` findings.

- ``issue``: ``Issue``, ``Issue.from_error``, ``raise_first`` and ``parse_then_check`` (parse, or one issue);
- ``profiles``: the profile names of each format, as ``Literal`` types and tuples;
- ``gguf``, ``legacy`` (GGML/GGMF/GGJT, rwkv.cpp), ``safetensors``, ``ollama``: each format's checks;
- the rules themselves, with the exception class each raises, are ``gguf_construct.rules``' catalogue.
"""

from __future__ import annotations

from .gguf import check, check_keys, densest_type, key_issues, parameter_issue, tensor_issues, validate_gguf_bytes
from .issue import Issue, Severity, parse_then_check, raise_first
from .profiles import GGUFProfile, LegacyProfile, OllamaProfile, Profile, SafetensorsProfile

__all__ = [
    "GGUFProfile", "Issue", "LegacyProfile", "OllamaProfile", "Profile", "SafetensorsProfile", "Severity", "check", "check_keys", "densest_type",
    "key_issues", "parameter_issue", "parse_then_check", "raise_first", "tensor_issues", "validate_gguf_bytes",
]  # fmt: skip
