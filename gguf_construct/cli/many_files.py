"""What the commands that take many files share: paths and directories expanded to model files, and a pool of
worker processes with a progress bar (``info``, ``validate``, ``scan``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from ..core.progress import progress
from .shared import usage


def expand(paths: Iterable[str], *, skip_later_shards: bool = False) -> list[str]:
    """Files as given; directories walked (sorted) for files ``detect()`` recognises. ``skip_later_shards``
    leaves out shards 2..N of a gguf-split set, whose first shard opens the whole set."""
    from ..api.registry import detect
    from ..core.naming import shard_of

    out: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            out.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                if name.startswith(".") or not os.path.isfile(full):
                    continue
                try:
                    detect(full)
                except (ValueError, OSError):
                    continue
                shard = shard_of(name)
                if skip_later_shards and shard and shard[1] > 1:
                    continue
                out.append(full)
    return out


def model_paths(command: str, paths: Iterable[str], *, skip_later_shards: bool = False) -> list[str]:
    """``expand(paths)``, or a usage error (exit 2, "no model files found") when nothing is left: every command
    that takes directories answers an empty one alike."""
    found = expand(paths, skip_later_shards=skip_later_shards)
    if not found:
        usage(f"gguf-construct {command}: no model files found")
    return found


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def run_pool(work: Callable[[str], Any], paths: list[str], jobs: int, desc: str) -> list[Any]:
    """``work(path)`` for every path, on ``jobs`` worker processes when there are several files, with a
    progress bar on a terminal. ``work`` must be a picklable top-level callable."""
    if jobs <= 1 or len(paths) <= 1:
        return list(progress((work(p) for p in paths), len(paths), desc, unit="file"))
    from concurrent.futures import ProcessPoolExecutor  # here: its import costs every command's start-up

    with ProcessPoolExecutor(max_workers=min(jobs, len(paths))) as pool:
        return list(progress(pool.map(work, paths, chunksize=1), len(paths), desc, unit="file"))
