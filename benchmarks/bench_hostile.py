"""Crafted inputs against the reader: peak Python allocation per input byte and CPU seconds.

    python benchmarks/bench_hostile.py [--before DIR] [--timeout S] [NAME ...]
    python benchmarks/bench_hostile.py --remote [--before DIR] [--timeout S]
    python benchmarks/bench_hostile.py --leftovers [DIR]

Each input of ``gguf_construct.testing.strategies.hostile.HOSTILE`` (default: the amplification and quadratic classes)
is written to a file and loaded leniently in a fresh process under ``tracemalloc``. ``--before DIR`` also runs
the reader of another checkout (e.g. ``git worktree add /tmp/before b25aa4f``) on the same bytes, so both
columns come from one run. Prints the markdown table of docs/security.md's "Figures" section.

``--remote``: the remote fan-out rows instead (``remote_rows``): ``info`` on a gguf-split URL served by the
loopback test server, whose shards are made on demand and lie in the ways named in the table; per row the
requests and bytes the server saw, the child's peak RSS and wall time, and how it ended.

    python benchmarks/bench_hostile.py --templates [--quick]
    python benchmarks/bench_hostile.py --outputs [--before DIR] [--quick]
    python benchmarks/bench_hostile.py --fuzz

``--fuzz``: ``gguf-construct fuzz`` against a reader that attacks it (tests/fuzz_targets/hostile_reader.py) and
with --known and --output paths that are not what they seem, and signals: how each run ended, the fuzzer's peak
RSS and time, and what it left behind.

Chat templates that exhaust a renderer (``TEMPLATE_EXHAUSTION``): the scan's CPU time on each (best of 5) and
its finding, beside what Jinja2's SandboxedEnvironment does with the same template in a child process limited
to ``--render-cpu`` CPU seconds and 512 MiB (killed at the limit, or MemoryError): the scan flags in
milliseconds what the renderer cannot finish. Then ``TEMPLATE_GROWTH`` (``template_growth_rows``): string growth,
conversation-sized cost and attribute paths given by position, each with its static finding, what the dynamic
check (``scan_template(render=True)``) adds, and the bounded render's fate.

``--outputs``: the output rule (a FIFO, a device, a link to a process's descriptor named as ``-o``; ``--value-file V
-o V``), Ollama names as paths (``--model m:/abs/file``, ``m:../../x``), ``safe_open`` of a FIFO, a 600-blob Ollama
model under 1,024 open files, and a hostile loopback server (redirect loops and 503s with 300 MB bodies under
``--max-bytes 1000000``, a chunked download under ``--max-memory 8 MiB``): how each ended, what survived, what it
cost (requests, MB the server sent, peak RSS, seconds).

    python benchmarks/bench_hostile.py --plan [--quick]

``plan`` on hostile headers and requests (``plan_rows``): a header of 512 layers with ``--n-gpu-layers auto``, the
same with 30,000 one-element tensors more, keys of the wrong type or value, an architecture named like the
memory table's own note, and numbers past llama.cpp's limits; per row the exit code, wall seconds and the first
line of stderr, from a fresh process. ``--quick``: 64 layers and 3,000 more tensors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gguf_construct.testing.strategies.hostile import HOSTILE  # noqa: E402

DEFAULT = [
    "gguf-empty-arrays",
    "gguf-empty-keys",
    "gguf-tensor-infos",
    "st-braces",
    "ggml-zeros",
    "st-60k-bad-entries",
    "gguf-60k-huge-dims",
    "st-deep-json",
]

PROBE = """
import json, sys, time, tracemalloc
import gguf_construct as gc
path = sys.argv[1]
tracemalloc.start()
start = time.process_time()
try:
    f = gc.load(path, strict=False)
    for t in f.tensors.values():
        t.shape
    result = "loaded"
except Exception as e:
    result = getattr(e, "rule", type(e).__name__)
