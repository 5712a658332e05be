"""``gguf-construct fuzz``: differential fuzzing of another reader against ours, with crash triage.

Exit codes: 0 no new finding, 1 new findings (each kind saved as a minimized reproducer with a one-line
explanation when ``--output`` is given), 2 trouble (usage, a missing optional package, an unusable --known file or
output folder), 130 interrupted by Ctrl-C and 143 by SIGTERM (the summary so far printed, the findings saved).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from .shared import EXIT_BAD as EXIT_FOUND
from .shared import EXIT_OK, EXIT_TROUBLE, command, finite, whole
from .signals import interruptible, status

EXTRA = "pip install 'gguf-construct[fuzz]'"


def _missing(against: str) -> str | None:
    """A one-line message when ``against`` needs a package or a program that is not there (None when all is)."""
    import shlex
    import shutil

    from ..testing.fuzzing.adapters import ADAPTERS, OTHERS

    adapter = ADAPTERS.get(against)
    if adapter is None or not adapter.other:
        try:
            words = shlex.split(against)
        except ValueError as e:
            return f"gguf-construct fuzz: --against {against!r}: {e}"
        if not words or shutil.which(words[0]) is None:
            return f"gguf-construct fuzz: --against: no program {words[0] if words else ''!r} (a built-in reader: {', '.join(OTHERS)})"
        return None
    if adapter.module is None or importlib.util.find_spec(adapter.module) is not None:
        return None
    return f"gguf-construct fuzz: --against {against} needs the {adapter.module} module, which is not installed ({adapter.install})"


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _run(args: argparse.Namespace) -> int:
    from ..testing.fuzzing import run
    from ..testing.fuzzing.findings_file import KnownListError, load_known
    from ..testing.fuzzing.runner import hypothesis_storage

    def fail(message: str) -> int:
        print(message, file=sys.stderr)
        return EXIT_TROUBLE

    if (message := _missing(args.against)) is not None:
        return fail(message)
    if args.compare and not args.out:
        return fail("gguf-construct fuzz: --compare reruns the reproducers of --output: give --output DIR")
    if args.compare and (message := _missing(args.compare)) is not None:
        return fail(message.replace("--against", "--compare"))
    if args.corpus and not Path(args.corpus).is_dir():
        return fail(f"gguf-construct fuzz: --corpus {args.corpus}: no such folder")
    try:
        known = load_known(Path(args.known)) if args.known else []
    except KnownListError as e:
        return fail(f"gguf-construct fuzz: --known: {e}")
    except OSError as e:
        return fail(f"gguf-construct fuzz: --known {args.known}: {e.strerror or e}")
    try:
        import hypothesis  # noqa: F401  (the runner draws files from the strategies with it)

        hypothesis_storage()  # not in the working folder
    except ImportError:
        print(
            "gguf-construct fuzz: note: hypothesis is not installed, so only mutations "
            f"of the seed files run ({EXTRA} adds generated files)",
            file=sys.stderr,
        )
    count = args.count if args.count is not None or args.seconds is not None else 200
    options: dict[str, Any] = dict(
        count=count,
        seconds=args.seconds,
        seed=args.seed,
        out=Path(args.out) if args.out else None,
        corpus=Path(args.corpus) if args.corpus else None,
        profile=args.profile,
        timeout=args.timeout,
        memory_mb=args.memory_mb,
        minimize_budget=args.minimize,
        known=known,
        guard=args.memory_guard,
        send=args.send,
        fmt=args.format,
        jobs=args.jobs or default_jobs(),
        log=(lambda line: print(line, file=sys.stderr)) if args.verbose else None,
    )
    try:
        with interruptible():
            if args.dask:
                from ..testing.fuzzing.cluster import run_dask

                report = run_dask(args.against, args.dask, **options)
            else:
                report = run(args.against, **options)
    except KeyboardInterrupt:  # before the run began, or while it was handing back its report
        print("gguf-construct fuzz: interrupted", file=sys.stderr)
        return status()
    print("\n".join(report.lines()))
    if args.out:
        print(f"reproducers and findings.tsv in {args.out}")
    if report.interrupted:
        return status()
    if args.compare and (Path(args.out) / "findings.tsv").is_file():
        from ..testing.fuzzing.compare import compare, kinds_that_differ

        results = compare(Path(args.out), args.compare, timeout=args.timeout, memory_mb=args.memory_mb, guard=args.memory_guard)
        print("\n".join(r.line() for r in results))
        differ = kinds_that_differ(results)
        print(f"{len(differ)} of {len({r.signature for r in results})} kinds tell the builds apart (--compare {args.compare})")
    return EXIT_FOUND if report.findings else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "fuzz",
        _run,
        description=(
            "Differential fuzzing: seed files, valid files of every shape, files broken one labelled way at a time, and mutations "
            "go through our reader and another one (each a long-lived process under a time limit and a memory guard, restarted "
            "after a crash). Every finding gets a class (crash, dos, hang, memory, accepted-invalid, rejected-valid, value-mismatch, "
            "adapter-representation) and is grouped by root cause; with --output, one minimized reproducer per kind is saved with a "
            "one-line explanation (findings.tsv), and a few more per kind when other files broke it through another derived quantity. "
            "Sanitizer builds: set ASAN_OPTIONS=allocator_may_return_null=1:abort_on_error=1:symbolize=1 (detect_leaks=0 is added "
            "unless you set it: leaks are not looked for) and UBSAN_OPTIONS=print_stacktrace=1 (every 'runtime error:' line is a "
            "finding, whether the reader then accepts, rejects or dies; halt_on_error=1 stops it at the first). "
            "Exit 0: no new finding; 1: new findings; 2: trouble; 130/143: interrupted by "
            "Ctrl-C/SIGTERM (the summary so far printed, the findings saved)."
        ),
    )
    p.add_argument(
        "--against",
        required=True,
        metavar="READER",
        help="gguf-py, ggml (its C reader through ggml-python), llama.cpp (its loader through llama-cpp-python, vocab only), "
        "safetensors (the safetensors library), a long-lived command speaking the line protocol ('node reader.mjs'), or a "
        "command run once per file with {} for the path ('my-reader --json {}')",
    )
    p.add_argument("--count", type=whole(1), help="files to try (default 200 without --seconds; with it, no limit)")
    p.add_argument("--seconds", type=finite(0, most=10**7), help="a deadline for the whole run, minimization included")
    p.add_argument("--seed", type=whole(), default=0, help="random seed: the same seed tries the same files (default 0)")
    p.add_argument(
        "-o",
        "--output",
        dest="out",
        metavar="DIR",
        help="save minimized reproducers and findings.tsv here (a folder with a findings.tsv of fuzz is resumed: its kinds are not saved "
        "again; any other findings.tsv is refused)",
    )
    p.add_argument("--corpus", metavar="DIR", help="files to start from and mutate (default: the seed files shipped with the package)")
    p.add_argument("--known", metavar="FILE", help="signatures (or a findings.tsv) of triaged kinds to silence; * wildcards allowed")
    p.add_argument("--format", choices=("gguf", "safetensors"), help="file format of a command reader (built-in readers know theirs)")
    p.add_argument(
        "--profile", choices=("spec", "ggml"), help="our validation profile (default: ggml against ggml and llama.cpp, else spec)"
    )
    p.add_argument("--timeout", type=finite(0, most=10**6), default=5.0, help="seconds per file per reader (default 5)")
    p.add_argument("--memory-mb", type=whole(1, 2**40), default=2048, help="memory cap of each reader's process (default 2048)")
    p.add_argument(
        "--memory-guard",
        choices=("rss", "data", "as", "none"),
        help="how a command reader's memory is capped: rss (watch the resident size; default, works for sanitizer builds), "
        "data (RLIMIT_DATA), as (RLIMIT_AS: kills ASan builds at start)",
    )
    p.add_argument("--send", choices=("path", "bytes"), default="path", help="line protocol: send each file's path (default) or its bytes")
    p.add_argument("--minimize", type=whole(), default=150, metavar="N", help="reader calls spent minimizing each reproducer (default 150)")
    p.add_argument("--jobs", type=whole(1, 64), metavar="N", help="pairs of readers working at once (default: the cores; at most 64)")
    p.add_argument(
        "--dask",
        metavar="SCHEDULER",
        help="spread the campaign over a Dask cluster (tcp://host:8786; needs the cluster extra): each worker runs slices of it, "
        "the findings are merged here",
    )
    p.add_argument(
        "--compare",
        metavar="CMD",
        help="after the run, rerun the crash, dos, hang and memory reproducers of --output against a second build (a command, "
        "as --against takes it) and report which kinds differ",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print each new kind of finding as it is found")
