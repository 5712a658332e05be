"""``split`` and ``merge``: gguf-split's shard sets (``-00001-of-00003.gguf``; ``split.no``, ``split.count``,
``split.tensors.count``; metadata in the first shard). See :mod:`gguf_construct.api.shard_set`."""

from __future__ import annotations

import argparse
import re

from .shared import EXIT_OK, add_sync, command, usage, whole

_SIZE = re.compile(r"([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*([KMGT]?)(i?B?)?\Z", re.IGNORECASE)  # ASCII, bounded: never inf


def parse_size(text: str) -> int:
    """``500M``, ``2G``, ``1.5G``, ``4096`` → bytes (K/M/G/T are powers of 1000 as gguf-split reads them;
    ``KiB``/``MiB``/``GiB`` powers of 1024)."""
    m = _SIZE.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a size such as 500M or 2G")
    number, scale, binary = float(m.group(1)), m.group(2).upper(), m.group(3) or ""
    base = 1024 if binary.lower().startswith("i") else 1000
    size = int(number * base ** ("KMGT".index(scale) + 1 if scale else 0))
    if size < 1:
        raise ValueError(f"{text!r}: the size must be at least one byte")
    return size


def _cmd_split(args: argparse.Namespace) -> int:
    from ..api.gguf_file import load_gguf
    from ..api.shard_set import plan, split

    if (args.max_size is None) == (args.max_tensors is None):
        usage("gguf-construct split: give --max-size or --max-tensors")
    try:
        max_size = parse_size(args.max_size) if args.max_size else None
    except ValueError as e:
        usage(f"gguf-construct split: {e}")
    if args.max_tensors is not None and args.max_tensors < 1:
        usage("gguf-construct split: --max-tensors must be at least 1")
    f = load_gguf(args.file, unknown_types="warning")  # a tensor type newer than our tables is copied as bytes
    prefix = args.prefix or (args.file[:-5] if args.file.endswith(".gguf") else args.file)
    if args.dry_run:
        groups = plan(f, max_size=max_size, max_tensors=args.max_tensors, no_tensor_first_split=args.no_tensor_first_split)
        for i, names in enumerate(groups):
            size = sum(f.tensors[n].nbytes for n in names)
            print(f"shard {i + 1}/{len(groups)}: {len(names)} tensors, {size} bytes")
        return EXIT_OK
    try:
        paths = split(f, prefix, max_size=max_size, max_tensors=args.max_tensors, no_tensor_first_split=args.no_tensor_first_split)
    except ValueError as e:
        usage(f"gguf-construct split: {e}")
    for p in paths:
        print(p)
    return EXIT_OK


def _cmd_merge(args: argparse.Namespace) -> int:
    from ..api.shard_set import merge, shard_paths

    if shard_paths(args.file) is None:
        usage(f"gguf-construct merge: {args.file} is not a shard name (<prefix>-00001-of-00003.gguf)")
    merged = merge(args.file, args.output)
    print(f"{args.output}: {len(merged.shards)} shards, {len(merged.tensors)} tensors")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "split",
        _cmd_split,
        description=(
            "Write FILE as PREFIX-00001-of-0000N.gguf ... with llama.cpp's gguf-split conventions: the first shard holds "
            "all metadata; every shard holds split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32)."
        ),
    )
    p.add_argument("file", metavar="FILE", help="the GGUF file to split")
    p.add_argument("prefix", metavar="PREFIX", nargs="?", help="output name before -0000N-of-0000M.gguf (default: FILE less .gguf)")
    p.add_argument("--max-size", metavar="S", help="at most S of tensor data per shard: 500M, 2G, 1.5GiB, bytes")
    p.add_argument("--max-tensors", type=whole(1, 2**31), metavar="N", help="at most N tensors per shard")
    p.add_argument("--no-tensor-first-split", action="store_true", help="the first shard holds metadata only")
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    add_sync(p)

    m = command(
        sub,
        "merge",
        _cmd_merge,
        description="Merge the set FIRST_SHARD belongs to (every shard in the same folder) into OUT, dropping the split.* keys.",
    )
    m.add_argument(
        "file", metavar="FIRST_SHARD", help="a shard of the set, e.g. m-00001-of-00003.gguf (the others are found beside it by name)"
    )
    m.add_argument("output", metavar="OUT", help="the merged GGUF file to write")
    add_sync(m)
