"""The differential campaign: the same files through our reader and another one, every finding classified
(:mod:`.triage`), grouped by root cause, minimized and saved with a one-line explanation.

Files come, lazily, from the seed corpus (built in, or ``--corpus``), the strategies when hypothesis is installed
(valid files of every shape, files broken one labelled way at a time), files with one derived quantity at an
arithmetic boundary (:mod:`..boundaries`) and mutations of all of them. Both readers are
line-protocol targets (:mod:`.targets`) answering the same file at the same time, each in its own process under a
time limit and a memory guard, restarted after a crash, a hang or the memory cap. ``jobs`` lanes, each a pair of
such readers, work side by side; a reader whose hang is already a known kind gets an adaptive time limit
(:class:`.targets.Pace`).

Everything a run creates lives in one scratch folder (the files sent, the workers' logs and request files),
removed however the run ends. ``findings.tsv`` (:mod:`.findings_file`) is rewritten whole, atomically, after each
new kind, and an existing one is resumed: its kinds are not saved again.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...api.fileio import files_under, write_atomic
from ..boundaries import boundary_file
from ..overruns import count_overrun
from .adapters import ADAPTERS, C_LOG_ENV
from .findings_file import Row, read_findings, write_findings
from .minimize import minimize as schema_minimize
from .mutators import mutate
from .targets import Answer, LineTarget, OneShotTarget, Target
from .triage import CLASSES, Finding, findings
from .worker import SCRATCH_ENV

#: Corpus files larger than this are left out of a run (the other readers can take seconds on a big vocabulary).
MAX_CORPUS_FILE = 256 << 10
#: The seed corpus that ships with the package: a few small files written by other tools.
SEEDS = Path(__file__).with_name("seeds")
#: Strategy examples drawn per batch: generation stays lazy (a campaign never waits for files it will not try).
BATCH = 8
#: The share of valid (and again of broken) files drawn from the strategies: a drawn file costs ~30 ms, a mutation
#: ~2 ms, and drawn valid files join the pool that mutations start from.
GENERATED_SHARE = 0.02
#: How long the readers may take to stop once a run ends (killed after it).
STOP_GRACE = 2.0


class Stop(Exception):
    """The run is over (its deadline, or a signal): a lane's minimization ends where it is."""


#: The share of files with one derived quantity at an arithmetic boundary, drawn from the whole target list (the
#: mutations plant them in pool files too): ~1 ms each.
BOUNDARY_SHARE = 0.1
#: The share of those whose planted record is then read under a count that says more (``testing.overruns``).
BOUNDARY_OVERRUN_SHARE = 0.5
#: The share of files from the named classes of files that broke readers (``strategies.READER_BREAKERS``).
BREAKER_SHARE = 0.03


# -- minimization ----------------------------------------------------------------------------------------
def minimize(data: bytes, keeps_finding: Callable[[bytes], bool], budget: int, seconds: float) -> bytes:
    """The smallest file found that still shows the finding, in at most ``budget`` reader calls and ``seconds``:
    the schema's steps first, then byte-chunk deletion (``testing.fuzzing.minimize``)."""
    return schema_minimize(data, keeps_finding, seconds=seconds, max_calls=budget)


# -- the report ------------------------------------------------------------------------------------------
#: Reproducers kept per kind of failure: the first file, then files that broke through another derived quantity
#: (or that fail without the memory trouble the first one had).
MAX_REPRODUCERS = 3


@dataclass
class Kind:
    """Every file with the same root cause: the first one's explanation, origin and (with --output) reproducer,
    and the cause (``quantity_of``) of each further reproducer kept. ``earlier``: saved by an earlier run into the
    same folder (resumed, not saved again)."""

    cls: str
    signature: str
    explanation: str
    origin: str
    reproducer: str = ""
    count: int = 0
    known: bool = False
    earlier: bool = False
    causes: list[str | None] = field(default_factory=list)
    heavy: bool = False  # the first reproducer also ran into an allocation refusal or the memory cap

    def wants(self, cause: str | None, heavy: bool) -> bool:
        """Whether a further file of this kind is worth keeping: a cause not kept yet, or the first file needed
        memory trouble and this one does not."""
        if len(self.causes) >= MAX_REPRODUCERS or self.cls not in ("crash", "dos", "memory"):
            return False
        return (cause is not None and cause not in self.causes) or (self.heavy and not heavy and len(self.causes) < 2)


