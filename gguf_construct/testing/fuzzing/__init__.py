"""Differential fuzzing of model-file readers: ours against gguf-py, ggml's C reader, llama.cpp's loader, the
safetensors library, or any reader speaking the line protocol.

- :func:`run` — the campaign behind ``gguf-construct fuzz`` (files, targets, triage, reproducers)
- :mod:`.targets` — readers as processes: :class:`LineTarget` (long-lived), :class:`OneShotTarget` (per file)
- :mod:`.triage` — what a pair of answers means: :func:`findings` with a class and a root-cause signature
- :func:`mutate` — blind and schema-aware mutations of a file's bytes
- :mod:`.minimize` — the schema's steps first (drop keys and tensors, shorten arrays and strings, zero the data),
  then :func:`ddmin`, the byte minimizer
- :data:`ADAPTERS` — the built-in readers, one :class:`ReaderAdapter` each (run in capped worker processes)
- :mod:`.findings_file` — findings.tsv and --known files, read as untrusted text

Imports: anything in the library, nothing from ``cli``.
"""

from .adapters import ADAPTERS, ReaderAdapter, View
from .findings_file import load_known
from .minimize import ddmin
from .mutators import mutate
from .runner import Report, run
from .targets import Answer, LineTarget, OneShotTarget, Target
from .triage import CLASSES, Finding, compare_views, findings

__all__ = [
    "ADAPTERS",
    "CLASSES",
    "Answer",
    "Finding",
    "LineTarget",
    "OneShotTarget",
    "ReaderAdapter",
    "Report",
    "Target",
    "View",
    "compare_views",
    "ddmin",
    "findings",
    "load_known",
    "mutate",
    "run",
]
