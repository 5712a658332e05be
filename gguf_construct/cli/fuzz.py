"""``gguf-construct fuzz``: differential fuzzing of another GGUF reader against ours.

Exit codes: 0 the readers agreed on every file, 1 disagreements were found (each saved as a minimized
reproducer with a one-line explanation when ``--out`` is given), 2 usage (including a reader that is not
installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from .common import EXIT_BAD as EXIT_FOUND
from .common import EXIT_OK, EXIT_TROUBLE, command, finite, whole

_MODULES = {"gguf-py": "gguf", "ggml": "ggml"}


def _run(args: argparse.Namespace) -> int:
    from ..fuzzing import run

    against = args.against
    if against in _MODULES:
        if importlib.util.find_spec(_MODULES[against]) is None:
            print(
                f"gguf-construct fuzz: {against} is not installed (pip install {'gguf' if against == 'gguf-py' else 'ggml-python'})",
                file=sys.stderr,
            )
            return EXIT_TROUBLE
    elif "{}" not in against:
        print("gguf-construct fuzz: --against takes gguf-py, ggml, or a command with {} for the file's path", file=sys.stderr)
        return EXIT_TROUBLE
    report = run(
        against,
        count=args.count,
        seconds=args.seconds,
        seed=args.seed,
        out=Path(args.out) if args.out else None,
        corpus=Path(args.corpus) if args.corpus else None,
        profile=args.profile,
        timeout=args.timeout,
        memory_mb=args.memory_mb,
        minimize_budget=args.minimize,
        log=(lambda line: print(line, file=sys.stderr)) if args.verbose else None,
    )
    print("\n".join(report.lines()))
    if args.out:
        print(f"reproducers and findings.tsv in {args.out}")
    return EXIT_FOUND if report.findings else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "fuzz",
        _run,
        help="run generated and mutated files through another reader and ours, report every disagreement",
        description=(
            "Differential fuzzing: valid files of every shape, files broken one labelled way at a time, and mutations of corpus and "
            "generated files go through our reader and another one (each in its own process, with a time and a memory cap). Every "
            "kind of disagreement (accepted by one and rejected by the other, different keys, values, tensor infos or dequantized "
            "values) is reported; with --out, one minimized reproducer per kind is saved with a one-line explanation (findings.tsv). "
            "Exit 0: no disagreement; 1: disagreements; 2: usage."
        ),
    )
    p.add_argument(
        "--against",
        required=True,
        metavar="READER",
        help="gguf-py, ggml (its C reader through ggml-python), or a command such as 'my-reader --json {}' printing `info --json`'s shape",
    )
    p.add_argument("--count", type=whole(1), default=200, help="files to try (default 200)")
    p.add_argument("--seconds", type=finite(0, most=10**7), help="run for this long instead of --count files")
    p.add_argument("--seed", type=whole(), default=0, help="random seed: the same seed tries the same files (default 0)")
    p.add_argument("--out", metavar="DIR", help="save minimized reproducers and findings.tsv here")
    p.add_argument(
        "--corpus", metavar="DIR", help="real files to mutate (default ../shared/corpus beside the project; files up to 256 KiB)"
    )
    p.add_argument("--profile", choices=("spec", "ggml"), help="our validation profile (default: ggml against ggml, else spec)")
    p.add_argument("--timeout", type=finite(0, most=10**6), default=5.0, help="seconds per file per reader (default 5)")
    p.add_argument("--memory-mb", type=whole(1, 2**40), default=2048, help="address-space cap of each reader's process (default 2048)")
    p.add_argument("--minimize", type=whole(), default=150, metavar="N", help="reader calls spent minimizing each reproducer (default 150)")
    p.add_argument("-v", "--verbose", action="store_true", help="print each new kind of disagreement as it is found")