cpu = time.process_time() - start
print(json.dumps({"peak": tracemalloc.get_traced_memory()[1], "cpu": cpu, "result": result}))
"""


def probe(source: Path, path: Path, timeout: float) -> str:
    try:
        out = subprocess.run(
            [sys.executable, "-c", PROBE, str(path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=source,
            env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"},
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return f"over {timeout:.0f} s"
    except (IndexError, ValueError):
        return "crashed"
    return f"{r['peak'] / path.stat().st_size:.1f}×, {r['cpu']:.2f} s, {r['result']}"


# -- remote fan-out --------------------------------------------------------------------------------------------
def _shard(no: int, count: int, tensors: int, floats: int = 16) -> bytes:
    """A gguf-split shard saying ``split.no``/``split.count``, with one tensor of ``floats`` float32s."""
    import numpy as np

    import gguf_construct as gc
    from gguf_construct.formats.gguf.schema import GGUF

    f = gc.new()
    if no == 0:
        f.metadata["general.architecture"] = "llama"
    f.metadata.set("split.no", no, type="u16")
    f.metadata.set("split.count", count, type="u16")
    f.metadata.set("split.tensors.count", tensors, type="i32")
    f.tensors.add(f"t{no}", np.full(floats, no, np.float32))
    return GGUF.build(f.to_container())


#: (row, URL name, shard i -> (split.no, split.count, split.tensors.count), extra CLI arguments); every shard
#: holds 1 MiB of tensor data, more than a first read asks for
REMOTE_CASES = [
    ("name says 99999, shards say 3", "m-00001-of-99999.gguf", lambda i: (min(i, 2), 3, 3), []),
    ("65535 shards that agree", "m-00001-of-65535.gguf", lambda i: (i, 65535, 65535), []),
    (
        "65535 that agree, --max-requests 100000 --max-seconds 4",
        "m-00001-of-65535.gguf",
        lambda i: (i, 65535, 65535),
        ["--max-requests", "100000", "--max-seconds", "4"],
    ),
    ("shard 40 of 64 says split.no 3", "m-00001-of-00064.gguf", lambda i: (3 if i == 39 else i, 64, 64), []),
    ("64 honest shards", "m-00001-of-00064.gguf", lambda i: (i, 64, 64), []),
]


def _peak_rss_mib(pid: int) -> float:
    """The process's peak RSS so far (``VmHWM``: its own image's, from exec on; ``ru_maxrss`` of a child would
    count the forking parent's pages too)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration, ValueError):
        return 0.0


def _run_measured(argv: list[str], source: Path, timeout: float) -> tuple[str, float, float]:
    """(how it ended, peak RSS in MiB, seconds) of a child process, polled every 20 ms; killed at ``timeout``."""
    import time

    started = time.monotonic()
    child = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=source, env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"}
    )
    ended, peak = "", 0.0
    while child.poll() is None:
        peak = max(peak, _peak_rss_mib(child.pid))
        if time.monotonic() - started > timeout:
            child.kill()
            child.wait()
            ended = f"killed at {timeout:g} s"
            break
        time.sleep(0.02)
    seconds = time.monotonic() - started
    err = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if not ended:
        rule = err.split("[", 1)[1].split("]", 1)[0] if "[" in err else ""
        ended = f"exit {child.returncode}" + (f" [{rule}]" if rule else "") + (" (traceback)" if "Traceback" in err else "")
    return ended, peak, seconds


