"""gguf-split sets by URL: the first shard's URL names them all; the other shards' headers are read at once.

A set is a promise made by names and headers, and a server may break it: a name saying 99999 shards, shards
disagreeing on ``split.count``, a shard at the wrong position. Shard 1 is checked before any other shard is
asked for (its ``split.no`` and ``split.count`` against the name), the command's request budget must cover the
rest, and each later shard is checked as soon as its header is in, which stops the fan-out at the first lie.
"""

from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from itertools import islice
from typing import Any

from ...core import rules
from ...core.naming import shard_of, shard_suffix
from ...errors import RemoteError
from ...sources.budget import budgeted
from ...sources.byte_source import ByteSource
from ...sources.opening import open_source
from ...sources.options import RemoteOptions, options
from ..gguf_file import GGUFFile, gguf_from_source
from ..shard_set import ShardedGGUF, _name, _split_value, join_shards

#: gguf-split shards whose headers are read at once (@huggingface/gguf reads 20 at a time)
SHARD_CONCURRENCY = 16
#: the first read of shards 2..N: gguf-split writes the model's metadata into shard 1 only, so a later shard's
#: header is its split keys and tensor infos (it grows in chunks past this, as any header does)
LATER_SHARD_CHUNK = 64 * 1024


def first_shard_urls(url: str) -> list[str] | None:
    """Every shard's URL when ``url`` names the first shard of a set of several (``*-00001-of-0000N.gguf``)."""
    base, sep, query = url.partition("?")
    head, _, name = base.rpartition("/")
    found = shard_of(name)
    if found is None or found[1] != 1 or found[2] < 2:
        return None
    prefix, _, count = found
    return [f"{head}/{prefix}-{shard_suffix(i, count)}.gguf{sep}{query}" for i in range(1, count + 1)]


def check_shard(f: GGUFFile, index: int, urls: list[str]) -> None:
    """The checks of ``api.shard_set.join_shards`` that one shard can answer alone: ``split.no`` is its position and
    ``split.count`` the number of shards its name gives."""
    url = urls[index]
    if _split_value(f, "split.no", url) != index:
        raise rules.SPLIT_NO.error(f"{_name(url)} has split.no = {f.metadata['split.no']}, its name says {index}", path=os.fspath(url))
    if _split_value(f, "split.count", url) != len(urls):
        raise rules.SPLIT_COUNT.error(
            f"{_name(url)} has split.count = {f.metadata['split.count']}, the names say {len(urls)} shards", path=os.fspath(url)
        )


def load_remote_shards(
    urls: list[str], first: ByteSource, *, strict: bool = True, profile: str = "spec", opts: RemoteOptions | None = None
) -> ShardedGGUF:
    """Open shard 1 (already open as ``first``) and check it, then the others concurrently, each checked as it
    comes in; then join them as ``load_shards`` does."""
    opts = budgeted(opts or options())
    head = gguf_from_source(first, strict=strict, profile=profile)
    check_shard(head, 0, urls)  # before any other shard is asked for
    opts.budget.check_requests(len(urls) - 1, urls[0])
    first_read = min(opts.first_chunk, LATER_SHARD_CHUNK)

    def one(i: int) -> Any:
        try:
            src = open_source(urls[i], opts, first_read=first_read)
        except RemoteError as e:
            if e.status != 404:
                raise
            raise rules.REMOTE_STATUS.error(f"shard {i + 1} of {len(urls)} is missing (not found)", url=urls[i], status=404) from None
        f = gguf_from_source(src, strict=strict, profile=profile)
        check_shard(f, i, urls)
        return f

    return join_shards([head, *_in_flight(one, range(1, len(urls)), SHARD_CONCURRENCY)], urls)


def _in_flight(work: Any, items: range, most: int) -> list[Any]:
    """``[work(i) for i in items]`` on threads, at most ``most`` in flight; the first failure stops it: nothing
    more is started, and it is raised once the running ones end (each bounded by its deadline)."""
    results: dict[int, Any] = {}
    todo = iter(items)
    with ThreadPoolExecutor(max_workers=max(1, min(most, len(items)))) as pool:
        running = {pool.submit(work, i): i for i in islice(todo, most)}
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                error = fut.exception()
                if error is not None:
                    for other in running:
                        other.cancel()
                    raise error
                results[i] = fut.result()
                nxt = next(todo, None)
                if nxt is not None:
                    running[pool.submit(work, nxt)] = nxt
    return [results[i] for i in items]
