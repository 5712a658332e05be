"""Readers as processes: a long-lived one speaking the line protocol, or a command started once per file.

The line protocol (``docs/howto/fuzz.md``, "Your own reader: the line protocol")::

    request:  /absolute/path/of/the/file\\n            (or: "bytes N\\n" followed by exactly N bytes)
    ready:    optionally, once at start: {"ready": true} (the time limit then counts from it, not from the start)
    answer:   one line of JSON per request, in order:
              {"ok": true, "view": {...}}              the reader accepts the file (the view: see triage.VIEW_KEYS)
              {"ok": false, "error": "why"}            the reader rejects it (an orderly refusal)

A process that dies, prints a sanitizer report, stays silent past the time limit or grows past the memory cap is
killed, its stderr kept, and restarted for the next file: the :class:`Answer` then says ``crash``, ``hang`` or
``memory`` with the evidence, which :mod:`.triage` turns into a finding. An answer longer than
:data:`MAX_ANSWER` bytes or nested deeper than :data:`MAX_DEPTH` is ``broken`` (a finding), never held or parsed
whole. A request is written without blocking, under the same time limit as the answer: a reader that does not
read its input is a hang, not a stuck campaign.

The time limit adapts once the campaign has seen a reader hang (:attr:`LineTarget.adaptive`): a repeat of a known
hang then costs :data:`ADAPTIVE_MULTIPLE` times the reader's usual answer time (at least :data:`ADAPTIVE_FLOOR`
seconds), not the whole limit.

The memory guard: ``as`` caps the address space (``RLIMIT_AS``: a Python reader gets MemoryError), ``data`` caps
the data segment (``RLIMIT_DATA``), ``rss`` watches the resident size of the process tree from here and kills it
past the cap. Sanitizer builds reserve terabytes of address space for their shadow memory, which both rlimits count:
for them only ``rss`` works, so it is the default for commands.
"""

from __future__ import annotations

import collections
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
from typing import IO, Any, Protocol

#: How much of a reader's stderr is kept per request (a sanitizer report fits; a chatty log is cut at the front).
STDERR_KEEP = 64 << 10
#: How often the RSS guard samples the process tree while waiting for an answer.
RSS_POLL = 0.02
GUARDS = ("rss", "data", "as", "none")
#: How often a wait for an answer looks whether the run has been stopped (:meth:`LineTarget.stop`).
HALT_POLL = 0.1
#: The longest answer a reader may give (a view of a large vocabulary fits with room to spare).
MAX_ANSWER = 32 << 20
#: How deeply an answer may nest (a view nests four deep).
MAX_DEPTH = 64
#: The adaptive time limit: this many times the slowest of the reader's usual answers (its 90th percentile)...
ADAPTIVE_MULTIPLE = 10.0
#: ... and never less than this many seconds (a loaded machine slows a reader down for a while).
ADAPTIVE_FLOOR = 0.5
#: Answer times the adaptive limit is computed from (the most recent ones), and how many it needs first.
PACE_WINDOW, PACE_MIN = 256, 16


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


def too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed JSON value nests more than ``limit`` lists and objects deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, dict | list))
    return False


def load_json(text: bytes) -> tuple[Any, str]:
    """``(value, "")`` for a JSON text, or ``(None, why)`` when it is not JSON or nests past :data:`MAX_DEPTH`."""
    try:
        obj = json.loads(text)
    except RecursionError:
        return None, f"JSON nested too deep to read (more than {MAX_DEPTH} levels)"
    except ValueError:  # UnicodeDecodeError included
        return None, f"not JSON: {text[:120]!r}"
    if too_deep(obj):
        return None, f"JSON nested more than {MAX_DEPTH} levels deep"
    return obj, ""


def parse_answer(line: bytes, stderr: str = "") -> Answer:
    """One JSON answer line as an :class:`Answer` (``broken`` when it is not the protocol's shape)."""
    obj, why = load_json(line)
    if why:
        return Answer("broken", error=why, stderr=stderr)
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


class Target(Protocol):
    """A reader the campaign sends files to: :class:`LineTarget` or :class:`OneShotTarget`."""

    restarts: int
    pace: Pace

    def send(self, path: str, data: bytes | None = None) -> bool:
        """Start reading the file at ``path`` (its bytes are ``data``); False when the reader cannot take it."""
        ...

    def receive(self) -> Answer:
        """The answer to the file sent, or how the reader failed to give one."""
        ...

    def died(self) -> Answer:
        """The answer of a reader that could not take the file."""
        ...

    def stop(self) -> None:
        """Kill the reader's processes from another thread: a :meth:`receive` in progress returns at once."""
        ...

    def close(self) -> None:
        """End the reader's processes and release what they held."""
        ...


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


