"""Throughput of ``gguf-construct fuzz``: files per second against each shipped adapter, with one lane and with
one lane per core (``--jobs``), at the default time limit (hang-prone inputs included); and a campaign over a Dask
LocalCluster of one and of two workers (``--dask``).

Each campaign runs for ``--seconds`` in its own process (seed 0, the built-in seed files, default memory cap).
The table gives files per second of wall time (the start-up of the readers included), the hangs met, and the CPU
time spent per file by every process of the campaign (ours, the other reader, the generator; the readers' start-up,
measured by a campaign of one file per lane, left out), from which ``2 / CPU s per file`` is what the same work
allows on two otherwise idle cores. On a shared machine the wall rate
depends on the load (printed at the start and the end); the CPU cost much less.

    python benchmarks/bench_fuzz.py [--seconds 60] [--timeout 5] [--dask]
    python benchmarks/bench_fuzz.py --quick      # 4 s against gguf-py with two lanes: a smoke test (CI)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys
from gguf_construct.testing.fuzzing import run
from gguf_construct.testing.fuzzing.runner import hypothesis_storage

def cpu():
    whom = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    return sum(getattr(resource.getrusage(who), f) for who in whom for f in ("ru_utime", "ru_stime"))

against, seconds, timeout, jobs, dask = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
hypothesis_storage()
if dask != "-":
    from distributed import Client, LocalCluster
    from gguf_construct.testing.fuzzing.cluster import run_dask

    cluster = LocalCluster(n_workers=int(dask), threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        client.submit(sum, [1]).result()  # the workers are up
        start, start_up = cpu(), 0.0  # (the workers' CPU is not this process's: the column is left empty)
        report = run_dask(against, client, count=None, seconds=seconds, seed=0, timeout=timeout)
else:
    before = cpu()
    run(against, count=jobs, seed=0, timeout=timeout, jobs=jobs)  # the start-up alone (both readers of every lane)
    start = cpu()
    start_up = start - before
    report = run(against, count=None, seconds=seconds, seed=0, timeout=timeout, jobs=jobs)
hangs = sum(k.count for k in report.kinds.values() if k.cls == "hang")
line = {"files": report.files, "seconds": report.seconds, "cpu": cpu() - start - start_up, "hangs": hangs, "dask": dask != "-"}
print(json.dumps(line))
"""


def campaign(against: str, seconds: float, timeout: float, jobs: int, dask: int | None = None) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    argv = [sys.executable, "-c", CHILD, against, str(seconds), str(timeout), str(jobs), str(dask) if dask else "-"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=seconds * 4 + 300)
    if done.returncode != 0:
        raise SystemExit(f"{against}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(label: str, lanes: str, r: dict[str, float]) -> str:
    rate = r["files"] / r["seconds"]
    if r["dask"]:  # the work is done in the cluster's processes
        return f"| {label} | {lanes} | {r['files']} | {r['hangs']} | {rate:.1f} | | |"
    per_file = max(r["cpu"], 1e-3) / max(1, r["files"])
    return f"| {label} | {lanes} | {r['files']} | {r['hangs']} | {rate:.1f} | {per_file * 1000:.1f} | {2 / per_file:.0f} |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="length of each campaign (default 60)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per file per reader (default 5, the command's)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="lanes of the second row of each reader (default: the cores)")
    p.add_argument("--dask", action="store_true", help="also a campaign against gguf-py on a LocalCluster of 1 and of 2 workers")
    p.add_argument("--quick", action="store_true", help="4 s against gguf-py with two lanes: a smoke test of the script")
    args = p.parse_args()
    seconds = 4.0 if args.quick else args.seconds
    readers = ["gguf-py"]
    if not args.quick:
        readers += [name for name, module in (("ggml", "ggml"), ("safetensors", "safetensors")) if importlib.util.find_spec(module)]
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs;", end=" ")
    print(f"{seconds:g} s per campaign, time limit {args.timeout:g} s per file\n")
    print("| reader | lanes | files | hangs | files/s (wall) | CPU ms per file | files/s on 2 idle cores |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for against in readers:
        for jobs in [2] if args.quick else sorted({1, args.jobs}):
            print(row(against, f"--jobs {jobs}", campaign(against, seconds, args.timeout, jobs)), flush=True)
    if args.dask and not args.quick:
        for workers in (1, 2):
            label = f"--dask, LocalCluster of {workers} worker{'s' if workers > 1 else ''}"
            print(row("gguf-py", label, campaign("gguf-py", seconds, args.timeout, 1, dask=workers)), flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    if args.quick:
        print("(--quick: a smoke test of the script, not a measurement)")


if __name__ == "__main__":
    main()
