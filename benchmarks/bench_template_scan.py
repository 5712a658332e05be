"""Time chat template scanning (gguf_construct.security.chat_templates.scan_template) against Jinja2 itself.

On the real templates of tests/data/chat_templates (all of them, llama.cpp's included, one after the other) and on a synthetic
template at the size limit (``max_template_bytes`` of schema/template_rules.json, made of one real template
repeated), times, best of ``--repeat``: Jinja2's sandboxed ``parse`` alone, our whole scan (the same parse
plus the data-flow analysis), and Jinja2's ``from_string`` (parse and compile to Python: what a renderer does before it
renders). Prints a markdown table.

    PYTHONPATH=. python benchmarks/bench_template_scan.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from gguf_construct.core.tables import template_rules
from gguf_construct.security.chat_templates import _environment, scan_template

TEMPLATES = sorted((Path(__file__).resolve().parent.parent / "tests" / "data" / "chat_templates").rglob("*.jinja"))


def best(fn: Callable[[str], object], texts: list[str], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``fn`` over every text."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for t in texts:
            fn(t)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one run of each: checks the script")
    args = ap.parse_args()
    if args.quick:
        args.repeat = 1
    warnings.simplefilter("ignore")
    env = _environment()
    real = [p.read_text(encoding="utf-8") for p in TEMPLATES]
    limit = template_rules().max_template_bytes
    unit = next(p for p in TEMPLATES if p.name == "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(encoding="utf-8")
    big = unit * (limit // len(unit.encode("utf-8")))  # whole copies, just under the limit
    cases = [(f"{len(real)} real templates", real), (f"one template of {len(big.encode('utf-8')) // 1024} KiB (near the limit)", [big])]
    print("| input | bytes | Jinja2 parse | our scan (parse + analysis) | Jinja2 from_string (compile) | scan / compile |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, texts in cases:
        size = sum(len(t.encode("utf-8")) for t in texts)
        parse = best(env.parse, texts, args.repeat)
        scan = best(scan_template, texts, args.repeat)
        compile_ = best(env.from_string, texts, args.repeat)
        print(f"| {label} | {size:,} | {parse * 1e3:.1f} ms | {scan * 1e3:.1f} ms | {compile_ * 1e3:.1f} ms | {scan / compile_:.2f} |")


if __name__ == "__main__":
    main()
