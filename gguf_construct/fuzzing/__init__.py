"""Differential fuzzing of GGUF readers: ours against gguf-py's, ggml's C reader, or any command.

- :func:`run` — the campaign behind ``gguf-construct fuzz`` (files, workers, comparison, reproducers)
- :func:`mutate` — blind and schema-aware mutations of a file's bytes
- :func:`compare`, :func:`ddmin` — what counts as a disagreement, and the minimizer
- :data:`READERS` — the built-in reader adapters (run in capped worker processes)
"""

from .adapters import READERS
from .mutators import mutate
from .runner import Disagreement, Report, compare, ddmin, run

__all__ = ["READERS", "Disagreement", "Report", "compare", "ddmin", "mutate", "run"]
