"""Validation of Ollama manifests' own rules. A manifest file's blobs are checked by opening the model
(``api.ollama_model.validate_manifest_file``): each present, a regular file, of the manifest's size and sha256, and
readable (JSON blobs as JSON, tensor blobs as safetensors under the profile's strictness)."""

from __future__ import annotations

from typing import Any

from ..formats.ollama.schema import parse_manifest
from .issue import Issue, parse_then_check


def validate_manifest_bytes(data: Any, profile: str = "spec") -> list[Issue]:
    """The manifest's own rules (its blobs are checked by ``validate_manifest_file``, which knows where they are)."""
    return parse_then_check(lambda: parse_manifest(bytes(memoryview(data))), lambda _: [])