class Pace:
    """How long a reader usually takes to answer, and the time limit that follows from it once it has hung: see
    :data:`ADAPTIVE_MULTIPLE` and :data:`ADAPTIVE_FLOOR`. The full ``timeout`` until then, and as the ceiling."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.adaptive = False  # set by the campaign when this reader's hang kind is known
        self.times: collections.deque[float] = collections.deque(maxlen=PACE_WINDOW)
        self.slowest_start = 0.0  # the longest a fresh process took to be ready (or to give its first answer)

    def record(self, seconds: float) -> None:
        self.times.append(seconds)

    def started(self, seconds: float) -> None:
        self.slowest_start = max(self.slowest_start, seconds)

    def start_allowance(self, full: float) -> float:
        """How long a fresh process may take to start: ``full`` until the reader has hung and started once."""
        if not self.adaptive or not self.slowest_start:
            return full
        return min(full, max(ADAPTIVE_FLOOR, ADAPTIVE_MULTIPLE * self.slowest_start))

    def limit(self) -> float:
        if not self.adaptive or len(self.times) < PACE_MIN:
            return self.timeout
        usual = sorted(self.times)[int(0.9 * (len(self.times) - 1))]
        return min(self.timeout, max(ADAPTIVE_FLOOR, ADAPTIVE_MULTIPLE * usual))

    def hang(self, limit: float) -> str:
        """The error of an answer that did not come within ``limit``."""
        if limit < self.timeout:
            return f"Timeout: no answer within {limit:.2g} s (adaptive: {ADAPTIVE_MULTIPLE:g}x its usual time, after an earlier hang)"
        return f"Timeout: no answer within {self.timeout:g} s"


class _StderrTail:
    """Drain a process's stderr in a thread, keeping the text written since the last :meth:`mark`."""

    def __init__(self, stream: Any):
        self.buf = bytearray()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: Any) -> None:
        while True:
            try:
                chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                with contextlib.suppress(OSError):
                    stream.close()
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
        self.pending = bytearray()
        self.answered = 0  # lines from the current process: the first one may come after its start-up
        self.restarts = 0
        self.hang_cpu = 0.0  # CPU seconds the process spent on files it hung on (for throughput figures)
        self._cpu_at_send = 0.0
        self.outgoing = b""  # the part of the request not yet written
        self.sent_at = 0.0
        self.pace = Pace(timeout)
        self.halted = False  # stopped for good (stop()): no process is started again
        self.spawned_at = 0.0

    def _start(self) -> subprocess.Popen[bytes] | None:
        if self.halted:
            return None
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
            assert self.proc.stdin is not None
            os.set_blocking(self.proc.stdin.fileno(), False)  # requests are written under the time limit
            self.stderr = _StderrTail(self.proc.stderr)
            self.pending, self.answered, self.outgoing = bytearray(), 0, b""
            self.spawned_at = time.monotonic()
        return self.proc

    def send(self, path: str, data: bytes | None = None) -> bool:
        """Start one request (the path, or the bytes when ``send='bytes'``) without blocking: what the pipe does
        not take now is written by :meth:`receive`, under the time limit. False when the pipe is closed."""
        proc = self._start()
        if proc is None:
            return False
        assert proc.stdin is not None and self.stderr is not None
        self.stderr.mark()
        self._cpu_at_send = cpu_seconds(proc.pid)
        self.sent_at = time.monotonic()
        if self.send_mode == "bytes":
            if data is None:
                with open(path, "rb") as f:
                    data = f.read()
            self.outgoing = b"bytes %d\n" % len(data) + data
        else:
            self.outgoing = os.fsencode(path) + b"\n"
        return self._write()

    def _write(self) -> bool:
        """Write as much of the request as the pipe takes now; False when the reader closed its input."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            while self.outgoing:
                n = os.write(self.proc.stdin.fileno(), self.outgoing[: 1 << 20])
                self.outgoing = self.outgoing[n:]
        except BlockingIOError:
            return True
        except OSError:  # BrokenPipeError: the reader is gone, or closed its input
            self.outgoing = b""
            return False
        return True

    def receive(self) -> Answer:
        """The answer to the last request, or the way the process failed to give one."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None and proc.stdin is not None
        fd, fd_in = proc.stdout.fileno(), proc.stdin.fileno()
        limit = self.pace.limit()
        fresh = self.answered == 0
        budget = limit + (self.pace.start_allowance(self.start_timeout) if fresh else 0.0)
        since = self.sent_at  # when the file's own time began (the ready line, for a fresh process that says it)
        deadline = time.monotonic() + budget
        scanned = 0  # the part of self.pending already searched for a newline
        while True:
            end = self.pending.find(b"\n", scanned)
            scanned = len(self.pending)
            if end >= 0:
                line, self.pending = bytes(self.pending[:end]), self.pending[end + 1 :]
                scanned = 0
                self.answered += 1
                if self.answered == 1 and line.startswith(b'{"ready"'):
                    self.pace.started(time.monotonic() - self.spawned_at)
                    fresh, since = False, time.monotonic()
                    deadline = since + limit  # started: the file's own time limit begins now
                    continue
                break
            if len(self.pending) > MAX_ANSWER:
                return self._fail("broken", f"an answer longer than {MAX_ANSWER >> 20} MiB")
            now = time.monotonic()
            if now >= deadline:
                self.hang_cpu += max(0.0, cpu_seconds(proc.pid) - self._cpu_at_send)
                return self._fail("hang", self.pace.hang(limit))
            if self.halted:
                return self._fail("hang", "stopped: the run is over")
            wait = min(deadline - now, RSS_POLL if self.guard == "rss" else HALT_POLL)
            ready, writable, _ = select.select([fd], [fd_in] if self.outgoing else [], [], wait)
            if writable and not self._write():
                return self.died()
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return self.died()
                self.pending += chunk
            if self.guard == "rss" and tree_rss(proc.pid) > self.memory_mb << 20:
                return self._fail("memory", f"MemoryCap: resident size past {self.memory_mb} MB")
        if fresh:  # no ready line: the first answer's time includes the start-up
            self.pace.started(time.monotonic() - self.spawned_at)
        else:
            self.pace.record(time.monotonic() - since)
        assert self.stderr is not None
        answer = parse_answer(line, self.stderr.text())
        if answer.status == "broken" or self.outgoing:  # an answer before the whole request: out of step
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
        """The end of the side log (a reader may have printed gigabytes into it)."""
        if not self.side_log:
            return ""
        try:
            with open(self.side_log, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - STDERR_KEEP))
                return f.read(STDERR_KEEP).decode("utf-8", "replace")
        except OSError:
            return ""

    def _reset(self) -> None:
        self.proc, self.pending, self.outgoing = None, bytearray(), b""
        self.restarts += 1

    def stop(self) -> None:
        self.halted = True
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def close(self) -> None:
        """End the reader's whole process group: children it left behind die with it, even when it is gone."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout) if self.proc is not None else ():  # stderr: its pump closes it
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
        self.sent_at = 0.0
        self.pace = Pace(timeout)
        self.halted = False

    def send(self, path: str, data: bytes | None = None) -> bool:
        if self.halted:
            return False
        args = shlex.split(self.template.replace("{}", shlex.quote(path)))
        # closed in receive(), once the process has ended
        self.out, self.err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115
        self.sent_at = time.monotonic()
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
        limit = self.pace.limit()
        deadline = time.monotonic() + limit
        status, why = "", ""
        while proc.poll() is None:
            if time.monotonic() >= deadline:
                status, why = "hang", self.pace.hang(limit)
            elif self.guard == "rss" and tree_rss(proc.pid) > self.memory_mb << 20:
                status, why = "memory", f"MemoryCap: resident size past {self.memory_mb} MB"
            elif os.fstat(out.fileno()).st_size > MAX_ANSWER:
                status, why = "broken", f"an answer longer than {MAX_ANSWER >> 20} MiB"
            if status:
                break
            time.sleep(0.002 if time.monotonic() + limit - deadline < 0.05 else RSS_POLL)
        with contextlib.suppress(ProcessLookupError, PermissionError):  # and whatever it left running
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if not status:
            self.pace.record(time.monotonic() - self.sent_at)
        too_long = os.fstat(out.fileno()).st_size > MAX_ANSWER
        out.seek(0)
        err.seek(max(0, os.fstat(err.fileno()).st_size - STDERR_KEEP))
        stdout, stderr = out.read(MAX_ANSWER), err.read(STDERR_KEEP).decode("utf-8", "replace")
        out.close()
        err.close()
        self.proc = None
        if too_long and not status:
            status, why = "broken", f"an answer longer than {MAX_ANSWER >> 20} MiB"
        if status:
            return Answer(status, error=why, stderr=stderr)
        code = proc.returncode
        if code < 0:
            return Answer("crash", error=f"Crash: killed by signal {code}", returncode=code, stderr=stderr)
        if code != 0:
            last = (stderr or stdout[-4096:].decode("utf-8", "replace")).strip().splitlines()[-1:] or [f"exit status {code}"]
            return Answer("rejected", error=last[0][:300], returncode=code, stderr=stderr)
        obj, bad = load_json(stdout)
        if bad:
            return Answer("broken", error=f"exit status 0 without JSON on stdout: {bad}", stderr=stderr)
        if isinstance(obj, dict) and isinstance(obj.get("ok"), bool):
            return parse_answer(stdout.strip().splitlines()[-1], stderr)
        if isinstance(obj, dict) and "metadata" in obj and "kv" not in obj:
            from .adapters import info_view

            try:
                obj = info_view(obj)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                return Answer("broken", error=f"info --json's shape with {type(e).__name__}: {str(e)[:120]}", stderr=stderr)
        return Answer("accepted", view=obj if isinstance(obj, dict) else {"unreadable": obj}, stderr=stderr)

    def ask(self, path: str, data: bytes | None = None) -> Answer:
        self.send(path, data)
        return self.receive()

    def died(self) -> Answer:
        if self.proc is None:  # never started: stopped
            return Answer("hang", error="stopped: the run is over")
        return self.receive()

    def stop(self) -> None:
        self.halted = True
        proc = self.proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for stream in (self.out, self.err):
            if stream is not None:
                stream.close()
        self.proc = self.out = self.err = None
