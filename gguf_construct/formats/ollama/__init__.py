"""Ollama's model manifests (Docker's v2 manifest JSON), declared in ``schema``.

Imports: ``errors``, ``core`` and the shared ``formats`` modules.
"""
