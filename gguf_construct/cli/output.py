"""Standard output that cannot change a command's exit code.

A reader that stops early (``| head``), a closed descriptor (``>&-``) or a full disk must not turn "this model is
invalid" (exit 1) into "done" (exit 0) or into a traceback: the command runs to its end and returns its own code.
What could not be written is dropped, and the descriptor is pointed at the null device so that the interpreter's
final flush does not fail either.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


class LossyStdout:
    """A text stream over the real standard output (None when descriptor 1 was closed at start) that drops what
    cannot be written instead of raising. ``lost`` says whether anything was dropped."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        self.lost = stream is None

    def _drop(self) -> None:
        """Stop writing: later writes go nowhere, and descriptor 1 to the null device (the exit flush is silent)."""
        self.lost = True
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, stream.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        if self._stream is not None:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self._drop()
        return len(text)

    def flush(self) -> None:
        if self._stream is not None:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._drop()

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, ... of the real stream
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


@contextlib.contextmanager
def lossy_stdout() -> Iterator[LossyStdout]:
    """Run the body with ``sys.stdout`` a ``LossyStdout``; flush it at the end (a pipe closed after the last write
    is found here), then restore the real stream."""
    real = sys.stdout
    lossy = LossyStdout(real)
    sys.stdout = lossy  # type: ignore[assignment]
    try:
        yield lossy
    finally:
        lossy.flush()
        sys.stdout = real if not lossy.lost else lossy  # type: ignore[assignment]
