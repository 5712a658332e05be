"""What ``import gguf_construct`` and a CLI start-up cost: fresh processes, best of ``--repeat``.

Prints the cumulative microseconds (``python -X importtime``) of the ``gguf_construct`` line, the package's
modules loaded, and the same for ``import numpy, construct`` (the runtime dependencies) as the floor. Then the
command line's start-up: the wall time of ``python -m gguf_construct.cli.main --version``, ``--help``, and
``info``, ``hash`` and ``set ... -o NEW`` on the package's small example file (45 KB), against ``python -c
'import numpy, construct'`` and ``python -c pass`` measured the same way, and the package's modules each command
loads. Children run with bytecode caching allowed
(``PYTHONDONTWRITEBYTECODE`` dropped), as an installed package runs. ``PYTHONPATH=. python
benchmarks/bench_import.py [--repeat 7] [--source DIR]`` (``--source``: another checkout to compare).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Counts the package's modules after running one command in-process (the figure the wall time goes with).
COUNT_MODULES = """
import contextlib, io, sys
from gguf_construct.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:  # --version and --help exit
        pass
print(sum(m.startswith("gguf_construct") for m in sys.modules))
"""


def _env(source: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.path.abspath(source)
    return env


def wall(argv: list[str], source: str, repeat: int) -> float:
    """Best wall time in seconds of ``python argv`` (one untimed run first, which also writes the bytecode)."""
    best = float("inf")
    for i in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], cwd=source, env=_env(source), stdout=subprocess.DEVNULL, check=True)
        if i:
            best = min(best, time.perf_counter() - start)
    return best


def startup(source: str, repeat: int) -> None:
    example = str(Path(source, "gguf_construct", "data", "gguf-construct-example-21K-v1.0-F16.gguf").resolve())
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        commands = {
            "--version": ["--version"],
            "--help": ["--help"],
            "info": ["info", example],
            "hash": ["hash", example],
            "set one key (-o new file)": ["set", example, "general.name", "x", "-o", os.path.join(tmp, "out.gguf")],
        }
        floor = wall(["-c", "import numpy, construct"], source, repeat)
        bare = wall(["-c", "pass"], source, repeat)
        print(f"python -c pass: {bare * 1000:.0f} ms; python -c 'import numpy, construct': {floor * 1000:.0f} ms")
        for label, args in commands.items():
            t = wall(["-m", "gguf_construct.cli.main", *args], source, repeat)
            count = subprocess.run(
                [sys.executable, "-c", COUNT_MODULES, *args], cwd=source, env=_env(source), capture_output=True, text=True, check=True
            )
            print(
                f"CLI {label}{' on example.gguf' if len(args) > 1 else ''}: best {t * 1000:.0f} ms wall "
                f"({(t - bare) * 1000:.0f} ms above python -c pass, {(t - floor) * 1000:.0f} ms above numpy + construct), "
                f"{count.stdout.strip()} gguf_construct modules"
            )


def measure(code: str, top: str, cwd: str) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code + "\nimport sys\nprint(sum(m.startswith('gguf_construct') for m in sys.modules))"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    cumulative = max(int(line.split("|")[1]) for line in done.stderr.splitlines() if line.rstrip().endswith(f"| {top}"))
    return cumulative, int(done.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--source", default=".")
    ap.add_argument("--quick", action="store_true", help="one run of each: checks the script")
    a = ap.parse_args()
    if a.quick:
        a.repeat = 1
    for label, code, top in (
        ("import gguf_construct", "import gguf_construct", "gguf_construct"),
        ("import numpy, construct", "import numpy, construct", "numpy"),
    ):
        runs = [measure(code, top, a.source) for _ in range(a.repeat)]
        print(f"{label}: best {min(r[0] for r in runs) / 1000:.1f} ms cumulative ({top}), {runs[0][1]} gguf_construct modules")
    startup(a.source, a.repeat)


if __name__ == "__main__":
    main()