def quantity_of(origin: str) -> str | None:
    """What broke in a file, from how it was made: the derived quantity and boundary of a boundary file
    (``tensor.padded_size@2^64``), the label of a broken file, or None."""
    m = re.search(r"boundary[: ]([\w.]+@2\^\d+)", origin)
    if m:
        return m.group(1)
    m = re.search(r"generated:([^\[\s]+)\[|breaker:([\w-]+)", origin)
    return (m.group(1) or m.group(2)) if m and m.group(1) != "valid" else None


@dataclass
class Report:
    files: int = 0
    seconds: float = 0.0
    agreed: int = 0
    kinds: dict[str, Kind] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    hang_cpu: float = 0.0  # CPU seconds the readers spent on files they hung on
    interrupted: bool = False  # stopped by a signal: what is here is the run so far

    @property
    def findings(self) -> dict[str, Kind]:
        """The kinds not silenced by --known nor saved by an earlier run."""
        return {s: k for s, k in self.kinds.items() if not k.known and not k.earlier}

    def lines(self) -> list[str]:
        new = self.findings
        silenced = sum(k.known for k in self.kinds.values())
        earlier = sum(k.earlier for k in self.kinds.values())
        rate = self.files / self.seconds if self.seconds else 0.0
        notes = [f"{silenced} known kinds silenced"] if silenced else []
        notes += [f"{earlier} kinds saved by an earlier run"] if earlier else []
        out = [
            ("interrupted: " if self.interrupted else "") + f"{self.files} files in {self.seconds:.1f} s ({rate:.0f}/s): "
            f"{self.agreed} without findings, {len(new)} kinds of finding" + (f" ({', '.join(notes)})" if notes else "")
        ]
        for cls in CLASSES:
            group = sorted((k for k in new.values() if k.cls == cls), key=lambda k: (-k.count, k.signature))
            if group:
                out.append(f"{cls}:")
                out.extend(f"  {k.count:5d}x {printable(k.reproducer or k.signature)}: {printable(k.explanation)}" for k in group)
        return out


def printable(text: str) -> str:
    """One line of a reader's text for a terminal: control characters (a newline, an escape sequence) escaped."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f]", lambda m: repr(m.group())[1:-1], text)


# -- the files -------------------------------------------------------------------------------------------
def corpus_files(folder: Path | None, fmt: str = "gguf") -> list[tuple[str, bytes]]:
    """(name, bytes) of the files of ``folder`` (default: the built-in seeds) small enough for a run."""
    folder = folder if folder is not None else SEEDS
    suffix = ".safetensors" if fmt == "safetensors" else ".gguf"
    out = []
    for path in sorted(folder.rglob("*" + suffix)) if folder.is_dir() else []:
        if path.stat().st_size <= MAX_CORPUS_FILE:
            origin = f"seed:{path.name}" if folder == SEEDS else f"corpus:{path.relative_to(folder)}"
            out.append((origin, path.read_bytes()))
    return out


def hypothesis_storage() -> None:
    """Keep hypothesis's files (its constants cache) out of the working folder: in the user's cache folder, unless
    ``HYPOTHESIS_STORAGE_DIRECTORY`` says where. For commands and cluster workers, whose working folder is the user's;
    a test session keeps its own settings."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    try:
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        return
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gguf-construct" / "hypothesis"
    set_hypothesis_home_dir(cache)


def generated(seed: int, fmt: str) -> tuple[Iterator[tuple[str, bytes]], Iterator[tuple[str, bytes]]] | None:
    """Endless (valid, broken) files drawn from the strategies in small batches; None without hypothesis."""
    try:
        from .. import strategies as st
    except ImportError:
        return None

    def batches(kind: str) -> Iterator[tuple[str, bytes]]:
        for batch in range(10**9):
            seed_value = f"{seed}:{kind}:{batch}"
            if fmt == "safetensors":
                files: list[bytes] = st.draw_examples(st.safetensors_bytes(), BATCH, seed_value=seed_value)
                for i, b in enumerate(files):
                    yield f"generated:{kind}[{batch}.{i}]", b
            elif kind == "valid":
                files = st.draw_examples(st.gguf_bytes(max_kv=4, max_tensors=3), BATCH, seed_value=seed_value)
                for i, b in enumerate(files):
                    yield f"generated:valid[{batch}.{i}]", b
            else:
                broken: list[Any] = st.draw_examples(st.invalid_gguf(), BATCH, seed_value=seed_value)
                for i, x in enumerate(broken):
                    yield f"generated:{x.label}[{batch}.{i}]", x.data

    return batches("valid"), batches("broken")


