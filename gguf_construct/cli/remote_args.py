"""Options for remote sources, accepted anywhere on the command line (before or after the command):
``--header 'NAME: VALUE'`` (repeatable), ``--download``, ``--max-bytes N``, ``--http-timeout SECONDS``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from .common import finite, usage, whole

HELP = """remote sources (http(s)://, hf://OWNER/REPO[@REV]/PATH, ollama://[REGISTRY/][NS/]MODEL[:TAG], fsspec URLs):
  --header 'NAME: VALUE'   an extra request header, e.g. 'Authorization: Bearer TOKEN' (repeatable; HF_TOKEN is used for hf://)
  --download               fetch the whole file when a server does not support range requests
  --max-bytes N            fetch at most N bytes per file
  --http-timeout SECONDS   connect and read timeout"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--header", action="append", default=[])
    p.add_argument("--download", action="store_true")
    p.add_argument("--max-bytes", type=whole(0))
    p.add_argument("--http-timeout", type=finite(0, most=10**6))
    return p


def apply_remote_args(argv: Sequence[str]) -> list[str]:
    """Take the remote options out of ``argv``, set them as the process-wide defaults, return the rest."""
    if not any(a.startswith(("--header", "--download", "--max-bytes", "--http-timeout")) for a in argv):
        return list(argv)
    known, rest = _parser().parse_known_args(list(argv))
    from ..remote.options import configure

    headers = {}
    for h in known.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            usage(f"gguf-construct: --header {h!r}: expected 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    changes: dict[str, Any] = {"headers": headers, "download": known.download}
    if known.max_bytes is not None:
        changes["max_bytes"] = known.max_bytes
    if known.http_timeout is not None:
        changes.update(connect_timeout=known.http_timeout, read_timeout=known.http_timeout)
    configure(**changes)
    return rest
