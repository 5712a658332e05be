"""What ``import gguf_construct`` costs: ``python -X importtime`` in fresh processes, best of ``--repeat``.

Prints the cumulative microseconds of the ``gguf_construct`` line, the package's modules loaded, and the same
for ``import numpy, construct`` (the runtime dependencies) as the floor. ``PYTHONPATH=. python
benchmarks/bench_import.py [--repeat 7] [--source DIR]`` (``--source``: another checkout to compare).
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def measure(code: str, top: str, cwd: str) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code + "\nimport sys\nprint(sum(m.startswith('gguf_construct') for m in sys.modules))"],
                          cwd=cwd, capture_output=True, text=True, check=True)  # fmt: skip
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
    for label, code, top in (("import gguf_construct", "import gguf_construct", "gguf_construct"), ("import numpy, construct", "import numpy, construct", "numpy")):
        runs = [measure(code, top, a.source) for _ in range(a.repeat)]
        print(f"{label}: best {min(r[0] for r in runs) / 1000:.1f} ms cumulative ({top}), {runs[0][1]} gguf_construct modules")


if __name__ == "__main__":
    main()
