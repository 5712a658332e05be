"""The differential campaign: the same files through our reader and another one, every finding classified
(:mod:`.triage`), grouped by root cause, minimized and saved with a one-line explanation.

Files come, lazily, from the seed corpus (built in, or ``--corpus``), the strategies when hypothesis is installed
(valid files of every shape, files broken one labelled way at a time), files with one derived quantity at an
arithmetic boundary (:mod:`..boundaries`) and mutations of all of them. Both readers are
line-protocol targets (:mod:`.protocol`) answering the same file at the same time, each in its own process under a
time limit and a memory guard, restarted after a crash, a hang or the memory cap.
"""

from __future__ import annotations

import fnmatch
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...api.fileio import check_output, files_under, write_atomic
from ..boundaries import boundary_file
from .minimize import minimize as schema_minimize
from .mutators import mutate
from .targets import Answer, LineTarget, OneShotTarget
from .triage import CLASSES, Finding, findings

#: Corpus files larger than this are left out of a run (the other readers can take seconds on a big vocabulary).
MAX_CORPUS_FILE = 256 << 10
#: The seed corpus that ships with the package: a few small files written by other tools.
SEEDS = Path(__file__).with_name("seeds")
#: Strategy examples drawn per batch: generation stays lazy (a campaign never waits for files it will not try).
BATCH = 8
#: The share of valid (and again of broken) files drawn from the strategies: a drawn file costs ~30 ms, a mutation
#: ~2 ms, and drawn valid files join the pool that mutations start from.
GENERATED_SHARE = 0.02
#: The share of files with one derived quantity at an arithmetic boundary, drawn from the whole target list (the
#: mutations plant them in pool files too): ~1 ms each.
BOUNDARY_SHARE = 0.1
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
    and the cause (``quantity_of``) of each further reproducer kept."""

    cls: str
    signature: str
    explanation: str
    origin: str
    reproducer: str = ""
    count: int = 0
    known: bool = False
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

    @property
    def findings(self) -> dict[str, Kind]:
        """The kinds not silenced by --known."""
        return {s: k for s, k in self.kinds.items() if not k.known}

    def lines(self) -> list[str]:
        new = self.findings
        silenced = len(self.kinds) - len(new)
        rate = self.files / self.seconds if self.seconds else 0.0
        out = [
            f"{self.files} files in {self.seconds:.1f} s ({rate:.0f}/s): {self.agreed} without findings, "
            f"{len(new)} kinds of finding" + (f" ({silenced} known kinds silenced)" if silenced else "")
        ]
        for cls in CLASSES:
            group = sorted((k for k in new.values() if k.cls == cls), key=lambda k: (-k.count, k.signature))
            if group:
                out.append(f"{cls}:")
                out.extend(f"  {k.count:5d}x {k.reproducer or k.signature}: {k.explanation}" for k in group)
        return out


def load_known(path: Path | None) -> list[str]:
    """Signatures (shell-style patterns allowed) from a --known file: one per line, ``#`` comments. A findings.tsv
    works too: its signature column is taken."""
    if path is None:
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip() if not line.startswith("#") else ""
        if line:
            cells = line.split("\t")
            out.append(cells[3] if len(cells) >= 5 else cells[0])
    return out


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
                for i, b in enumerate(st.draw_examples(st.safetensors_bytes(), BATCH, seed_value=seed_value)):
                    yield f"generated:{kind}[{batch}.{i}]", b
            elif kind == "valid":
                for i, b in enumerate(st.draw_examples(st.gguf_bytes(max_kv=4, max_tensors=3), BATCH, seed_value=seed_value)):
                    yield f"generated:valid[{batch}.{i}]", b
            else:
                for i, x in enumerate(st.draw_examples(st.invalid_gguf(), BATCH, seed_value=seed_value)):
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
            yield f"boundary:{made.label}", made.data
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


# -- the readers -----------------------------------------------------------------------------------------
def _python_worker(reader: str, profile: str, memory_mb: int, timeout: float) -> LineTarget:
    """A built-in reader in a worker process; its C stderr goes to a side log the target reads when it fails."""
    from .adapters import C_LOG_ENV

    fd, side_log = tempfile.mkstemp(prefix=f"gguf-construct-fuzz-{reader}-", suffix=".log")
    os.close(fd)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")) if p)
    )
    env[C_LOG_ENV] = side_log
    # ggml_abort runs gdb for a backtrace (seconds per abort); the abort's own line names the assertion
    env.setdefault("GGML_NO_BACKTRACE", "1")
    argv = [sys.executable, "-m", "gguf_construct.testing.fuzzing.worker", reader, profile, str(memory_mb)]
    return LineTarget(
        argv, timeout=timeout, memory_mb=memory_mb, guard="none", env=env, start_timeout=120, side_log=side_log
    )  # the worker caps itself


def target(
    against: str, profile: str, *, timeout: float, memory_mb: int, guard: str | None = None, send: str = "path"
) -> LineTarget | OneShotTarget:
    """The other reader: a built-in adapter's name, a one-shot command with ``{}``, or a line-protocol command."""
    from .adapters import BUILTIN

    if against in BUILTIN:
        return _python_worker(against, profile, memory_mb, timeout)
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

    from .adapters import BUILTIN

    if against in BUILTIN:
        return against
    words = [w for w in shlex.split(against) if w != "{}" and not w.startswith("-")]
    named = [w for w in words[1:] if "/" in w or "." in w]
    return Path((named or words or ["command"])[0]).name


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


