"""``gguf-construct scan LIST|URL|PATH... [--concurrency N] [--dask SCHEDULER] [-o RESULTS.jsonl]``."""

from __future__ import annotations

import argparse
import sys

from ..sources.options import options
from ..sources.urls import is_remote
from ..validation.profiles import PROFILES
from .scan_runner import DASK_TIMEOUT, scan
from .shared import EXIT_BAD, EXIT_OK, EXIT_TROUBLE, command, finite, usage, whole

#: files with these endings list sources, one a line
LIST_SUFFIXES = (".txt", ".list", ".lst", ".urls")


def _list_lines(path: str) -> list[str]:
    """A list file's lines, read as untrusted input: a regular file within the ``header_bytes`` limit (a FIFO or
    ``/dev/zero`` is refused, not read), UTF-8 (else a usage error naming the byte)."""
    from ..formats.base import read_regular

    data = read_regular(path, what="the list")
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        usage(f"gguf-construct scan: the list {path} is not UTF-8 text (byte {e.start}: {e.reason})")


def sources_of(args: list[str]) -> list[str]:
    """URLs and model files as given; directories walked; ``-`` and files ending in .txt, .list, .lst or .urls
    are lists, one source a line (blank lines and ``#`` comments skipped)."""
    from .many_files import expand

    out: list[str] = []
    for a in args:
        if is_remote(a):
            out.append(a)
        elif a == "-" or a.lower().endswith(LIST_SUFFIXES):
            lines = sys.stdin.read().splitlines() if a == "-" else _list_lines(a)
            out += [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]
        else:
            out += expand([a], skip_later_shards=False)
    return out


def _run(args: argparse.Namespace) -> int:
    sources = sources_of(args.sources)
    if not sources:
        usage("gguf-construct scan: no model files found")
    out = args.output or sys.stdout
    counts = scan(
        sources,
        out,
        inputs=args.sources,
        concurrency=args.concurrency,
        dask=args.dask,
        batch=args.batch,
        profile=args.profile,
        opts=options(),
        dask_timeout=args.dask_timeout,
    )
    print(
        f"scan: {counts['scanned']} scanned ({counts['ok']} ok, {counts['invalid']} invalid, {counts['unreadable']} "
        f"unreadable), {counts['skipped']} already in {args.output or 'the output'}",
        file=sys.stderr,
    )
    return EXIT_TROUBLE if counts["unreadable"] else EXIT_BAD if counts["invalid"] else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "scan",
        _run,
        description=(
            "For each source (a path, a directory, a URL, or a file listing one source a line): open it once, "
            "write one JSON line with its info (as info --json) and its validation issues. Sources already in "
            "--output are skipped, so a killed scan resumes where it stopped. Exit 1 if any source is invalid, 2 if any could not be read."
        ),
    )
    p.add_argument(
        "sources",
        nargs="+",
        metavar="LIST|URL|PATH",
        help="URLs, paths, directories, or lists of them (- or *.txt, *.list, *.lst, *.urls: one a line)",
    )
    p.add_argument(
        "-o", "--output", metavar="RESULTS.jsonl", help="append the lines here, skipping sources already in it (default: stdout)"
    )
    p.add_argument("--concurrency", type=whole(1, 4096), default=16, metavar="N", help="sources in flight at once (default: %(default)s)")
    p.add_argument(
        "--dask", metavar="SCHEDULER", help="run on a Dask cluster: its scheduler address (tcp://HOST:8786), or 'local' for a LocalCluster"
    )
    p.add_argument("--batch", type=whole(1, 2**31), default=32, metavar="N", help="sources per Dask task (default: %(default)s)")
    p.add_argument(
        "--dask-timeout",
        type=finite(0, most=10**7),
        default=DASK_TIMEOUT,
        metavar="SECONDS",
        help="stop with an error when no batch has finished on the cluster for this long (default: %(default)g)",
    )
    p.add_argument("--profile", choices=PROFILES, default="spec", help="validation profile (as for validate)")