def inputs(seed: int, corpus: list[tuple[str, bytes]], fmt: str = "gguf") -> Iterator[tuple[str, bytes]]:
    """Files, lazily and without end: the corpus first, then a seeded mix of generated, broken and mutated ones
    (mutations of the corpus alone when hypothesis is not installed)."""
    rng = random.Random(seed)
    yield from corpus
    gen = generated(seed, fmt)
    valid_pool: list[tuple[str, bytes]] = []
    while True:
        roll = rng.random()
        if gen is not None and roll < GENERATED_SHARE:
            item = next(gen[0])
            valid_pool.append(item)
            del valid_pool[:-64]
            yield item
        elif gen is not None and roll < 2 * GENERATED_SHARE:
            yield next(gen[1])
        elif fmt == "gguf" and roll < 2 * GENERATED_SHARE + BOUNDARY_SHARE:
            made = boundary_file(rng)
            over = count_overrun(made.data, rng, made.record) if rng.random() < BOUNDARY_OVERRUN_SHARE else None
            yield (f"boundary:{made.label} + {over[1]}", over[0]) if over else (f"boundary:{made.label}", made.data)
        elif fmt == "gguf" and gen is not None and roll < 2 * GENERATED_SHARE + BOUNDARY_SHARE + BREAKER_SHARE:
            from ..strategies.reader_breakers import READER_BREAKERS

            name = rng.choice(list(READER_BREAKERS))
            yield f"breaker:{name}", READER_BREAKERS[name].make(rng)
        else:
            pool = corpus + valid_pool
            if not pool:
                if gen is None:
                    return
                continue
            name, data = pool[rng.randrange(len(pool))]
            if data:
                data, note = mutate(data, rng, rounds=rng.choice((1, 1, 2, 3)))
                name = f"{name} mutated ({note})"
            yield name, data


# -- the readers ----------------------------------------------------------------------------------------
def _python_worker(reader: str, profile: str, memory_mb: int, timeout: float, scratch: str | None = None) -> LineTarget:
    """A built-in reader in a worker process; its C stderr goes to a side log and ``bytes`` requests to a file,
    both in ``scratch`` (a folder the caller removes; default: a new temporary one, removed with the target)."""
    own = scratch is None
    if scratch is None:
        scratch = tempfile.mkdtemp(prefix="gguf-construct-fuzz-")
    fd, side_log = tempfile.mkstemp(prefix=f"{reader}-", suffix=".log", dir=scratch)
    os.close(fd)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")) if p)
    )
    env[C_LOG_ENV] = side_log
    env[SCRATCH_ENV] = side_log[: -len(".log")] + ".input"
    # ggml_abort runs gdb for a backtrace (seconds per abort); the abort's own line names the assertion
    env.setdefault("GGML_NO_BACKTRACE", "1")
    argv = [sys.executable, "-m", "gguf_construct.testing.fuzzing.worker", reader, profile, str(memory_mb)]
    worker = LineTarget(argv, timeout=timeout, memory_mb=memory_mb, guard="none", env=env, start_timeout=120, side_log=side_log)
    if own:
        weakref.finalize(worker, shutil.rmtree, scratch, True)
    return worker  # the worker caps itself


def target(
    against: str,
    profile: str,
    *,
    timeout: float,
    memory_mb: int,
    guard: str | None = None,
    send: str = "path",
    scratch: str | None = None,
) -> Target:
    """The other reader: a built-in adapter's name, a one-shot command with ``{}``, or a line-protocol command."""
    if against in ADAPTERS:
        return _python_worker(against, profile, memory_mb, timeout, scratch)
    if "{}" in against:
        return OneShotTarget(against, timeout=timeout, memory_mb=memory_mb, guard=guard or "rss", env=sanitizer_env())
    import shlex

    return LineTarget(shlex.split(against), timeout=timeout, memory_mb=memory_mb, guard=guard or "rss", send=send, env=sanitizer_env())


