"""Whole-file commands on big files: ``hash`` against gguf-py's gguf_hash and ``set`` against ``cp``, with peak RSS.

    PYTHONPATH=. python benchmarks/bench_stream.py [--gib 1,3] [--repeat 3] [--dir /tmp]

For each size, a GGUF file of that much tensor data (256 MiB tensors of random bytes) is made with our writer in
a temporary folder under ``--dir`` and deleted afterwards. Each command runs as its own process with its
wall time and maximum resident set size (the child's rusage, as ``/usr/bin/time -v`` reports it); the commands take turns, best of
``--repeat``,
so that load from elsewhere on a shared machine hits them alike. The file is read once first, so every run sees
the page cache warm. Before each ``set``/``cp`` run the previous output is removed and ``sync`` waits for any
write-back still under way, so no run pays for the one before. Our ``set -o NEW`` behaves like ``cp`` (a new path
is not fsynced: see ``fileio``), so it is timed against ``cp``; ``set --sync`` fsyncs the file and its folder, so
it is timed against ``cp`` then ``sync`` of the copy. The children run with bytecode caching allowed (a
``PYTHONDONTWRITEBYTECODE`` in the environment is dropped for them), as an installed package runs; the best-of
runs are the warm-up. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CODE = ROOT  # the checkout whose gguf_construct is timed (--code: e.g. an older commit, for before/after)
TENSOR = 256 << 20


def make_file(path: Path, n_bytes: int) -> None:
    """A GGUF file of ``n_bytes`` of tensor data written by our writer (one random block of up to 256 MiB, repeated)."""
    sys.path.insert(0, str(ROOT))
    from gguf_construct import new

    size = min(TENSOR, n_bytes)
    block = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    f = new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["general.name"] = "bench-stream"
    for i in range(max(1, n_bytes // size)):
        f.tensors.add(f"blk.{i}.ffn_up.weight", block.view(np.float32))
    f.save(path)


def timed(cmd: list[str], cwd: Path) -> tuple[float, int, str]:
    """(wall seconds, max RSS in bytes, stdout) of ``cmd``: the child's own rusage from ``os.wait4``, the figure
    ``/usr/bin/time -v`` prints as "Maximum resident set size" (not every machine has GNU time installed)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # both sides run from cached bytecode
    env["PYTHONPATH"] = str(CODE)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{cmd} failed: {err.read().decode(errors='replace')[-2000:]}")
        return wall, usage.ru_maxrss * 1024, out.read().decode()


def best_of(cmds: dict[str, list[str]], repeat: int, cwd: Path, before=None) -> dict[str, tuple[float, int, str]]:
    best: dict[str, tuple[float, int, str]] = {}
    for _ in range(repeat):
        for label, cmd in cmds.items():
            if before is not None:
                before()
            wall, rss, out = timed(cmd, cwd)
            if label not in best or wall < best[label][0]:
                best[label] = (wall, max(rss, best.get(label, (0, 0))[1]), out)
            else:
                best[label] = (best[label][0], max(rss, best[label][1]), best[label][2])
    return best


def warm(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", default="1,3", help="file sizes in GiB, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where to make the big files")
    ap.add_argument("--code", default=str(ROOT), help="checkout whose gguf_construct to time (default: this one)")
    ap.add_argument("--quick", action="store_true", help="one 16 MiB file, once: checks the script")
    ap.add_argument("--make", nargs=2, metavar=("PATH", "BYTES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        make_file(Path(args.make[0]), int(args.make[1]))
        return
    if args.quick:
        args.gib, args.repeat = "0.015625", 1
    global CODE
    CODE = Path(args.code)
    py = sys.executable
    rows = []
    for gib in (float(x) for x in args.gib.split(",")):
        with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-stream-") as tmp:
            tmp_path = Path(tmp)
            src = tmp_path / "model.gguf"
            # in a child process: a forked child's peak RSS counts the parent's pages before its exec, so the
            # parent stays small (the 256 MiB block lives and dies in the child)
            subprocess.run([py, __file__, "--make", str(src), str(int(gib * (1 << 30)))], check=True)
            size = src.stat().st_size
            warm(src)
            hashes = best_of(
                {
                    "ours": [py, "-m", "gguf_construct.cli.main", "hash", str(src)],
                    "gguf-py": [py, "-m", "gguf.scripts.gguf_hash", str(src)],
                },
                args.repeat,
                tmp_path,
            )
            same = hashes["ours"][2] == hashes["gguf-py"][2]
            out = tmp_path / "out.gguf"

            def clear(out: Path = out) -> None:
                out.unlink(missing_ok=True)
                os.sync()  # the last run's write-back (cp leaves it running) must not slow the next one down

            sets = best_of(
                {
                    "ours": [py, "-m", "gguf_construct.cli.main", "set", str(src), "general.name", "renamed", "-o", str(out)],
                    "cp": ["cp", str(src), str(out)],
                    "ours --sync": [
                        py,
                        "-m",
                        "gguf_construct.cli.main",
                        "set",
                        str(src),
                        "general.name",
                        "renamed",
                        "-o",
                        str(out),
                        "--sync",
                    ],
                    "cp + sync": ["sh", "-c", f'cp "{src}" "{out}" && sync "{out}"'],
                },
                args.repeat,
                tmp_path,
                before=clear,
            )
            rows.append((gib, size, hashes, same, sets))
            print(
                f"  {gib:g} GiB: hash {hashes['ours'][0]:.2f} s vs {hashes['gguf-py'][0]:.2f} s; "
                f"set {sets['ours'][0]:.2f} s vs cp {sets['cp'][0]:.2f} s; "
                f"set --sync {sets['ours --sync'][0]:.2f} s vs cp + sync {sets['cp + sync'][0]:.2f} s",
                flush=True,
            )
    load = os.getloadavg()[0]
    print(
        f"\nbest of {args.repeat}, warm page cache, {os.cpu_count()} CPUs, load average {load:.2f}, "
        f"{shutil.disk_usage(args.dir).free >> 30} GiB free in {args.dir}; "
        "children run with bytecode caching allowed (PYTHONDONTWRITEBYTECODE dropped)\n"
    )
    print("| file | command | ours | reference | reference time | speed-up | our peak RSS | reference peak RSS |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for gib, size, hashes, same, sets in rows:
        label = f"{gib:g} GiB ({size / (1 << 30):.2f} GiB file)"
        h, r = hashes["ours"], hashes["gguf-py"]
        note = "" if same else " (output differs!)"
        print(
            f"| {label} | hash | {h[0]:.2f} s | gguf-py gguf_hash{note} | {r[0]:.2f} s | "
            f"{r[0] / h[0]:.2f}× | {h[1] >> 20} MB | {r[1] >> 20} MB |"
        )
        s, c = sets["ours"], sets["cp"]
        print(
            f"| {label} | set one key (-o new file) | {s[0]:.2f} s | cp | {c[0]:.2f} s | "
            f"{c[0] / s[0]:.2f}× | {s[1] >> 20} MB | {c[1] >> 20} MB |"
        )
        s, c = sets["ours --sync"], sets["cp + sync"]
        print(
            f"| {label} | set one key --sync (-o new file, fsynced) | {s[0]:.2f} s | cp, then sync the copy "
            f"| {c[0]:.2f} s | {c[0] / s[0]:.2f}× | {s[1] >> 20} MB | {c[1] >> 20} MB |"
        )
    if any(not same for *_, same, _ in rows):
        raise SystemExit("hash output differs from gguf_hash")


if __name__ == "__main__":
    main()
