"""gguf-split sets by URL: the first shard's URL names them all; the other shards' headers are read at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..api.file import gguf_from_source
from ..naming import shard_of, shard_suffix
from .load import SHARD_CONCURRENCY, open_source
from .options import RemoteOptions
from .source import ByteSource

if TYPE_CHECKING:
    from ..api.shards import ShardedGGUF


def first_shard_urls(url: str) -> list[str] | None:
    """Every shard's URL when ``url`` names the first shard of a set of several (``*-00001-of-0000N.gguf``)."""
    base, sep, query = url.partition("?")
    head, _, name = base.rpartition("/")
    found = shard_of(name)
    if found is None or found[1] != 1 or found[2] < 2:
        return None
    prefix, _, count = found
    return [f"{head}/{prefix}-{shard_suffix(i, count)}.gguf{sep}{query}" for i in range(1, count + 1)]


def load_remote_shards(urls: list[str], first: ByteSource, *, strict: bool = True, profile: str = "spec", opts: RemoteOptions | None = None) -> ShardedGGUF:
    """Open shard 1 (already open as ``first``) and the others concurrently, then join them as ``load_shards`` does."""
    from ..api.shards import join_shards

    def one(i: int) -> Any:
        src = first if i == 0 else open_source(urls[i], opts)
        return gguf_from_source(src, strict=strict, profile=profile)

    with ThreadPoolExecutor(max_workers=max(1, min(SHARD_CONCURRENCY, len(urls)))) as pool:
        shards = list(pool.map(one, range(len(urls))))
    return join_shards(shards, urls)
