"""Readers as processes: a long-lived one speaking the line protocol, or a command started once per file.

The line protocol (``docs/howto/fuzz.md``, "Your own reader: the line protocol")::

    request:  /absolute/path/of/the/file\\n            (or: "bytes N\\n" followed by exactly N bytes)
    ready:    optionally, once at start: {"ready": true} (the time limit then counts from it, not from the start)
    answer:   one line of JSON per request, in order:
              {"ok": true, "view": {...}}              the reader accepts the file (the view: see triage.VIEW_KEYS)
              {"ok": false, "error": "why"}            the reader rejects it (an orderly refusal)

A process that dies, prints a sanitizer report, stays silent past the time limit or grows past the memory cap is
killed, its stderr kept, and restarted for the next file: the :class:`Answer` then says ``crash``, ``hang`` or
``memory`` with the evidence, which :mod:`.triage` turns into a finding.

The memory guard: ``as`` caps the address space (``RLIMIT_AS``: a Python reader gets MemoryError), ``data`` caps
the data segment (``RLIMIT_DATA``), ``rss`` watches the resident size of the process tree from here and kills it
past the cap. Sanitizer builds reserve terabytes of address space for their shadow memory, which both rlimits count:
for them only ``rss`` works, so it is the default for commands.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

#: How much of a reader's stderr is kept per request (a sanitizer report fits; a chatty log is cut at the front).
STDERR_KEEP = 64 << 10
#: How often the RSS guard samples the process tree while waiting for an answer.
RSS_POLL = 0.02
GUARDS = ("rss", "data", "as", "none")


@dataclass
class Answer:
    """One reader's answer for one file.

    ``status``: ``accepted`` (``view`` holds what it read), ``rejected`` (``error``, and ``rule`` for ours),
    ``crash`` (died: ``returncode``, or a sanitizer report in ``stderr``), ``hang`` (no answer in time),
    ``memory`` (killed at the memory cap, or MemoryError), ``broken`` (an answer that is not the protocol's)."""

    status: str
    view: dict[str, Any] | None = None
    error: str = ""
    rule: str | None = None
    where: str = ""
    returncode: int | None = None
    stderr: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "accepted"


def parse_answer(line: bytes, stderr: str = "") -> Answer:
    """One JSON answer line as an :class:`Answer` (``broken`` when it is not the protocol's shape)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return Answer("broken", error=f"not JSON: {line[:120]!r}", stderr=stderr)
    if not isinstance(obj, dict) or not isinstance(obj.get("ok"), bool):
        return Answer("broken", error=f'no boolean "ok": {line[:120]!r}', stderr=stderr)
    if obj["ok"]:
        view = obj.get("view", {})
        return Answer("accepted", view=view if isinstance(view, dict) else {"unreadable": view}, stderr=stderr)
    status = "memory" if str(obj.get("error", "")).startswith("MemoryError") else "rejected"
    extra = {k: v for k, v in obj.items() if k not in ("ok", "error", "rule", "where")}
    return Answer(
        status, error=str(obj.get("error", "")), rule=obj.get("rule"), where=str(obj.get("where") or ""), stderr=stderr, extra=extra
    )


def _limit(guard: str, megabytes: int) -> Callable[[], None] | None:
    """A preexec function applying an rlimit guard in the child (None for ``rss`` and ``none``)."""
    which = {"as": resource.RLIMIT_AS, "data": resource.RLIMIT_DATA}.get(guard)
    if which is None:
        return None

    def apply() -> None:
        _soft, hard = resource.getrlimit(which)
        limit = megabytes << 20
        resource.setrlimit(which, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))

    return apply


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux /proc; 0.0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants (Linux /proc; 0 when it is gone)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm", "rb") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


class _StderrTail:
    """Drain a process's stderr in a thread, keeping the text written since the last :meth:`mark`."""

    def __init__(self, stream: Any):
        self.buf = bytearray()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: Any) -> None:
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            with self.lock:
                self.buf += chunk
                if len(self.buf) > 2 * STDERR_KEEP:
                    del self.buf[: len(self.buf) - STDERR_KEEP]

    def mark(self) -> None:
        with self.lock:
            self.buf.clear()

    def text(self, wait: float = 0.0) -> str:
        if wait:
            self.thread.join(wait)
        with self.lock:
            return bytes(self.buf[-STDERR_KEEP:]).decode("utf-8", "replace")


