"""Time chat template scanning (gguf_construct.security.chat_templates.scan_template) against Jinja2 itself.

On the real templates of tests/data/chat_templates (all of them, llama.cpp's included, one after the other) and on a synthetic
template at the size limit (``max_template_bytes`` of schema/template_rules.json, made of one real template
repeated), times, best of ``--repeat``: Jinja2's sandboxed ``parse`` alone, our whole scan (the same parse
plus the data-flow analysis), and Jinja2's ``from_string`` (parse and compile to Python: what a renderer does before it
renders). Prints a markdown table.

Then the scanner's cost on adversarial templates of up to 256 KiB (CPU time and peak traced memory of one scan,
and its findings: 8,000 chained ``set``, 8,000 ``append`` calls, a template past ``limits.max_nodes``), and the
dynamic check (``scan_template(render=True)``: three sandboxed renders in a child process) per real template.

    PYTHONPATH=. python benchmarks/bench_template_scan.py [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
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
    cost_rows(quick=args.quick)
    render_rows(real[:3] if args.quick else real)


def adversarial() -> dict[str, str]:
    """Templates that made earlier scanners quadratic, each at most ``max_template_bytes``."""
    nodes = template_rules().limits["max_nodes"]
    return {
        "8,000 chained set (v_i = v_i-1)": "{% set v0 = 'x' %}" + "".join(f"{{% set v{i} = v{i - 1} %}}" for i in range(1, 8000)),
        "8,000 chained set with ~": "{% set v0 = 'x' %}" + "".join(f"{{% set v{i} = v{i - 1} ~ 'a' %}}" for i in range(1, 8000)),
        "8,000 append calls": "{% set l = [] %}" + "".join(f"{{% set _{i} = l.append({i}) %}}" for i in range(8000)),
        f"{nodes + 1:,} names in one ~": "{{ " + " ~ ".join(["a"] * (nodes + 1)) + " }}",
    }


def cost_rows(quick: bool = False) -> None:
    """CPU time of one scan, then its peak traced memory in a second scan (tracing slows it several times)."""
    print()
    print("| adversarial template | bytes | scan CPU | peak traced memory | findings |")
    print("|---|---:|---:|---:|---|")
    for label, text in list(adversarial().items())[: 1 if quick else None]:
        start = time.process_time()
        found = scan_template(text)
        took = time.process_time() - start
        tracemalloc.start()
        scan_template(text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rules = ", ".join(sorted({f.rule for f in found})) or "none"
        print(f"| {label} | {len(text.encode()):,} | {took:.2f} s | {peak / 2**20:.0f} MiB | {rules} |", flush=True)


def render_rows(texts: list[str]) -> None:
    times = []
    for text in texts:
        start = time.perf_counter()
        scan_template(text, render=True)
        times.append(time.perf_counter() - start)
    print()
    print("| dynamic check (static scan + 3 sandboxed renders in a child) | templates | mean | max | total |")
    print("|---|---:|---:|---:|---:|")
    print(f"| real templates | {len(times)} | {statistics.mean(times):.2f} s | {max(times):.2f} s | {sum(times):.1f} s |")


if __name__ == "__main__":
    main()