def remote_rows(before: Path | None, timeout: float) -> None:
    """The remote fan-out table: requests, bytes served, peak RSS under the default budget."""
    from functools import cache

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the loopback test server lives with the tests
    from http_testserver import TestServer

    print("| case | tree | requests | MB served | peak RSS MiB | seconds | ended |")
    print("|---|---|---:|---:|---:|---:|---|")
    for label, name, says, extra in REMOTE_CASES:
        for tree in ([("before", before)] if before and not extra else []) + [("after", ROOT)]:  # (the flags are new)
            with TestServer() as server:
                make = cache(lambda i, says=says: _shard(*says(i), floats=1 << 18) if i < 64 else None)  # 64 cached, the rest made anew

                def serve(path: str, make: Any = make, says: Any = says) -> bytes:
                    i = int(path.rsplit("-of-", 1)[0][-5:]) - 1
                    return make(i) or _shard(*says(i), floats=1 << 18)

                server.generate("/set/", serve)
                argv = [sys.executable, "-m", "gguf_construct.cli.main", *extra, "info", server.url(f"/set/{name}")]
                ended, rss, seconds = _run_measured(argv, tree[1], timeout)
                print(
                    f"| {label} | {tree[0]} | {server.counts.requests} | {server.counts.bytes / 1e6:.2f} "
                    f"| {rss:.0f} | {seconds:.1f} | {ended} |",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=DEFAULT)
    ap.add_argument("--before", type=Path, help="another checkout whose reader to measure too")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help="the two smallest inputs: checks the script")
    ap.add_argument("--remote", action="store_true", help="the remote fan-out rows instead")
    ap.add_argument("--templates", action="store_true", help="the chat template exhaustion rows instead")
    ap.add_argument("--render-cpu", type=int, default=2, help="CPU seconds a template render may take (--templates)")
    args = ap.parse_args()
    if args.remote:
        return remote_rows(args.before, 15.0 if args.timeout == 300 else args.timeout)
    if args.templates:
        template_rows(args.render_cpu if not args.quick else 1, quick=args.quick)
        template_growth_rows(args.render_cpu if not args.quick else 1, quick=args.quick)
        return
    if args.quick:
        args.names = sorted(DEFAULT, key=lambda n: len(next(h for h in HOSTILE if h.name == n).make()))[:2]
    by_name = {h.name: h for h in HOSTILE}
    suffix = {"gguf": ".gguf", "safetensors": ".safetensors", "ggml": ".bin", "ggjt": ".bin", "rwkv": ".bin"}
    print("| input | size | " + ("before | " if args.before else "") + "after |")
    print("|---|---:|" + ("---|" if args.before else "") + "---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            h = by_name[name]
            path = Path(tmp) / f"{name}{suffix[h.format]}"
            path.write_bytes(h.make())
            cells = [name, f"{path.stat().st_size / 1e6:.1f} MB"]
            if args.before:
                cells.append(probe(args.before, path, args.timeout))
            cells.append(probe(ROOT, path, args.timeout))
            print("| " + " | ".join(cells) + " |", flush=True)


# ---- chat templates that exhaust a renderer: the scanner's time and finding against a bounded render

TEMPLATE_EXHAUSTION = {
    "nested range(100000) loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "loops through a macro": "{% macro f() %}{% for i in range(100000) %}{% endfor %}{% endmacro %}{% "
    "for i in range(100000) %}{{ f() }}{% endfor %}",
    "'x' * 10**10": "{{ 'x' * 10**10 }}",
    "[0] * 10**9": "{{ ([0] * 10**9)|length }}",
    "'x'|center(10**10)": "{{ 'x'|center(10**10) }}",
    "printf width 10**9": "{{ '%01000000000d' % 1 }}",
    "10 ** (10 ** 10)": "{{ 10 ** (10 ** 10) }}",
    "string doubling in a loop": "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s "
    "= ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
    "exponential macro recursion": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
    "caller recursion": "{% macro g() %}{{ caller() }}{{ caller() }}{% endmacro %}{% macro f(n) %}{% if n %}{% call "
    "g() %}{{ f(n - 1) }}{% endcall %}{% endif %}{% endmacro %}{{ f(60) }}",
    "loop appending to its list": "{% set l = [1] %}{% for x in l %}{% set _ = l.append(x) %}{% endfor %}",
    "lipsum(10**7)": "{{ lipsum(10**7) }}",
}

RENDER = """
import resource, sys, time
cpu = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
import jinja2.sandbox
env = jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.loopcontrols"])
start = time.process_time()
try:
    env.from_string(sys.stdin.read()).render()
    print("rendered in %.2f s" % (time.process_time() - start))
except MemoryError:
    print("MemoryError after %.2f s" % (time.process_time() - start))
except Exception as e:
    print("%s after %.2f s" % (type(e).__name__, time.process_time() - start))
"""


def template_rows(render_cpu: int, quick: bool = False) -> None:
    """One row per exhaustion form: scan time and finding, and the bounded sandboxed render's fate."""
    import time

    from gguf_construct.security.chat_templates import scan_template

    forms = list(TEMPLATE_EXHAUSTION.items())[: 2 if quick else None]
    print(f"| template | scan (best of 5) | finding | sandboxed render (limit {render_cpu} s CPU, 512 MiB) |")
    print("|---|---:|---|---|")
    for label, text in forms:
        times = []
        for _ in range(5):
            start = time.process_time()
            findings = scan_template(text)
            times.append(time.process_time() - start)
        rules = ", ".join(sorted({f.rule for f in findings})) or "none"
        try:
            child = subprocess.run(
                [sys.executable, "-c", RENDER, str(render_cpu)], input=text, capture_output=True, text=True, timeout=render_cpu * 10 + 30
            )
            fate = child.stdout.strip() or f"killed at the CPU limit (signal {-child.returncode})"
        except subprocess.TimeoutExpired:
            fate = "over the wall-clock timeout"
        print(f"| `{label}` | {min(times) * 1e3:.2f} ms | {rules} | {fate} |", flush=True)


# ---- chat templates: string growth, cost sized by the conversation, attribute paths given by position

TEMPLATE_GROWTH = {
    "a ~ a doublings, no loop": "{% set s0 = 'x' * 1000 %}"
    + "".join(f"{{% set s{i + 1} = s{i} ~ s{i} %}}" for i in range(22))
    + "{{ s22|length }}",
    "Fibonacci set chain": "{% set f0 = 'xxxxxxxxxx' %}{% set f1 = f0 %}"
    + "".join(f"{{% set f{i} = f{i - 1} ~ f{i - 2} %}}" for i in range(2, 45))
    + "{{ f44|length }}",
    "replace('', s)": "{% set s = 'x' * 30000 %}{{ s.replace('', s)|length }}",
    "[s, s]|join loop": "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = [ns.s, ns.s]|join %}{% endfor %}",
    "'%s%s'|format loop": "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = '%s%s'|format(ns.s, ns.s) %}{% endfor %}",
    "tojson(indent=100000)": "{{ range(100000)|list|tojson(indent=100000)|length }}",
    "indent(<100 KB string>)": "{{ (range(100000)|join('\\n'))|indent('x' * 100000)|length }}",
    "nested range()|join": "{{ (range(100000)|join(range(100000)|join))|length }}",
    "loops cubed over messages": "{% for a in messages %}{% for b in messages %}{% for c in messages %}{{ a.role }}"
    "{% endfor %}{% endfor %}{% endfor %}",
    "join by position -> os.environ": "{{ [cycler]|join('', '__init__.__globals__.os.environ') }}",
    "sum by position -> __mro__": "{{ ['x']|sum('__class__.__mro__', ()) }}",
}


def template_growth_rows(render_cpu: int, quick: bool = False) -> None:
    """One row per ``TEMPLATE_GROWTH`` form: static scan time and findings, the dynamic check's findings and
    time, and what a bounded sandboxed render of it does (with a 200-message conversation)."""
    import time

    from gguf_construct.security.chat_templates import scan_template

    forms = list(TEMPLATE_GROWTH.items())[: 2 if quick else None]
    print()
    print(f"| template | static scan | static finding | dynamic check | sandboxed render (limit {render_cpu} s CPU, 512 MiB) |")
    print("|---|---:|---|---|---|")
    for label, text in forms:
        start = time.process_time()
        found = scan_template(text)
        took = time.process_time() - start
        static = ", ".join(sorted({f.rule for f in found if f.severity == "error"})) or "none"
        start = time.monotonic()
        dynamic = ", ".join(sorted({f.rule for f in scan_template(text, render=True)} - {f.rule for f in found})) or "nothing more"
        dynamic += f" ({time.monotonic() - start:.1f} s)"
        script = RENDER.replace(".render()", ".render(messages=[{'role': 'user', 'content': 'x'}] * 200)")
        try:
            child = subprocess.run(
                [sys.executable, "-c", script, str(render_cpu)], input=text, capture_output=True, text=True, timeout=render_cpu * 10 + 30
            )
            fate = child.stdout.strip() or f"killed at the CPU limit (signal {-child.returncode})"
        except subprocess.TimeoutExpired:
            fate = "over the wall-clock timeout"
        shown = label.replace("|", "\\|")  # a pipe in a markdown cell
        print(f"| `{shown}` | {took * 1e3:.1f} ms | {static} | {dynamic} | {fate} |", flush=True)


# -- strings, truncated files, outputs onto inputs ----------------------------------------------------------------
#: ``--leftovers``: the short-strings amplification (as the table above) and what the commands make of a file cut
#: inside its tensor data and of an output that is the input. One line each, from fresh processes.
LEFTOVER_COMMANDS = {
    "info of a file cut in its tensor data": ["info", "{cut}"],
    "hash of a file cut in its tensor data": ["hash", "{cut}"],
    "dequant onto a hard link of the input": ["dequant", "{model}", "{hard}"],
    "scan --output naming the scanned model": ["scan", "{model}", "--output", "{model}"],
}


def leftover_rows(source: Path, timeout: float) -> None:
    """Markdown rows: the ``st-short-strings`` input through ``probe``, then each of ``LEFTOVER_COMMANDS``' exit
    code, first line of stderr and whether the input survived (sha256 before and after)."""
    import hashlib
    import os

    from gguf_construct.data import example_path

    with tempfile.TemporaryDirectory() as tmp:
        h = next(h for h in HOSTILE if h.name == "st-short-strings")
        path = Path(tmp) / "st-short-strings.safetensors"
        path.write_bytes(h.make())
        print(f"| st-short-strings | {path.stat().st_size / 1e6:.1f} MB | {probe(source, path, timeout)} |")
        model = Path(tmp) / "m.npz"  # a GGUF named so that dequant's suffix rule lets the guard speak
        data = Path(example_path()).read_bytes()
        cut = Path(tmp) / "cut.gguf"
        cut.write_bytes(data[: len(data) - len(data) // 4])
        for what, argv in LEFTOVER_COMMANDS.items():
            model.write_bytes(data)
            hard = Path(tmp) / "hard.npz"
            hard.unlink(missing_ok=True)
            os.link(model, hard)
            before = hashlib.sha256(model.read_bytes()).hexdigest()
            args = [a.format(cut=cut, model=model, hard=hard) for a in argv]
            r = subprocess.run(
                [sys.executable, "-m", "gguf_construct.cli.main", *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=source,
                env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"},
            )
            err = (r.stderr.strip().splitlines() or [""])[-1][:110].replace("|", "\\|").replace(tmp, "")
            kept = hashlib.sha256(model.read_bytes()).hexdigest() == before if model.stat().st_size else False
            print(f"| {what} | exit {r.returncode} | {err} | input {'intact' if kept else 'DESTROYED'} |", flush=True)


# -- outputs, inputs, names, remote budgets ------------------------------------------------------------------------
#: ``--outputs [--before DIR] [--quick]``: each class of the output rule, the names-as-paths checks, safe_open and the
#: transport budgets, run by fresh processes of a checkout; per row how it ended and what survived or was spent.


def _outputs_case(source: Path, tmp: Path, case: str, quick: bool, timeout: float) -> str:
    """One row's cells after the case name for the checkout ``source``: how it ended and what it cost."""
    import hashlib
    import os
    import shutil
    import stat
    import threading
    import time

    from gguf_construct.data import example_path

    sys.path.insert(0, str(ROOT / "tests" / "sources"))
    from test_transport_budget import Hostile

    work = tmp / case.replace(" ", "-").replace("/", "_")
    work.mkdir()
    model = work / "m.gguf"
    shutil.copy(example_path(), model)
    env = {"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"}

    def cli(*argv: str, rlimit: int | None = None) -> tuple[str, float, float]:
        pre = ["prlimit", f"--nofile={rlimit}", "--"] if rlimit else []
        return _run_measured([*pre, sys.executable, "-m", "gguf_construct.cli.main", *argv], source, timeout)

    def kind(path: Path) -> str:
        try:
            st = os.lstat(path)
        except OSError:
            return "absent"
        return {stat.S_IFIFO: "FIFO", stat.S_IFCHR: "device", stat.S_IFLNK: "symlink", stat.S_IFREG: "regular file"}.get(
            stat.S_IFMT(st.st_mode), "other"
        )

    if case in ("FIFO as -o", "device as -o", "link to a descriptor as -o"):
        out = work / "out"
        if case == "FIFO as -o":
            os.mkfifo(out)
        elif case == "device as -o":
            if os.geteuid() != 0:
                return "needs root | |"
            os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        else:
            out.symlink_to("/proc/self/fd/1")
        before = kind(out)
        ended, _, _ = cli("set", str(model), "general.name", "x", "-o", str(out))
        return f"{ended} | {before} → {kind(out)}"
    if case == "--value-file V -o V":
        value = work / "v.txt"
        value.write_text("name")
        ended, _, _ = cli("set", str(model), "general.name", "--value-file", str(value), "-o", str(value))
        return f"{ended} | value file {'intact' if value.read_bytes() == b'name' else 'REPLACED'}"
    if case.startswith("--model "):
        victim = work / "victim"
        victim.write_text("keep")
        name = f"m:{victim}" if case.endswith("/abs/file") else "m:../../../../" + str(victim.relative_to("/"))
        store = work / "store"
        before = hashlib.sha256(victim.read_bytes()).hexdigest()
        ended, _, _ = cli("convert", str(model), f"{store}/", "--model", name)
        strays = [p for p in store.rglob("*") if p.is_file() and p.relative_to(store).parts[0] not in ("manifests", "blobs")]
        intact = hashlib.sha256(victim.read_bytes()).hexdigest() == before
        where = f"{len(strays)} files outside OUT/manifests"
        return f"{ended.replace('[-h]', '(usage)')} | victim {'intact' if intact else 'OVERWRITTEN'}, {where}"
    if case == "safe_open of a FIFO":
        fifo = work / "m.safetensors"
        os.mkfifo(fifo)
        code = (
            f"import sys, gguf_construct as gc\ntry:\n    gc.safe_open({str(fifo)!r})\n"
            "except gc.FormatError as e:\n    sys.exit(f'[{e.rule}]')"
        )
        ended, _, seconds = _run_measured([sys.executable, "-c", code], source, min(timeout, 10.0))
        return f"{ended} | {seconds:.1f} s"
    if case == "600-blob Ollama model, 1024 files":
        code = (
            "import numpy as np\nfrom gguf_construct.api import ollama_model as o\nfrom gguf_construct.formats.safetensors.schema "
            "import SAFETENSORS as S\nb=[(f't{i}', S.build({'tensors': {f't{i}': {'dtype': 'F32', 'shape': [2], 'data': "
            f"np.zeros(2, np.float32)}}}}, 'style': 'ollama'}})) for i in range(600)]\nprint(o.write_model({str(work)!r}, 'm', b, {{}}))"
        )
        manifest = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=source, env=env).stdout.strip()
        ended, rss, _ = cli("validate", manifest, rlimit=1024)
        return f"{ended} | peak {rss:.0f} MiB"
    # remote: a hostile loopback server
    mode, size = {
        "302 loop, 300 MB bodies": ("redirect", 0),
        "503 x5, 300 MB bodies": ("503", 0),
        "chunked download": ("chunked", (32 if quick else 256) << 20),
    }[case]
    server = Hostile(mode, size)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        extra = ["--download", "--max-memory", str(8 << 20)] if mode == "chunked" else ["--max-bytes", "1000000"]
        started = time.monotonic()
        ended, rss, _ = cli("info", server.url, *extra)
        seconds = time.monotonic() - started
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()
    return f"{ended} | {server.requests} requests, {server.sent / 1e6:.1f} MB sent, peak {rss:.0f} MiB, {seconds:.1f} s"


OUTPUT_CASES = (
    "FIFO as -o",
    "device as -o",
    "link to a descriptor as -o",
    "--value-file V -o V",
    "--model m:/abs/file",
    "--model m:../../../../x",
    "safe_open of a FIFO",
    "600-blob Ollama model, 1024 files",
    "302 loop, 300 MB bodies",
    "503 x5, 300 MB bodies",
    "chunked download",
)


def output_rows(before: Path | None, quick: bool, timeout: float) -> None:
    """``--outputs``: one markdown row per case and checkout (``--before DIR`` first, then this one)."""
    print("| case | tree | ended | what survived, what it cost |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in OUTPUT_CASES:
            for label, tree in ([("before", before)] if before else []) + [("after", ROOT)]:
                folder = Path(tmp) / label
                folder.mkdir(exist_ok=True)
                print(f"| {case} | {label} | {_outputs_case(tree, folder, case, quick, timeout)} |", flush=True)


# -- plan ---------------------------------------------------------------------------------------------------------
def _plan_header(path: Path, n_layer: int, n_extra: int = 0, **keys: Any) -> Path:
    """A llama header of ``n_layer`` zero-filled layers (tests/tiny_models.py), ``n_extra`` one-element tensors
    more, ``keys`` set as they are (``general.architecture`` included)."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_models import llama, zero_filled

    f = zero_filled(llama, n_layer=n_layer, n_embd=64, n_ff=128, n_head=2, n_head_kv=2, n_vocab=64)
    for i in range(n_extra):
        f.tensors.add(f"extra.{i}", np.zeros(1, dtype=np.float32))
    for key, (value, kind) in keys.items():
        f.metadata.set(key, value, type=kind)
    f.save(path, keep_valid=False)
    return path


def _header_mb(path: Path) -> str:
    import gguf_construct as gc

    with gc.load(path, strict=False) as f:
        return f"{f.data_offset / 1e6:.2f} MB"


def plan_rows(quick: bool, timeout: float = 120) -> None:
    """Markdown rows: what ``plan`` does with each hostile header or request, and how long it takes (the child's
    CPU seconds, which a loaded machine does not inflate, and its wall seconds)."""
    import resource
    import time

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    n_layer, n_extra = (64, 3_000) if quick else (512, 30_000)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        deep = _plan_header(t / "deep.gguf", n_layer)
        wide = _plan_header(t / "wide.gguf", n_layer, n_extra)
        small = _plan_header(t / "small.gguf", 2)
        auto = ["--n-gpu-layers", "auto", "--gpu-mem", "64M"]
        cases = {
            f"{n_layer} layers, auto (header {_header_mb(deep)})": [deep, *auto],
            f"{n_layer} layers and {n_extra:,} tensors more, auto (header {_header_mb(wide)})": [wide, *auto],
            "nextn_predict_layers a string": [_plan_header(t / "s.gguf", 2, **{"llama.nextn_predict_layers": ("x", "str")})],
            "nextn_predict_layers NaN": [_plan_header(t / "n.gguf", 2, **{"llama.nextn_predict_layers": (float("nan"), "f32")})],
            "nextn_predict_layers -5": [_plan_header(t / "m.gguf", 2, **{"llama.nextn_predict_layers": (-5, "i32")})],
            'general.architecture "source"': [_plan_header(t / "a.gguf", 2, **{"general.architecture": ("source", "str")})],
            "--gpu-mem of 400 digits": [small, "--n-gpu-layers", "auto", "--gpu-mem", "9" * 400],
            "--gpu-mem without --n-gpu-layers auto": [small, "--gpu-mem", "8G"],
            "--parallel 1000": [small, "--ctx", "4096", "--parallel", "1000"],
        }
        print("| plan input | exit | CPU s | wall s | stderr |")
        print("|---|---:|---:|---:|---|")
        for what, argv in cases.items():
            start, used = time.monotonic(), cpu()
            r = subprocess.run(
                [sys.executable, "-m", "gguf_construct.cli.main", "plan", *map(str, argv), "--ctx", "512"][
                    : None if "--ctx" not in argv else -2
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=ROOT,
                env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            )
            took, used = time.monotonic() - start, cpu() - used
            err = (r.stderr.strip().splitlines() or [""])[-1][:100].replace("|", "\\|").replace(tmp, "")
            print(f"| {what} | {r.returncode} | {used:.2f} | {took:.2f} | {err} |", flush=True)


# -- the fuzz command against hostile readers and paths ----------------------------------------------------------
#: ``--fuzz``: (what, markers of the corpus files, extra arguments, the --known file's kind, seconds before a signal).
#: The reader is tests/fuzz_targets/hostile_reader.py; every case runs in a fresh working folder and TMPDIR.
FUZZ_CASES: list[tuple[str, list[str], list[str], str, tuple[int, float] | None]] = [
    ("reader prints 48 MiB without a newline", ["FLOOD"], [], "", None),
    ("answer nested 200,000 deep", ["DEEP"], [], "", None),
    ("message forging a findings.tsv row", ["NEWLINE"], [], "", None),
    ("answer that is not UTF-8", ["UTF8"], [], "", None),
    ("reader closes its stdout", ["CLOSE"], [], "", None),
    ("reader forks a child holding the pipes", ["FORK"], [], "", None),
    ("reader never reads (--send bytes)", ["HANG"], ["--send", "bytes", "--reader-flag", "--no-read"], "", None),
    ("--known is a FIFO", ["HANG"], [], "fifo", None),
    ("--known is /dev/zero", ["HANG"], [], "/dev/zero", None),
    ("--known is not UTF-8", ["HANG"], [], "binary", None),
    ("-o holds a foreign findings.tsv", ["HANG"], [], "foreign", None),
    ("-o findings.tsv is a symlink", ["HANG"], [], "symlink", None),
    ("SIGINT while a reader hangs", ["UTF8", "HANG"], [], "", (2, 3.0)),
    ("SIGTERM while a reader hangs", ["UTF8", "HANG"], [], "", (15, 3.0)),
]


def fuzz_rows(source: Path, timeout: float) -> None:
    """One row per ``FUZZ_CASES``: how ``fuzz`` ended, its peak RSS and time, and what it left (entries in TMPDIR
    and the working folder, reader processes alive)."""
    import os
    import signal
    import time

    from gguf_construct import GGUF, new

    def gguf_with(marker: str) -> bytes:
        f = new()
        f.metadata["general.name"] = marker
        return bytes(GGUF.build(f.to_container()))

    print("| case | ended | peak RSS | seconds | left behind |")
    print("|---|---|---:|---:|---|")
    for what, markers, extra, known, signalled in FUZZ_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            work, scratch, corpus, out = (Path(tmp) / d for d in ("work", "tmp", "corpus", "out"))
            for d in (work, scratch, corpus, out):
                d.mkdir()
            for i, m in enumerate(markers):
                (corpus / f"{i}.gguf").write_bytes(gguf_with("HOSTILE:" + m))
            pids = Path(tmp) / "pids"
            flags = [extra[i + 1] for i, a in enumerate(extra) if a == "--reader-flag"]
            extra = [a for i, a in enumerate(extra) if a != "--reader-flag" and (i == 0 or extra[i - 1] != "--reader-flag")]
            reader = f"{sys.executable} {ROOT / 'tests' / 'fuzz_targets' / 'hostile_reader.py'} --pids {pids} {' '.join(flags)}"
            argv = [sys.executable, "-m", "gguf_construct.cli.main", "fuzz", "--against", reader, "--corpus", str(corpus)]
            argv += ["--count", str(len(markers)), "--timeout", "3", "--jobs", "1", "-o", str(out), *extra]
            if known in ("fifo", "binary", "/dev/zero"):
                path = Path(tmp) / "known"
                if known == "fifo":
                    os.mkfifo(path)
                elif known == "binary":
                    path.write_bytes(b"\xff\xfe\x00garbage")
                else:
                    path = Path(known)
                argv += ["--known", str(path)]
            elif known == "foreign":
                (out / "findings.tsv").write_text("my notes\n")
            elif known == "symlink":
                (Path(tmp) / "victim").write_text("keep\n")
                (out / "findings.tsv").symlink_to(Path(tmp) / "victim")
            if signalled:
                argv[argv.index("--count") + 1] = "100"
                argv[argv.index("--timeout") + 1] = "60"
            env = {"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin", "TMPDIR": str(scratch), "HOME": tmp}
            started = time.monotonic()
            child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=work, env=env)
            peak, sent = 0.0, False
            while child.poll() is None and time.monotonic() - started < timeout:
                peak = max(peak, _peak_rss_mib(child.pid))
                if signalled and not sent and time.monotonic() - started > signalled[1] and pids.exists():
                    child.send_signal(signalled[0])
                    sent = True
                time.sleep(0.02)
            if child.poll() is None:
                child.kill()
            child.wait()
            seconds = time.monotonic() - started
            err = child.stderr.read().decode(errors="replace") if child.stderr else ""
            ended = f"exit {child.returncode}" + (" (traceback)" if "Traceback" in err else "")
            time.sleep(0.5)
            alive = []
            for pid in (int(p) for p in pids.read_text().split()) if pids.exists() else ():
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            alive.append(pid)
                except OSError:
                    pass
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)  # the measurement leaves nothing either
            left = [f"{len(list(scratch.iterdir()))} in TMPDIR", f"{len(list(work.iterdir()))} in the working folder"]
            left.append(f"{len(alive)} reader processes")
            print(f"| {what} | {ended} | {peak:.0f} MiB | {seconds:.1f} | {', '.join(left)} |", flush=True)


if __name__ == "__main__":
    if "--plan" in sys.argv:
        plan_rows("--quick" in sys.argv)
        sys.exit(0)
    if "--outputs" in sys.argv:
        flags = argparse.ArgumentParser()
        flags.add_argument("--outputs", action="store_true")
        flags.add_argument("--before", type=Path)
        flags.add_argument("--quick", action="store_true")
        flags.add_argument("--timeout", type=float, default=120.0)
        known = flags.parse_args()
        output_rows(known.before, known.quick, known.timeout)
    elif "--fuzz" in sys.argv:
        fuzz_rows(ROOT, 120.0)
    elif "--leftovers" in sys.argv:
        at = sys.argv.index("--leftovers")
        other = Path(sys.argv[at + 1]) if len(sys.argv) > at + 1 else ROOT
        leftover_rows(other, 300)
    else:
        main()
