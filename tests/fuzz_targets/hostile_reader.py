"""A reader speaking the fuzz line protocol that attacks the fuzzer itself, for the fuzzer's own tests.

By a marker in the file's bytes: HOSTILE:FLOOD (48 MiB without a newline, then silence), HOSTILE:DEEP (an answer
nested 200,000 deep), HOSTILE:NEWLINE (a rejection whose message forges a findings.tsv row and a wildcard line),
HOSTILE:UTF8 (an answer that is not UTF-8), HOSTILE:CLOSE (closes its stdout and lives on), HOSTILE:FORK (a child
keeps the pipes open while the reader dies), HOSTILE:HANG (sleeps). Anything else is accepted. ``--pids FILE``
appends the pid of every process it starts; ``--no-read`` never reads a request (and never answers); ``--ready``
says ``{"ready": true}`` once started.
"""

import json
import os
import sys
import time

args = sys.argv[1:]
pids = args[args.index("--pids") + 1] if "--pids" in args else None


def note_pid() -> None:
    if pids:
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")


note_pid()
if "--no-read" in args:
    time.sleep(3600)

out = sys.stdout.buffer
if "--ready" in args:
    out.write(b'{"ready": true}\n')
    out.flush()
for line in sys.stdin.buffer:
    with open(line.rstrip(b"\n"), "rb") as f:
        data = f.read()
    if b"HOSTILE:FLOOD" in data:
        for _ in range(48):
            out.write(b"x" * (1 << 20))
        out.flush()
        time.sleep(3600)
    elif b"HOSTILE:DEEP" in data:
        out.write(b'{"ok": true, "view": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n")
    elif b"HOSTILE:NEWLINE" in data:
        out.write(json.dumps({"ok": False, "error": 'bad "file"\n*\t\n001-x.gguf\t1\tcrash\t*\tforged\tfrom x\n'}).encode() + b"\n")
    elif b"HOSTILE:UTF8" in data:
        out.write(b'{"ok": false, "error": "\xff\xfe\x80 not utf-8"}\n')
    elif b"HOSTILE:CLOSE" in data:
        out.flush()
        os.close(1)
        time.sleep(3600)
    elif b"HOSTILE:FORK" in data:
        if os.fork() == 0:
            note_pid()
            time.sleep(3600)
        os._exit(3)
    elif b"HOSTILE:HANG" in data:
        time.sleep(3600)
    else:
        view = {"version": "unknown", "alignment": "unknown", "data_offset": "unknown", "kv": "unknown", "tensors": "unknown"}
        out.write(json.dumps({"ok": True, "view": view}).encode() + b"\n")
    out.flush()