# -- the run ---------------------------------------------------------------------------------------------
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
    log: Callable[[str], None] | None = None,
) -> Report:
    """Run files through our reader and ``against`` until ``count`` files or ``seconds`` (whichever comes first;
    at least one must be given); save one minimized reproducer per kind of finding in ``out``."""
    from .adapters import BUILTIN

    if count is None and seconds is None:
        raise ValueError("give count, seconds or both")
    fmt = fmt or (BUILTIN[against][2] if against in BUILTIN else "gguf")
    other = reader_name(against)
    profile = profile or ("ggml" if against in ("ggml", "llama.cpp") else "spec")
    if fmt == "safetensors":
        ours_reader = "ours-safetensors"
    elif against not in BUILTIN and "{}" in against:  # a one-shot command prints info --json's shape
        ours_reader = "ours-info"
    else:  # a line-protocol target answers views (llama.cpp's has no dequantized values to compare)
        ours_reader = "ours-metadata" if against == "llama.cpp" else "ours"
    ours = _python_worker(ours_reader, profile, memory_mb, timeout)
    theirs = target(against, profile, timeout=timeout, memory_mb=memory_mb, guard=guard, send=send)
    patterns = known or []
    report = Report()
    start = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="gguf-construct-fuzz-")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    counter = 0
    suffix = ".safetensors" if fmt == "safetensors" else ".gguf"

    def ask(data: bytes) -> Callable[[], list[Finding]]:
        """Send ``data`` to both readers (they work on it at the same time); the returned call collects the verdict."""
        nonlocal counter
        counter += 1
        path = os.path.join(scratch, f"{counter % 4}{suffix}")
        with open(path, "wb") as f:
            f.write(data)
        sent = [t.send(path, data) for t in (ours, theirs)]

        def verdict() -> list[Finding]:
            answers: list[Answer] = [t.receive() if ok else t.died() for t, ok in zip((ours, theirs), sent)]
            return findings(answers[0], answers[1], other)

        return verdict

    def judge(data: bytes) -> list[Finding]:
        return ask(data)()

    def out_of_time() -> bool:
        return seconds is not None and time.monotonic() - start > seconds

    files = inputs(seed, corpus_files(corpus, fmt), fmt)
    try:
        upcoming = next(files, None)
        while upcoming is not None and not (count is not None and report.files >= count) and not out_of_time():
            name, data = upcoming
            verdict = ask(data)
            upcoming = next(files, None)  # made while the readers read
            found = verdict()
            report.files += 1
            if not found:
                report.agreed += 1
            heavy = any(f.cls == "memory" for f in found)
            for f in found:
                kind = report.kinds.get(f.signature)
                if kind is None:
                    kind = report.kinds[f.signature] = Kind(f.cls, f.signature, f.explanation, name, heavy=heavy)
                    kind.known = any(f.signature == p or fnmatch.fnmatchcase(f.signature, p) for p in patterns)
                    kind.causes.append(quantity_of(name))
                    if out is not None and not kind.known:
                        # minimizing stays inside --seconds: more kinds (boundary files find many) must not stretch the run
                        left = minimize_seconds if seconds is None else min(minimize_seconds, seconds - (time.monotonic() - start))
                        budget = minimize_budget if left > 0 else 0
                        save(kind, data, judge, out, len(report.kinds), suffix, budget, max(left, 0.0), files_under(corpus))
                    if log and not kind.known:
                        log(f"new {kind.cls}: {kind.reproducer or kind.signature}: {kind.explanation}")
                elif out is not None and not kind.known and kind.wants(cause := quantity_of(name), heavy):
                    kind.causes.append(cause)  # kept as found: minimizing could lose the quantity that broke
                    save_more(
                        kind, data, name, out, list(report.kinds).index(f.signature) + 1, len(kind.causes), suffix, files_under(corpus)
                    )
                kind.count += 1
    finally:
        for t in (ours, theirs):
            t.close()
            side_log = getattr(t, "side_log", None)
            if side_log:
                os.unlink(side_log)
        for leftover in os.listdir(scratch):
            os.unlink(os.path.join(scratch, leftover))
        os.rmdir(scratch)
    report.seconds = time.monotonic() - start
    report.restarts = {"ours": getattr(ours, "restarts", 0), other: getattr(theirs, "restarts", 0)}
    report.hang_cpu = sum(getattr(t, "hang_cpu", 0.0) for t in (ours, theirs))
    return report


