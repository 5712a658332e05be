"""A command's own peak resident set, measured by the kernel.

``ru_maxrss`` of a child counts what the child inherited at ``fork`` (Linux keeps the high-water mark across
``execve``), so a child of a large process (pytest, a benchmark holding a model) reports the parent's size. The
command is therefore started by a small launcher process (a bare ``python -S``, about 10 MB) that forks it, applies
the limits, and reports ``wait4``'s accounting of that child alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

LAUNCHER = """
import json, os, resource, sys
report, data_limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    if data_limit:
        resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    json.dump({"status": status, "maxrss": usage.ru_maxrss * 1024}, f)
"""


@dataclass
class Measured:
    returncode: int  #: the command's exit code (negative: killed by that signal; -9 also when past the timeout)
    seconds: float  #: wall time, start to exit
    peak_rss: int  #: the command's own peak resident set, bytes
    stdout: str
    stderr: str


def run_measured(argv: list[str], *, timeout: float, data_limit: int = 0, env: dict[str, str] | None = None, **popen: Any) -> Measured:
    """Run ``argv`` (its outputs captured) under ``RLIMIT_DATA = data_limit`` (0: none); killed, with its launcher,
    after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="peak-rss-") as tmp:
        report = os.path.join(tmp, "report.json")
        start = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-S", "-c", LAUNCHER, report, str(data_limit), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            **popen,
        )
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            return Measured(-9, time.monotonic() - start, 0, out.decode(errors="replace"), err.decode(errors="replace"))
        seconds = time.monotonic() - start
        with open(report) as f:
            done = json.load(f)
    code = os.waitstatus_to_exitcode(done["status"])
    return Measured(code, seconds, done["maxrss"], out.decode(errors="replace"), err.decode(errors="replace"))
