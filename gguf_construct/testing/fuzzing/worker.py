"""A built-in reader as a line-protocol target: ``python -m gguf_construct.testing.fuzzing.worker READER PROFILE MEMORY_MB``
(or ``--once READER PATH``: one file, one answer, as a one-shot command).

Reads requests from stdin (a path per line, or ``bytes N`` and N bytes) and writes one JSON line per request:
``{"ok": true, "view": ...}`` or ``{"ok": false, "error": "Type: message", "rule": ..., "where": "file:line"}``.
The address space is capped (``RLIMIT_AS``) after the reader's modules are imported (the interpreter and numpy map
more than they use), so a reader asked to allocate terabytes gets a MemoryError, answered as such. faulthandler
is on: a reader that dies of a signal leaves its Python stack on stderr for the fuzzer's report.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import resource
import sys
import tempfile
import traceback
from typing import Any

from .adapters import ADAPTERS, ReaderRefused

#: The file a ``bytes N`` request is written to, named by the fuzzer inside its own scratch folder (which it
#: removes however the run ends, this process killed or not); without it, a temporary folder of this process.
SCRATCH_ENV = "GGUF_CONSTRUCT_FUZZ_SCRATCH"


def cap_memory(megabytes: int) -> None:
    limit = megabytes << 20
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def answer(reader: Any, path: str, profile: str) -> dict[str, Any]:
    try:
        return {"ok": True, "view": reader(path, profile)}
    except ReaderRefused as e:  # the reader's own reason: no line of ours to point at
        return {"ok": False, "error": str(e)[:400], "rule": None, "where": ""}
    except BaseException as e:  # every way of refusing the file is an answer
        if isinstance(e, KeyboardInterrupt):
            raise
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        if where is not None and where.filename.endswith("adapters.py"):
            where = None  # raised by compiled code the adapter called: no line of the reader's to name
        return {
            "ok": False,
            "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400],
            "rule": getattr(e, "rule", None),
            "where": f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else "",
        }


def requests(stream: Any, scratch: str) -> Any:
    """Paths from the line protocol's requests (``bytes N`` requests written to the file ``scratch`` first)."""
    while True:
        line = stream.readline()
        if not line:
            return
        text = line.rstrip(b"\n").decode("utf-8", "surrogateescape")
        if text.startswith("bytes "):
            data = stream.read(int(text[6:]))
            with open(scratch, "wb") as f:
                f.write(data)
            yield scratch
        else:
            yield text


def once(reader_name: str, path: str, profile: str = "spec") -> None:
    """``--once READER PATH``: one answer for one file, as a one-shot command (to compare one-shot with persistent)."""
    print(json.dumps(answer(ADAPTERS[reader_name].read, path, profile), default=str))


def main(argv: list[str]) -> None:
    if argv[0] == "--once":
        once(*argv[1:])
        return
    reader_name, profile, megabytes = argv[0], argv[1], int(argv[2])
    import numpy  # noqa: F401  (before the cap)

    adapter = ADAPTERS[reader_name]
    if adapter.module:
        __import__(adapter.module)
    sys.setrecursionlimit(10_000)
    faulthandler.enable()
    cap_memory(megabytes)
    # Answers go to a private copy of stdout; whatever the reader prints (C logs) goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out.write('{"ready": true}\n')
    out.flush()
    scratch = os.environ.get(SCRATCH_ENV, "")
    with contextlib.ExitStack() as cleanup:
        if not scratch:
            scratch = os.path.join(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="gguf-construct-worker-")), "input")
        for path in requests(sys.stdin.buffer, scratch):
            reply = answer(adapter.read, path, profile)
            try:
                text = json.dumps(reply, default=str)
            except (TypeError, ValueError, RecursionError) as e:
                text = json.dumps({"ok": False, "error": f"unserialisable view: {e}"})
            out.write(text + "\n")
            out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