def sanitizer_env() -> dict[str, str]:
    """The environment of a command reader: LeakSanitizer off unless ``ASAN_OPTIONS`` says otherwise (a leak at
    exit is not what a file does to a reader, and it would make every rejected file a finding), and no gdb backtrace
    from ggml's aborts (``GGML_NO_BACKTRACE``: seconds per abort; the abort's own line names the assertion)."""
    env = dict(os.environ)
    env.setdefault("GGML_NO_BACKTRACE", "1")
    asan = env.get("ASAN_OPTIONS", "")
    if "detect_leaks" not in asan:
        env["ASAN_OPTIONS"] = ":".join(x for x in (asan, "detect_leaks=0") if x)
    return env


def reader_name(against: str) -> str:
    """How findings name the other reader: a built-in adapter's name, or a command's script (``node x/reader.cjs``
    is ``reader.cjs``) or program."""
    import shlex

    if against in ADAPTERS:
        return against
    words = [w for w in shlex.split(against) if w != "{}" and not w.startswith("-")]
    named = [w for w in words[1:] if "/" in w or "." in w]
    return Path((named or words or ["command"])[0]).name


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _matches(signature: str, patterns: list[str]) -> bool:
    return any(signature == p or fnmatch.fnmatchcase(signature, p) for p in patterns)


# -- the run ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored for a moment (in the main thread, which alone may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


class Lane:
    """One pair of readers (ours and the other) and the files it sends them (named in the run's scratch folder)."""

    def __init__(self, number: int, make: Callable[[str], tuple[Target, Target]], scratch: str, suffix: str):
        self.folder = os.path.join(scratch, f"lane{number}")
        os.mkdir(self.folder)
        self.ours, self.theirs = make(self.folder)
        self.suffix, self.counter = suffix, 0

    @property
    def targets(self) -> tuple[Target, Target]:
        return self.ours, self.theirs

    def ask(self, data: bytes) -> Callable[[], tuple[Answer, Answer]]:
        """Send ``data`` to both readers (they work on it at the same time); the returned call collects the answers."""
        self.counter += 1
        path = os.path.join(self.folder, f"{self.counter % 4}{self.suffix}")
        with open(path, "wb") as f:
            f.write(data)
        sent = [t.send(path, data) for t in self.targets]

        def answers() -> tuple[Answer, Answer]:
            a, b = (t.receive() if ok else t.died() for t, ok in zip(self.targets, sent))
            return a, b

        return answers

    def close(self) -> None:
        for t in self.targets:
            t.close()


class Campaign:
    """The shared state of a run's lanes: the file source, the kinds found, the saved reproducers, the stop."""

    def __init__(self, report: Report, files: Iterator[tuple[str, bytes]], *, count: int | None, deadline: float | None, other: str):
        self.report, self.files, self.count, self.deadline, self.other = report, files, count, deadline, other
        self.lock = threading.Lock()  # the report and the saved rows
        self.source_lock = threading.Lock()  # the file source (drawing a batch takes a while: not under self.lock)
        self.stopped = threading.Event()
        self.taken = 0
        self.rows: list[Row] = []
        self.errors: list[BaseException] = []
        self.lanes: list[Lane] = []

    def over(self) -> bool:
        return self.stopped.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline)

    def next_file(self) -> tuple[str, bytes] | None:
        """The next file to try, or None when the run has tried enough (or is over)."""
        with self.source_lock:
            if self.over() or (self.count is not None and self.taken >= self.count):
                return None
            item = next(self.files, None)
            if item is not None:
                self.taken += 1
            return item


