"""A reader in its own process, under a memory cap, answering one path per line.

``python -m gguf_construct.fuzzing.worker READER PROFILE MEMORY_MB [COMMAND]`` reads file paths from stdin and
writes one JSON line per path: ``{"ok": true, "view": ...}`` or ``{"ok": false, "error": "Type: message"}``.
The address space is capped with ``resource.setrlimit(RLIMIT_AS)`` before the reader is imported, so a reader
asked to allocate terabytes fails with a MemoryError (reported as a rejection of kind ``MemoryError``) or dies;
the parent (:class:`.runner.Worker`) enforces the time limit and restarts a worker that hangs or dies.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback


def cap_memory(megabytes: int) -> None:
    limit = megabytes << 20
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def main(argv: list[str]) -> None:
    reader_name, profile, megabytes = argv[0], argv[1], int(argv[2])
    # Import what the readers need before the cap: the interpreter and numpy map more than they use.
    import numpy  # noqa: F401

    from .adapters import READERS, command_reader

    if reader_name == "command":
        reader = command_reader(argv[3], float(argv[4]) if len(argv) > 4 else 10.0)
    else:
        reader = READERS[reader_name]
        if reader_name == "gguf-py":
            import gguf  # noqa: F401
        elif reader_name == "ggml":
            import ggml  # noqa: F401
    sys.setrecursionlimit(10_000)
    cap_memory(megabytes)
    # Answers go to a private copy of stdout; whatever the reader prints (ggml logs from C) goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        path = line.rstrip("\n")
        try:
            answer = {"ok": True, "view": reader(path, profile)}
        except BaseException as e:  # every way of refusing the file is an answer
            if isinstance(e, KeyboardInterrupt):
                raise
            rule = getattr(e, "rule", None)
            where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
            answer = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400], "rule": rule,
                      "where": f"{where.filename.rsplit('/', 2)[-1]}:{where.lineno}" if where else ""}  # fmt: skip
        try:
            text = json.dumps(answer, default=str)
        except (TypeError, ValueError) as e:
            text = json.dumps({"ok": False, "error": f"unserialisable view: {e}"})
        out.write(text + "\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
