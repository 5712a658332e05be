"""Throughput of ``gguf-construct fuzz`` against each shipped adapter, and against a one-shot command for scale.

Each campaign runs for ``--seconds`` in its own process (seed 0, the built-in seed files, default time limit and
memory cap); the table gives files per second of wall time, the CPU time spent per file by every process of the
campaign (ours, the other reader, the generator) once the readers have started (a one-file campaign's cost, the
start-up, is subtracted), and what that CPU cost allows on two otherwise idle cores (``2 / CPU s per file``), with and without the CPU
the readers spent on files they hung on (a reader that loops spends its whole time limit). On a shared machine
the wall rate depends on the load (printed); the CPU cost much less.

    python benchmarks/bench_fuzz.py [--seconds 60] [--quick]    # --quick: 4 s against gguf-py and one-shot only

The Node row needs ``node`` and ``@huggingface/gguf`` (``npm install @huggingface/gguf``; NODE_PATH pointing at
the node_modules folder when it is not in the current folder's).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODE_EXAMPLE = ROOT / "gguf_construct" / "testing" / "fuzzing" / "examples" / "hf_gguf_reader.cjs"
ONE_SHOT = f"{sys.executable} -m gguf_construct.testing.fuzzing.worker --once gguf-py {{}}"

CHILD = """
import json, resource, sys, time
from gguf_construct.testing.fuzzing import run

def cpu():
    whom = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    return sum(getattr(resource.getrusage(who), f) for who in whom for f in ("ru_utime", "ru_stime"))

against, seconds, timeout = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
run(against, count=1, seed=0, timeout=timeout)  # start-up alone (imports of both readers, one file): subtracted below
start_up = cpu()
report = run(against, count=None, seconds=seconds, seed=0, timeout=timeout)
total = cpu() - start_up
hangs = sum(k.count for k in report.kinds.values() if k.cls == "hang")
line = {"files": report.files, "seconds": report.seconds, "cpu": total, "start_up": start_up}
print(json.dumps(line | {"kinds": len(report.kinds), "hangs": hangs, "hang_cpu": report.hang_cpu}))
"""


def node_available() -> bool:
    if shutil.which("node") is None:
        return False
    probe = subprocess.run(["node", "-e", "require.resolve('@huggingface/gguf')"], capture_output=True, timeout=60)
    return probe.returncode == 0


def campaign(against: str, seconds: float, timeout: float) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, against, str(seconds), str(timeout)],
        capture_output=True,
        text=True,
        env=env,
        timeout=seconds * 4 + 300,
    )
    if done.returncode != 0:
        raise SystemExit(f"{against}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="length of each campaign (default 60)")
    p.add_argument("--timeout", type=float, default=1.0, help="seconds per file per reader (default 1: every hang costs this much CPU)")
    p.add_argument("--quick", action="store_true", help="4 s against gguf-py (line protocol and one-shot): a smoke test")
    args = p.parse_args()
    seconds = 4.0 if args.quick else args.seconds
    rows: list[tuple[str, str]] = [("gguf-py", "gguf-py"), ("gguf-py, one-shot command", ONE_SHOT)]
    if not args.quick:
        rows += [
            (name, name)
            for name, module in (("ggml", "ggml"), ("llama.cpp", "llama_cpp"), ("safetensors", "safetensors"))
            if importlib.util.find_spec(module)
        ]
        if node_available():
            rows.append(("@huggingface/gguf (Node, line protocol)", f"node {NODE_EXAMPLE}"))
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.1f} on {os.cpu_count()} CPUs;", end=" ")
    print(f"{seconds:g} s per campaign, time limit {args.timeout:g} s per file\n")
    print("| reader | files | hangs | files/s (wall) | CPU ms per file | files/s on 2 idle cores | the same without the hangs' CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, against in rows:
        # a one-shot command starts an interpreter per file: give it time for that, or every file is a hang
        r = campaign(against, seconds, max(args.timeout, 10.0) if against == ONE_SHOT else args.timeout)
        per_file = max(r["cpu"] - r["start_up"], 1e-3) / max(1, r["files"] - 1)
        busy = max(r["cpu"] - r["start_up"] - r["hang_cpu"], 1e-3) / max(1, r["files"] - 1)
        print(
            f"| {label} | {r['files']} | {r['hangs']} | {r['files'] / r['seconds']:.1f} | "
            f"{per_file * 1000:.1f} | {2 / per_file:.0f} | {2 / busy:.0f} |",
            flush=True,
        )
    if args.quick:
        print("\n(--quick: a smoke test of the script, not a measurement)")


if __name__ == "__main__":
    main()