def run(
    against: str,
    *,
    count: int | None = 200,
    seconds: float | None = None,
    seed: int = 0,
    out: Path | None = None,
    corpus: Path | None = None,
    profile: str | None = None,
    timeout: float = 5.0,
    memory_mb: int = 2048,
    minimize_budget: int = 150,
    minimize_seconds: float = 20.0,
    known: list[str] | None = None,
    guard: str | None = None,
    send: str = "path",
    fmt: str | None = None,
    jobs: int = 1,
    saved: Iterable[str] = (),
    log: Callable[[str], None] | None = None,
) -> Report:
    """Run files through our reader and ``against`` until ``count`` files or ``seconds`` (whichever comes first;
        at least one must be given; ``seconds`` is a deadline, minimization included); save one minimized reproducer
        per kind of finding in ``out``. ``jobs`` pairs of readers work at once. ``saved``: signatures saved elsewhere
    (by the other slices of a cluster campaign): counted, not saved again. A KeyboardInterrupt (Ctrl-C, or the
        CLI's SIGTERM) ends the run early: the report so far comes back with ``interrupted`` set, the findings saved."""
    if count is None and seconds is None:
        raise ValueError("give count, seconds or both")
    adapter = ADAPTERS.get(against)
    fmt = fmt or (adapter.fmt if adapter else "gguf")
    other = reader_name(against)
    profile = profile or (adapter.profile if adapter else "spec")
    if adapter is not None:
        ours_reader = adapter.ours
    elif fmt == "safetensors":
        ours_reader = "ours-safetensors"
    else:  # a one-shot command prints info --json's shape; a line-protocol one answers views
        ours_reader = "ours-info" if "{}" in against else "ours"
    start = time.monotonic()
    deadline = start + seconds if seconds is not None else None
    report = Report()
    suffix = ".safetensors" if fmt == "safetensors" else ".gguf"
    patterns = known or []
    campaign = Campaign(report, inputs(seed, corpus_files(corpus, fmt), fmt), count=count, deadline=deadline, other=other)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for row in read_findings(out / "findings.tsv"):  # resumed: what an earlier run saved is not saved again
            campaign.rows.append(row)
            report.kinds[row.signature] = Kind(row.cls, row.signature, row.explanation, row.origin, row.reproducer, earlier=True)
    for signature in saved:
        if signature not in report.kinds:
            report.kinds[signature] = Kind(signature.split("/", 1)[0], signature, "", "", earlier=True)
    guarded = files_under(corpus)

    def make(folder: str) -> tuple[Target, Target]:
        ours = _python_worker(ours_reader, profile, memory_mb, timeout, folder)
        return ours, target(against, profile, timeout=timeout, memory_mb=memory_mb, guard=guard, send=send, scratch=folder)

    scratch = tempfile.mkdtemp(prefix="gguf-construct-fuzz-")
    lanes: list[Lane] = []
    threads: list[threading.Thread] = []
    try:
        for i in range(max(1, jobs)):
            lanes.append(Lane(i, make, scratch, suffix))
        campaign.lanes = lanes
        for lane in lanes:
            work = _LaneWork(lane, campaign, patterns, out, suffix, minimize_budget, minimize_seconds, guarded, log)
            threads.append(threading.Thread(target=work.run, name=f"fuzz-lane-{len(threads)}", daemon=True))
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.1)
            if campaign.over():
                break
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        with signals_ignored():  # a second Ctrl-C does not cut the clean-up short
            campaign.stopped.set()
            for lane in lanes:  # a lane waiting on a reader gets its answer at once (and drops it: the run is over)
                for reader in lane.targets:
                    reader.stop()
            for t in threads:
                t.join(STOP_GRACE)
            for lane in lanes:
                lane.close()
            shutil.rmtree(scratch, ignore_errors=True)
    if campaign.errors:
        raise campaign.errors[0]
    report.seconds = time.monotonic() - start
    report.restarts = {
        "ours": sum(getattr(lane.ours, "restarts", 0) for lane in lanes),
        other: sum(getattr(lane.theirs, "restarts", 0) for lane in lanes),
    }
    report.hang_cpu = sum(getattr(t, "hang_cpu", 0.0) for lane in lanes for t in lane.targets)
    return report


