"""How a command ends on a signal: Ctrl-C (SIGINT), SIGTERM and SIGHUP all unwind the command as a
``KeyboardInterrupt`` does (``finally`` blocks run: temporary outputs are removed, readers stopped, findings
kept), then one line on stderr and the shell's status for that signal (128 + its number: 130, 143, 129).

A signal the process was started ignoring (``nohup``, a background job) stays ignored.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: the signals turned into an interrupt besides SIGINT (which Python already raises as KeyboardInterrupt)
_TERMINATING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)

_last = signal.SIGINT


def _raise(signum: int, frame: Any) -> None:
    global _last
    _last = signal.Signals(signum)
    raise KeyboardInterrupt


def status() -> int:
    """The exit status for the interrupt being handled: 128 + the signal that caused it."""
    return 128 + int(_last)


@contextmanager
def interruptible() -> Iterator[None]:
    """While inside: SIGTERM and SIGHUP raise ``KeyboardInterrupt`` as SIGINT does. A no-op outside the main
    thread (where Python cannot set handlers) and for a signal that is ignored."""
    global _last
    _last = signal.SIGINT
    saved: dict[int, Any] = {}
    try:
        for s in _TERMINATING:
            if signal.getsignal(s) is signal.SIG_DFL:
                saved[s] = signal.signal(s, _raise)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