def save_more(kind: Kind, data: bytes, origin: str, out: Path, number: int, nth: int, suffix: str, corpus: list[str]) -> None:
    """A further reproducer of a kind (``NNN-signature-K``), unminimized, with its own line of findings.tsv."""
    name = f"{number:03d}-{_slug(kind.signature)}-{nth}{suffix}"
    write_atomic(out / name, lambda f: f.write(data), inputs=corpus)
    check_output(out / "findings.tsv", corpus)
    cells = (name, str(len(data)), kind.cls, kind.signature, kind.explanation.replace("\t", " "), f"from {origin}")
    with open(out / "findings.tsv", "a", encoding="utf-8") as f:
        f.write("\t".join(c.replace("\n", " ") for c in cells) + "\n")


def save(
    kind: Kind,
    data: bytes,
    judge: Callable[[bytes], list[Finding]],
    out: Path,
    number: int,
    suffix: str,
    budget: int,
    seconds: float,
    corpus: list[str],
) -> None:
    """Minimize the file of a new kind, write it and its line of findings.tsv (reproducer, size, class, signature,
    explanation, origin). The output guard: neither may be a ``corpus`` file (the reproducer is written atomically)."""

    def keeps(candidate: bytes) -> bool:
        return any(f.signature == kind.signature for f in judge(candidate))

    small = minimize(data, keeps, budget, seconds) if budget > 0 else data
    if small != data:
        final = next((f for f in judge(small) if f.signature == kind.signature), None)
        if final is None:  # a flaky finding (a hang near the limit): keep the original file
            small = data
        else:
            kind.explanation = final.explanation
    kind.reproducer = f"{number:03d}-{_slug(kind.signature)}{suffix}"
    write_atomic(out / kind.reproducer, lambda f: f.write(small), inputs=corpus)
    check_output(out / "findings.tsv", corpus)
    with open(out / "findings.tsv", "a", encoding="utf-8") as f:
        f.write(
            "\t".join(
                (kind.reproducer, str(len(small)), kind.cls, kind.signature, kind.explanation.replace("\t", " "), f"from {kind.origin}")
            )
            + "\n"
        )
