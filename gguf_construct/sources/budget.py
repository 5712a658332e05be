"""A command's total budget for remote reads: requests, bytes, seconds and sparse-buffer memory, shared by every
file it opens (the shards of a set, the blobs of an Ollama model, each later tensor read) and by every thread
that reads them. Per-file and per-request limits (``RemoteOptions.max_file_bytes``, ``request_deadline``) sit
under it; ``options.RemoteOptions`` documents each limit.

One budget per command: the CLI starts one for the whole command; ``load()``, ``validate`` and each line of a
``scan`` start their own when none is running (``budgeted``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..core import rules
from .options import RemoteOptions


class Budget:
    """Counters against the total limits of ``opts``; every method is thread-safe. A breach raises a
    ``RemoteLimitError`` naming the rule (``sources.max_requests``, ``sources.max_bytes``, ``sources.deadline``)."""

    def __init__(self, opts: RemoteOptions):
        self.max_requests = opts.max_requests
        self.max_bytes = opts.max_bytes
        self.max_memory = opts.max_memory
        self.max_seconds = opts.max_seconds
        self.started = time.monotonic()
        self.deadline = None if opts.max_seconds is None else self.started + opts.max_seconds
        self.requests = 0
        self.bytes = 0
        self.memory = 0
        self._lock = threading.Lock()

    def __reduce__(self) -> Any:  # a budget sent to another process (a Dask worker) starts afresh there
        return (_fresh, (self.max_requests, self.max_bytes, self.max_memory, self.max_seconds))

    def request(self, url: str) -> None:
        """Count one HTTP request (a retry or a redirect is one more), refused past ``max_requests`` or after the
        command's deadline."""
        self.check_time(url)
        with self._lock:
            if self.max_requests is not None and self.requests >= self.max_requests:
                raise rules.REMOTE_MAX_REQUESTS.error(f"the command has made its {self.max_requests} requests (--max-requests)", url=url)
            self.requests += 1

    def check_requests(self, more: int, url: str) -> None:
        """Refuse at once a plan that needs ``more`` requests than are left (a shard set of N shards needs N)."""
        with self._lock:
            if self.max_requests is not None and self.requests + more > self.max_requests:
                left = self.max_requests - self.requests
                raise rules.REMOTE_MAX_REQUESTS.error(
                    f"it needs {more} more requests, the command has {left} left of {self.max_requests} (--max-requests)", url=url
                )

    def take_bytes(self, n: int, url: str, offset: int | None = None) -> None:
        """Count ``n`` bytes about to be fetched; refused (before fetching) past ``max_bytes``."""
        with self._lock:
            if self.max_bytes is not None and self.bytes + n > self.max_bytes:
                raise rules.REMOTE_MAX_BYTES.error(
                    f"fetching {n} more bytes would pass the command's budget of {self.max_bytes} ({self.bytes} fetched; --max-bytes)",
                    url=url,
                    offset=offset,
                )
            self.bytes += n

    def reserve_memory(self, n: int) -> bool:
        """Reserve ``n`` bytes of memory for a sparse buffer: False when they do not fit (the caller buffers on
        disk instead)."""
        with self._lock:
            if self.memory + n > self.max_memory:
                return False
            self.memory += n
            return True

    def release_memory(self, n: int) -> None:
        with self._lock:
            self.memory -= n

    def left(self) -> float | None:
        """Seconds left before the command's deadline (None: no total time limit)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check_time(self, url: str) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise rules.REMOTE_DEADLINE.error(
                f"the command's remote reads took more than {self.max_seconds:g} s in all (--max-seconds)", url=url
            )

    def __repr__(self) -> str:
        return (
            f"Budget(requests={self.requests}/{self.max_requests}, bytes={self.bytes}/{self.max_bytes}, "
            f"memory={self.memory}/{self.max_memory})"
        )


def _fresh(max_requests: int | None, max_bytes: int | None, max_memory: int, max_seconds: float | None) -> Budget:
    return Budget(RemoteOptions(max_requests=max_requests, max_bytes=max_bytes, max_memory=max_memory, max_seconds=max_seconds))


def budgeted(opts: RemoteOptions, *, fresh: bool = False) -> RemoteOptions:
    """``opts`` with a running budget: its own when it has one (unless ``fresh``), else a new one from its limits."""
    if opts.budget is not None and not fresh:
        return opts
    return opts.replace(budget=Budget(opts))


def budget_of(opts: RemoteOptions) -> Budget:
    """The budget ``opts`` runs under; a file opened on its own (no top-level open started one) gets its own."""
    return opts.budget if opts.budget is not None else Budget(opts)
