"""Options for remote sources, accepted anywhere on the command line (before or after the command):
``--header 'NAME: VALUE'`` (repeatable), ``--download``, the command's budget (``--max-bytes``,
``--max-requests``, ``--max-seconds``, ``--max-memory``), per-file and per-request limits (``--max-file-bytes``,
``--request-deadline``) and ``--http-timeout SECONDS``. A command with a URL among its arguments runs under one
budget (``sources.budget``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from .shared import finite, usage, whole

HELP = """remote sources (http(s)://, hf://OWNER/REPO[@REV]/PATH, ollama://[REGISTRY/][NS/]MODEL[:TAG], fsspec URLs):
  --header 'NAME: VALUE'   an extra request header, e.g. 'Authorization: Bearer TOKEN' (repeatable; HF_TOKEN is used for hf://);
                           every one is dropped on a redirect to another origin (scheme, host or port)
  --download               fetch the whole file when a server does not support range requests
  --max-bytes N            fetch at most N bytes in all, over every file of the command (default: no limit)
  --max-file-bytes N       fetch at most N bytes of any one file (default: no limit)
  --max-requests N         make at most N HTTP requests in all, retries and redirects included (default 4096)
  --max-seconds S          spend at most S seconds on remote reads in all (default: no limit)
  --max-memory N           hold at most N bytes of fetched data in memory; beyond, a temporary file (default 1 GiB)
  --request-deadline S     one request, connect to last byte, takes at most S seconds (default 600)
  --http-timeout SECONDS   connect and read timeout (each socket wait; an attempt's status line and headers in all)
  (environment: GGUF_CONSTRUCT_MAX_BYTES, _MAX_FILE_BYTES, _MAX_REQUESTS, _MAX_SECONDS, _MAX_MEMORY, _REQUEST_DEADLINE)"""

_FLAGS = (
    "--header",
    "--download",
    "--max-bytes",
    "--max-file-bytes",
    "--max-requests",
    "--max-seconds",
    "--max-memory",
    "--request-deadline",
    "--http-timeout",
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--header", action="append", default=[])
    p.add_argument("--download", action="store_true")
    p.add_argument("--max-bytes", type=whole(0))
    p.add_argument("--max-file-bytes", type=whole(0))
    p.add_argument("--max-requests", type=whole(1))
    p.add_argument("--max-seconds", type=finite(0, most=10**7))
    p.add_argument("--max-memory", type=whole(0))
    p.add_argument("--request-deadline", type=finite(0, most=10**7))
    p.add_argument("--http-timeout", type=finite(0, most=10**6))
    return p


def apply_remote_args(argv: Sequence[str]) -> list[str]:
    """Take the remote options out of ``argv``, set them as the process-wide defaults, and start the command's
    budget when an argument is a URL; return the rest."""
    if any(a.startswith(_FLAGS) for a in argv):
        argv = _apply(argv)
    if any("://" in a for a in argv):
        from ..sources.budget import Budget
        from ..sources.options import configure, options

        configure(budget=Budget(options()))
    return list(argv)


def _apply(argv: Sequence[str]) -> list[str]:
    known, rest = _parser().parse_known_args(list(argv))
    from ..sources.options import configure

    headers = {}
    for h in known.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            usage(f"gguf-construct: --header {h!r}: expected 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    changes: dict[str, Any] = {"headers": headers, "download": known.download}
    for name in ("max_bytes", "max_file_bytes", "max_requests", "max_seconds", "max_memory", "request_deadline"):
        if getattr(known, name) is not None:
            changes[name] = getattr(known, name)
    if known.http_timeout is not None:
        changes.update(connect_timeout=known.http_timeout, read_timeout=known.http_timeout)
    configure(**changes)
    return rest
