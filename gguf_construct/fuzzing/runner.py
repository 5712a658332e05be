"""The differential run: the same files through our reader and another one, every disagreement minimized and
saved with a one-line explanation.

Files come from the strategies (valid files of every shape, files broken one labelled way at a time) and from
mutations of corpus files and of generated ones. Each reader runs in a :class:`Worker` process with a memory cap
(``RLIMIT_AS``) and a time limit per file; a reader that hangs or dies is restarted and its answer recorded as
``Timeout`` or ``Crash``.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .minimize import minimize
from .mutators import mutate

#: Corpus files larger than this are left out of a run (the other readers can take seconds on a big vocabulary).
MAX_CORPUS_FILE = 256 << 10


class Worker:
    """One reader in a subprocess: ``ask(path)`` returns its JSON answer, or a Timeout/Crash answer."""

    def __init__(self, reader: str, profile: str, memory_mb: int, timeout: float, command: str | None = None):
        self.args = [sys.executable, "-m", "gguf_construct.fuzzing.worker", reader, profile, str(memory_mb)]
        if command is not None:
            self.args += [command, str(timeout)]
        self.timeout = timeout
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]))
            self.proc = subprocess.Popen(
                self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
            )
        return self.proc

    def ask(self, path: str) -> dict[str, Any]:
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(path + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            return self._died()
        line: list[str] = []
        reader = _LineReader(proc, line)
        reader.start()
        reader.join(self.timeout)
        if reader.is_alive():
            self.close()
            reader.join(1)
            return {"ok": False, "error": f"Timeout: no answer within {self.timeout:g} s", "rule": None, "where": ""}
        if not line or not line[0]:
            return self._died()
        try:
            return json.loads(line[0])
        except ValueError:
            return {"ok": False, "error": f"Crash: unreadable answer {line[0][:80]!r}", "rule": None, "where": ""}

    def _died(self) -> dict[str, Any]:
        code = self.proc.wait() if self.proc is not None else None
        self.proc = None
        return {"ok": False, "error": f"Crash: the reader's process died (exit status {code})", "rule": None, "where": ""}

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


class _LineReader:
    """Read one line from a process's stdout in a thread (so that the caller can time out)."""

    def __init__(self, proc: subprocess.Popen[str], out: list[str]):
        import threading

        self.thread = threading.Thread(target=lambda: out.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    def is_alive(self) -> bool:
        return self.thread.is_alive()


# -- comparison ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Disagreement:
    """How two readers differ on one file: ``signature`` groups the same difference across files."""

    signature: str
    explanation: str


def _cstr(value: Any) -> Any:
    """A string as a C reader hands it out (up to the first NUL)."""
    return value.split("\0")[0] if isinstance(value, str) else value


def normalize(view: dict[str, Any], other: str) -> dict[str, Any]:
    """Remove the differences that are conventions, not disagreements: gguf-py loses the element type of an
    empty array; ggml hands strings out NUL-terminated and no shapes; without tensors the data offset is moot."""
    kv = []
    for key, label, value in view["kv"]:
        if label.startswith("arr[") and other == "gguf-py" and isinstance(value, list) and not value:
            label = "arr[None]"
        if other == "ggml":
            value = [_cstr(v) for v in value] if label == "arr[str]" and isinstance(value, list) else _cstr(value)
        kv.append([key, label, value])
    tensors = [[n, t, shape if other not in ("ggml",) else None, o, b] for n, t, shape, o, b in view["tensors"]]
    return {**view, "kv": kv, "tensors": tensors, "data_offset": view["data_offset"] if view["tensors"] else None}


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def compare(ours: dict[str, Any], theirs: dict[str, Any], other: str) -> Disagreement | None:
    """The first difference between our answer and the other reader's, or None when they agree."""
    if not ours["ok"] and not theirs["ok"]:
        return None
    if ours["ok"] != theirs["ok"]:
        if theirs["ok"]:
            return Disagreement(f"{other}-accepts/{ours.get('rule')}", f"{other} accepts a file we reject: {ours['error']}")
        error = theirs["error"]
        kind = re.sub(r"\d+", "N", error)[:60]
        return Disagreement(
            f"{other}-rejects/{kind}@{theirs.get('where', '')}",
            f"{other} rejects a file we accept, with {error} (at {theirs.get('where') or '?'})",
        )
    a, b = normalize(ours["view"], other), normalize(theirs["view"], other)
    for key in ("version", "alignment", "data_offset"):
        if a[key] != b[key]:
            return Disagreement(f"header.{key}", f"{key}: ours {a[key]}, {other} {b[key]}")
    if [k for k, _, _ in a["kv"]] != [k for k, _, _ in b["kv"]]:
        return Disagreement(
            "kv.keys", f"keys differ: ours {_short([k for k, _, _ in a['kv']])}, {other} {_short([k for k, _, _ in b['kv']])}"
        )
    for (key, ta, va), (_, tb, vb) in zip(a["kv"], b["kv"]):
        if ta != tb:
            return Disagreement(f"kv.type/{ta}/{tb}", f"type of {key!r}: ours {ta}, {other} {tb}")
        if va != vb and va is not None and vb is not None:
            return Disagreement(f"kv.value/{ta}", f"value of {key!r} ({ta}): ours {_short(va)}, {other} {_short(vb)}")
    if [t[0] for t in a["tensors"]] != [t[0] for t in b["tensors"]]:
        return Disagreement(
            "tensor.names",
            f"tensor names differ: ours {_short([t[0] for t in a['tensors']])}, {other} {_short([t[0] for t in b['tensors']])}",
        )
    for ta, tb in zip(a["tensors"], b["tensors"]):
        for i, what in enumerate(("name", "type", "shape", "offset", "nbytes")):
            if ta[i] != tb[i] and ta[i] is not None and tb[i] is not None:
                return Disagreement(f"tensor.{what}/{ta[1]}", f"{what} of tensor {ta[0]!r} ({ta[1]}): ours {ta[i]}, {other} {tb[i]}")
    for name, digest in a["dequant"].items():
        if name in b["dequant"] and b["dequant"][name] != digest:
            kind = next(t[1] for t in a["tensors"] if t[0] == name)
            return Disagreement(f"dequant/{kind}", f"dequantized values of tensor {name!r} ({kind}) differ")
    return None


# -- minimization ----------------------------------------------------------------------------------------
def ddmin(data: bytes, still_fails: Callable[[bytes], bool], budget: int = 200) -> bytes:
    """Delta debugging (Zeller): remove chunks of ``data`` while ``still_fails`` holds, halving the chunk size
    when no chunk can go; at most ``budget`` calls of the predicate. Then the shortest failing prefix is tried."""
    calls = 0

    def check(candidate: bytes) -> bool:
        nonlocal calls
        calls += 1
        return still_fails(candidate)

    n = 2
    while len(data) >= 2 and calls < budget:
        chunk = max(1, len(data) // n)
        removed = False
        for start in range(0, len(data), chunk):
            if calls >= budget:
                break
            candidate = data[:start] + data[start + chunk :]
            if candidate and check(candidate):
                data, n, removed = candidate, max(n - 1, 2), True
                break
        if not removed:
            if chunk == 1:
                break
            n = min(len(data), n * 2)
    lo, hi = 1, len(data)  # the shortest prefix that still fails (binary search, assuming monotony)
    while lo < hi and calls < budget:
        mid = (lo + hi) // 2
        if check(data[:mid]):
            hi = mid
        else:
            lo = mid + 1
    return data[:hi] if hi < len(data) and check(data[:hi]) else data


# -- the run ---------------------------------------------------------------------------------------------
@dataclass
class Finding:
    signature: str
    explanation: str
    origin: str
    reproducer: str = ""
    count: int = 0


@dataclass
class Report:
    files: int = 0
    seconds: float = 0.0
    findings: dict[str, Finding] = field(default_factory=dict)
    agreed: int = 0

    def lines(self) -> list[str]:
        out = [
            f"{self.files} files in {self.seconds:.1f} s: {self.agreed} agreed, {self.files - self.agreed} disagreed ({len(self.findings)} kinds)"
        ]
        for f in sorted(self.findings.values(), key=lambda f: (-f.count, f.signature)):
            out.append(f"  {f.count:5d}x {f.reproducer or '-'}: {f.explanation}")
        return out


def corpus_files(folder: Path | None) -> list[tuple[str, bytes]]:
    """(name, bytes) of the GGUF files of a corpus folder small enough for a run (default ../shared/corpus)."""
    folder = folder or Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
    out = []
    for path in sorted(folder.rglob("*.gguf")) if folder.is_dir() else []:
        if path.stat().st_size <= MAX_CORPUS_FILE:
            out.append((f"corpus:{path.relative_to(folder)}", path.read_bytes()))
    return out


def generated_files(count: int, seed: int) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    """(valid, broken) files drawn from the strategies; empty when hypothesis is not installed."""
    try:
        from ..strategies import draw_examples, gguf_bytes, invalid_gguf
    except ImportError:
        return [], []
    n = max(1, count)
    valid = [(f"generated:valid[{i}]", b) for i, b in enumerate(draw_examples(gguf_bytes(max_kv=4, max_tensors=3), n, seed_value=seed))]
    broken = [(f"generated:{x.label}[{i}]", x.data) for i, x in enumerate(draw_examples(invalid_gguf(), n, seed_value=seed + 1))]
    return valid, broken


def inputs(count: int, seed: int, corpus: Path | None) -> Iterator[tuple[str, bytes]]:
    """``count`` files: the corpus first, then a seeded mix of generated, broken and mutated files."""
    rng = random.Random(seed)
    base = corpus_files(corpus)
    valid, broken = generated_files(max(4, count // 6), seed)
    n = 0
    for item in base:
        if n >= count:
            return
        yield item
        n += 1
    sources = base + valid
    pools = [("valid", valid), ("broken", broken), ("mutated", sources)]
    while n < count:
        kind, pool = rng.choices(pools, weights=(1, 1, 4))[0]
        if not pool:
            kind, pool = "mutated", sources
        name, data = pool[rng.randrange(len(pool))]
        if kind == "mutated":
            data, note = mutate(data, rng, rounds=rng.choice((1, 1, 2, 3)))
            name = f"{name} mutated ({note})"
        yield name, data
        n += 1


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def run(against: str, *, count: int = 200, seconds: float | None = None, seed: int = 0, out: Path | None = None,
        corpus: Path | None = None, profile: str | None = None, timeout: float = 5.0, memory_mb: int = 2048,
        minimize_budget: int = 150, log: Callable[[str], None] | None = None) -> Report:  # fmt: skip
    """Run ``count`` files (or for ``seconds``) through our reader and ``against`` ('gguf-py', 'ggml' or a
    command template with ``{}``); save one minimized reproducer per kind of disagreement in ``out``."""
    command = against if against not in ("gguf-py", "ggml") else None
    other = "command" if command else against
    profile = profile or ("ggml" if against == "ggml" else "spec")
    ours = Worker("ours-info" if command else "ours", profile, memory_mb, timeout)
    theirs = Worker(other, profile, memory_mb, timeout, command)
    report = Report()
    start = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="gguf-construct-fuzz-")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    counter = 0

    def judge(data: bytes) -> Disagreement | None:
        nonlocal counter
        counter += 1
        path = os.path.join(scratch, f"{counter}.gguf")
        with open(path, "wb") as f:
            f.write(data)
        try:
            return compare(ours.ask(path), theirs.ask(path), other)
        finally:
            os.unlink(path)

    try:
        for name, data in inputs(count if seconds is None else 10**9, seed, corpus):
            if seconds is not None and time.monotonic() - start > seconds:
                break
            report.files += 1
            found = judge(data)
            if found is None:
                report.agreed += 1
                continue
            finding = report.findings.get(found.signature)
            if finding is None:
                finding = report.findings[found.signature] = Finding(found.signature, found.explanation, name)
                if out is not None:
                    def same(d: bytes, sig: str = found.signature) -> bool:
                        x = judge(d)
                        return x is not None and x.signature == sig

                    small = minimize(data, same, max_calls=minimize_budget)
                    final = judge(small)
                    explanation = final.explanation if final is not None else found.explanation
                    finding.explanation = explanation
                    finding.reproducer = f"{len(report.findings):03d}-{_slug(found.signature)}.gguf"
                    (out / finding.reproducer).write_bytes(small)
                    with open(out / "findings.tsv", "a", encoding="utf-8") as f:
                        f.write(f"{finding.reproducer}\t{len(small)}\t{explanation}\t(from {name})\n")
                if log:
                    log(f"new: {finding.reproducer or found.signature}: {finding.explanation}")
            finding.count += 1
    finally:
        ours.close()
        theirs.close()
        os.rmdir(scratch) if not os.listdir(scratch) else None
    report.seconds = time.monotonic() - start
    return report