class LineTarget:
    """A long-lived reader speaking the line protocol; restarted after a crash, a hang or the memory cap."""

    def __init__(
        self,
        argv: list[str],
        *,
        timeout: float = 5.0,
        memory_mb: int = 2048,
        guard: str = "rss",
        send: str = "path",
        env: dict[str, str] | None = None,
        start_timeout: float | None = None,
        side_log: str | None = None,
    ):
        """``start_timeout``: how long a fresh process may take to say ``{"ready": true}`` (default: ``timeout``,
        added to the first request's limit when the target never says it). ``side_log``: a file the target writes
        some of its stderr to (the built-in workers' C logs), added to the evidence of a failed answer."""
        self.argv, self.timeout, self.memory_mb, self.guard, self.send_mode = argv, timeout, memory_mb, guard, send
        self.env, self.start_timeout = env, timeout if start_timeout is None else start_timeout
        self.side_log = side_log
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: _StderrTail | None = None
        self.pending = b""
        self.answered = 0  # lines from the current process: the first one may come after its start-up
        self.restarts = 0
        self.hang_cpu = 0.0  # CPU seconds the process spent on files it hung on (for throughput figures)
        self._cpu_at_send = 0.0

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                preexec_fn=_limit(self.guard, self.memory_mb),
                start_new_session=True,
            )
            self.stderr = _StderrTail(self.proc.stderr)
            self.pending, self.answered = b"", 0
        return self.proc

    def send(self, path: str, data: bytes | None = None) -> bool:
        """Write one request (the path, or the bytes when ``send='bytes'``); False when the pipe is closed."""
        proc = self._start()
        assert proc.stdin is not None and self.stderr is not None
        self.stderr.mark()
        self._cpu_at_send = cpu_seconds(proc.pid)
        if self.send_mode == "bytes":
            if data is None:
                with open(path, "rb") as f:
                    data = f.read()
            request = b"bytes %d\n" % len(data) + data
        else:
            request = os.fsencode(path) + b"\n"
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def receive(self) -> Answer:
        """The answer to the last request, or the way the process failed to give one."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        budget = self.timeout + (self.start_timeout if self.answered == 0 else 0.0)
        deadline = time.monotonic() + budget
        while True:
            if b"\n" in self.pending:
                line, _, self.pending = self.pending.partition(b"\n")
                self.answered += 1
                if self.answered == 1 and line.startswith(b'{"ready"'):
                    deadline = time.monotonic() + self.timeout  # started: the file's own time limit begins now
                    continue
                break
            now = time.monotonic()
            if now >= deadline:
                self.hang_cpu += max(0.0, cpu_seconds(proc.pid) - self._cpu_at_send)
                return self._fail("hang", f"Timeout: no answer within {self.timeout:g} s")
            wait = min(deadline - now, RSS_POLL) if self.guard == "rss" else deadline - now
            ready, _, _ = select.select([fd], [], [], wait)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return self.died()
                self.pending += chunk
            if self.guard == "rss" and tree_rss(proc.pid) > self.memory_mb << 20:
                return self._fail("memory", f"MemoryCap: resident size past {self.memory_mb} MB")
        assert self.stderr is not None
        answer = parse_answer(line, self.stderr.text())
        if answer.status == "broken":
            self.close()
        return answer

    def ask(self, path: str, data: bytes | None = None) -> Answer:
        if not self.send(path, data):
            return self.died()
        return self.receive()

    def died(self) -> Answer:
        """The answer of a process that closed its output: how it ended, and its stderr."""
        proc = self.proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:  # closed its output but lives on: end it
                self.close()
                code = proc.returncode
        text = self._side_text() + (self.stderr.text(wait=2.0) if self.stderr is not None else "")
        self._reset()
        return Answer("crash", error=f"Crash: the reader's process died (exit status {code})", returncode=code, stderr=text)

    def _fail(self, status: str, why: str) -> Answer:
        self.close()
        text = self._side_text() + (self.stderr.text(wait=1.0) if self.stderr is not None else "")
        self._reset()
        return Answer(status, error=why, stderr=text)

    def _side_text(self) -> str:
        if not self.side_log:
            return ""
        try:
            with open(self.side_log, "rb") as f:
                return f.read()[-STDERR_KEEP:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _reset(self) -> None:
        self.proc, self.pending = None, b""
        self.restarts += 1

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout) if self.proc is not None else ():
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.proc = None


class OneShotTarget:
    """A command started once per file (``'my-reader --json {}'``): exit status 0 and JSON on stdout (a view, or
    ``gguf-construct info --json``'s shape) is acceptance; another status with an orderly exit is a rejection; a
    signal, a sanitizer report, the time limit or the memory cap is a crash, hang or memory answer."""

    def __init__(
        self, template: str, *, timeout: float = 5.0, memory_mb: int = 2048, guard: str = "rss", env: dict[str, str] | None = None
    ):
        if "{}" not in template:
            raise ValueError("the command needs a {} where the file's path goes, e.g. 'my-reader --json {}'")
        self.template, self.timeout, self.memory_mb, self.guard, self.env = template, timeout, memory_mb, guard, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.out: IO[bytes] | None = None
        self.err: IO[bytes] | None = None
        self.restarts = 0

    def send(self, path: str, data: bytes | None = None) -> bool:
        args = shlex.split(self.template.replace("{}", shlex.quote(path)))
        # closed in receive(), once the process has ended
        self.out, self.err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self.out,
            stderr=self.err,
            env=self.env,
            preexec_fn=_limit(self.guard, self.memory_mb),
            start_new_session=True,
        )
        return True

    def receive(self) -> Answer:
        proc, out, err = self.proc, self.out, self.err
        assert proc is not None and out is not None and err is not None
        deadline = time.monotonic() + self.timeout
        status, why = "", ""
        while proc.poll() is None:
            if time.monotonic() >= deadline:
                status, why = "hang", f"Timeout: no answer within {self.timeout:g} s"
            elif self.guard == "rss" and tree_rss(proc.pid) > self.memory_mb << 20:
                status, why = "memory", f"MemoryCap: resident size past {self.memory_mb} MB"
            if status:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.002 if time.monotonic() + self.timeout - deadline < 0.05 else RSS_POLL)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()[-STDERR_KEEP:].decode("utf-8", "replace")
        out.close()
        err.close()
        self.proc = None
        if status:
            return Answer(status, error=why, stderr=stderr)
        code = proc.returncode
        if code < 0:
            return Answer("crash", error=f"Crash: killed by signal {code}", returncode=code, stderr=stderr)
        if code != 0:
            last = (stderr or stdout.decode("utf-8", "replace")).strip().splitlines()[-1:] or [f"exit status {code}"]
            return Answer("rejected", error=last[0][:300], returncode=code, stderr=stderr)
        try:
            obj = json.loads(stdout)
        except ValueError:
            return Answer("broken", error=f"exit status 0 without JSON on stdout: {stdout[:120]!r}", stderr=stderr)
        if isinstance(obj, dict) and isinstance(obj.get("ok"), bool):
            return parse_answer(stdout.strip().splitlines()[-1], stderr)
        if isinstance(obj, dict) and "metadata" in obj and "kv" not in obj:
            from .adapters import info_view

            obj = info_view(obj)
        return Answer("accepted", view=obj if isinstance(obj, dict) else {"unreadable": obj}, stderr=stderr)

    def ask(self, path: str, data: bytes | None = None) -> Answer:
        self.send(path, data)
        return self.receive()

    def died(self) -> Answer:
        return self.receive()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None