@dataclass
class _LaneWork:
    """What one lane's thread does: files through its readers, findings into the campaign, new kinds saved."""

    lane: Lane
    campaign: Campaign
    patterns: list[str]
    out: Path | None
    suffix: str
    minimize_budget: int
    minimize_seconds: float
    guarded: list[str]
    log: Callable[[str], None] | None

    def run(self) -> None:
        try:
            self._loop()
        except Stop:
            pass
        except BaseException as e:  # handed to the main thread, which raises it after the clean-up
            if not self.campaign.stopped.is_set():
                self.campaign.errors.append(e)
                self.campaign.stopped.set()

    def _loop(self) -> None:
        c = self.campaign
        upcoming = c.next_file()
        while upcoming is not None:
            name, data = upcoming
            answers = self.lane.ask(data)
            upcoming = c.next_file()  # made while the readers read
            ours, theirs = answers()
            if c.stopped.is_set():
                return  # the readers were stopped under this file: no verdict
            found = findings(ours, theirs, c.other)
            heavy = any(f.cls == "memory" for f in found)
            new: list[Kind] = []
            more: list[Kind] = []
            with c.lock:
                c.report.files += 1
                if not found:
                    c.report.agreed += 1
                for f in found:
                    kind = c.report.kinds.get(f.signature)
                    if kind is None:
                        kind = c.report.kinds[f.signature] = Kind(f.cls, f.signature, f.explanation, name, heavy=heavy)
                        kind.known = _matches(f.signature, self.patterns)
                        kind.causes.append(quantity_of(name))
                        new.append(kind)
                    elif self.out is not None and not kind.known and not kind.earlier and kind.wants(cause := quantity_of(name), heavy):
                        kind.causes.append(cause)
                        more.append(kind)
                    if f.cls == "hang":  # a known hang kind: its repeats cost an adaptive time limit
                        self._adapt(f.signature.split("/", 1)[1])
                    kind.count += 1
            for kind in more:
                self._save_more(kind, data, name)
            for kind in new:
                if self.out is not None and not kind.known:
                    self._save(kind, data)
                if self.log and not kind.known:
                    self.log(f"new {kind.cls}: {printable(kind.reproducer or kind.signature)}: {printable(kind.explanation)}")

    def _adapt(self, reader: str) -> None:
        side = 0 if reader == "ours" else 1
        for lane in self.campaign.lanes:
            lane.targets[side].pace.adaptive = True

    def _judge(self, data: bytes) -> list[Finding]:
        if self.campaign.over():
            raise Stop
        ours, theirs = self.lane.ask(data)()
        if self.campaign.stopped.is_set():
            raise Stop
        return findings(ours, theirs, self.campaign.other)

    def _save(self, kind: Kind, data: bytes) -> None:
        """Minimize the file of a new kind (within the run's deadline), write it and findings.tsv again."""
        c = self.campaign

        def keeps(candidate: bytes) -> bool:
            return any(f.signature == kind.signature for f in self._judge(candidate))

        seconds = self.minimize_seconds
        if c.deadline is not None:
            seconds = min(seconds, c.deadline - time.monotonic())
        small = data
        if self.minimize_budget > 0 and seconds > 0:
            try:
                small = minimize(data, keeps, self.minimize_budget, seconds)
                if small != data:
                    final = next((f for f in self._judge(small) if f.signature == kind.signature), None)
                    if final is None:  # a flaky finding (a hang near the limit): keep the original file
                        small = data
                    else:
                        kind.explanation = final.explanation
            except Stop:
                small = data  # the run ended: the file as found, not half minimized
        kind.reproducer = self._write(kind, small, kind.origin, "")

    def _save_more(self, kind: Kind, data: bytes, origin: str) -> None:
        """A further reproducer of a kind (``NNN-signature-K``) that broke through another derived quantity, kept as
        found (minimizing could lose the quantity that broke), with its own row of findings.tsv."""
        self._write(kind, data, origin, f"-{len(kind.causes)}")

    def _write(self, kind: Kind, data: bytes, origin: str, tag: str) -> str:
        """Write a reproducer under the next free ``NNN-signature{tag}`` name and findings.tsv again, with its row."""
        c = self.campaign
        assert self.out is not None
        with c.lock:
            number = len(c.rows) + 1
            taken = {r.reproducer for r in c.rows}
            while True:
                name = f"{number:03d}-{_slug(kind.signature)}{tag}{self.suffix}"
                if name not in taken and not os.path.lexists(self.out / name):
                    break
                number += 1
            write_atomic(self.out / name, lambda f: f.write(data), inputs=self.guarded)
            c.rows.append(Row(name, len(data), kind.cls, kind.signature, kind.explanation, f"from {origin}"))
            write_findings(self.out / "findings.tsv", c.rows, inputs=self.guarded)
            return name
