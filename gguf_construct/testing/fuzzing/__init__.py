"""Differential fuzzing of model-file readers: ours against gguf-py, ggml's C reader, llama.cpp's loader, the
safetensors library, or any reader speaking the line protocol.

- :func:`run` — the campaign behind ``gguf-construct fuzz`` (files, targets, triage, reproducers)
- :mod:`.targets` — readers as processes: :class:`LineTarget` (long-lived), :class:`OneShotTarget` (per file)
- :mod:`.triage` — what a pair of answers means: :func:`findings` with a class and a root-cause signature
- :func:`mutate` — blind and schema-aware mutations of a file's bytes
- :mod:`.minimize` — the schema's steps first (drop keys and tensors, shorten arrays and strings, zero the data),
  then :func:`ddmin`, the byte minimizer
- :data:`READERS` — the built-in reader adapters (run in capped worker processes)

Imports: anything in the library; from ``cli`` only ``cli.report`` (the ``info --json`` view compared).
"""

from .adapters import READERS
from .minimize import ddmin
from .mutators import mutate
from .runner import Report, run
from .targets import Answer, LineTarget, OneShotTarget
from .triage import CLASSES, Finding, compare_views, findings

__all__ = [
    "CLASSES",
    "READERS",
    "Answer",
    "Finding",
    "LineTarget",
    "OneShotTarget",
    "Report",
    "compare_views",
    "ddmin",
    "findings",
    "mutate",
    "run",
]
