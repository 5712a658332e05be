"""Validation of Ollama manifests: the manifest's own rules, and for a manifest file its blobs' (each present,
a regular file, of the manifest's size and sha256, and readable: JSON blobs as JSON, tensor blobs as
safetensors under the profile's strictness)."""

from __future__ import annotations

import os
from typing import Any

from ..api.ollama import open_model, parse_manifest
from .issue import Issue, parse_then_check


def validate_manifest_file(path: str | os.PathLike[str], profile: str = "spec") -> list[Issue]:
    """The manifest's rules, then its blobs' (``open_model`` knows where they are and checks each)."""

    def open_and_close() -> None:
        with open_model(path, strict=True):
            pass

    return parse_then_check(open_and_close, lambda _: [])


def validate_manifest_bytes(data: Any, profile: str = "spec") -> list[Issue]:
    """The manifest's own rules (its blobs are checked by ``validate_manifest_file``, which knows where they are)."""
    return parse_then_check(lambda: parse_manifest(bytes(memoryview(data))), lambda _: [])
