"""Minimization cost and result: one differential campaign run twice, with byte-chunk deletion (``ddmin``) and
with schema-first minimization (``gguf_construct.testing.fuzzing.minimize``), the same seed, files and call budget.

Prints the campaign's seconds with ``--out`` (minimization included) and the reproducers' sizes for each, and the
ratio. Run from the repository root: ``python benchmarks/bench_minimize.py [--count 150] [--against gguf-py]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from gguf_construct.testing.fuzzing import runner
from gguf_construct.testing.fuzzing.minimize import ddmin


def campaign(label: str, args: argparse.Namespace, out: Path) -> tuple[float, list[int]]:
    start = time.monotonic()
    report = runner.run(args.against, count=args.count, seed=args.seed, out=out, minimize_budget=args.budget)
    took = time.monotonic() - start
    sizes = [(out / f.reproducer).stat().st_size for f in report.findings.values() if f.reproducer]
    print(
        f"{label}: {report.files} files, {len(report.findings)} kinds, {took:.1f} s; reproducers: total {sum(sizes)} B, "
        f"median {statistics.median(sizes) if sizes else 0:.0f} B, max {max(sizes, default=0)} B",
        flush=True,
    )
    return took, sizes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=int, default=150, help="predicate calls per finding (the fuzz command's default)")
    p.add_argument("--against", default="gguf-py")
    p.add_argument("--quick", action="store_true", help="a few files and calls: checks the script")
    a = p.parse_args()
    if a.quick:
        a.count, a.budget = 6, 10
    with tempfile.TemporaryDirectory() as tmp:
        schema_first = runner.minimize
        runner.minimize = lambda data, same, budget, seconds: ddmin(data, same, budget, deadline=time.monotonic() + seconds)  # type: ignore[assignment]
        t_bytes, s_bytes = campaign("byte-chunk deletion", a, Path(tmp) / "bytes")
        runner.minimize = schema_first  # type: ignore[assignment]
        t_schema, s_schema = campaign("schema first", a, Path(tmp) / "schema")
    print(f"schema first / byte-chunk: time {t_schema / t_bytes:.2f}, reproducer bytes {sum(s_schema) / max(1, sum(s_bytes)):.2f}")


if __name__ == "__main__":
    main()
