"""Remote reads on a loopback server (``http_testserver``), in one run:

1. Requests and bytes to open a GGUF header over HTTP: ours (256 KiB, then doubling chunks up to 16 MiB, or straight to what a length in
the header asks for) against
   the anchors' chunking simulated through the same server and the same parser: @huggingface/gguf's fixed
   2 MB (2·10⁶ bytes) chunks, and gguf-parser-go's HEAD probe then 4 MiB buffered reads. Files: GGUFs with
   vocabularies of several sizes (headers from ~0.1 to ~8 MB) and 32 MiB of tensor data, plus the corpus GGUFs.
2. ``scan`` of N small files (default 1,000) with concurrency 1, 16 and 64, and through a Dask LocalCluster
   (threads, tcp on 127.0.0.1): files/s; checks no file is lost and no line doubled.
3. A killed scan resumes: ``gguf-construct scan`` in a subprocess, killed after a third of its lines, then run
   again: every source once.

    PYTHONPATH=. python benchmarks/bench_remote.py [--files 1000] [--smoke] [--first-chunks 64,128,256,512]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import gguf_construct as gc
from gguf_construct.api.gguf_file import gguf_from_source
from gguf_construct.cli.scan_runner import scan
from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.sources import configure, options
from gguf_construct.sources.http import HttpFile, pool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the loopback test server lives with the tests
from http_testserver import TestServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "gguf"
HF_CHUNK = 2 * 10**6  # @huggingface/gguf: HTTP_CHUNK_SIZE
GO_BUFFER = 4 << 20  # gguf-parser-go: 4 MiB read buffer


def model(vocab: int, data_mib: int) -> bytes:
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["tokenizer.ggml.model"] = "gpt2"
    f.metadata["tokenizer.ggml.tokens"] = [f"tok{i:07d}" for i in range(vocab)]
    f.metadata["tokenizer.ggml.scores"] = np.zeros(vocab, np.float32)
    f.metadata["tokenizer.ggml.merges"] = [f"m{i} x{i}" for i in range(vocab)]
    f.tensors.add("token_embd.weight", np.zeros(data_mib << 18, np.float32))
    import io

    out = io.BytesIO()
    GGUF.build_stream(f.to_container(), out)
    return out.getvalue()


def header_open(server: TestServer, url: str, first: int, most: int, head: bool = False) -> tuple[int, int, int]:
    """(requests, bytes, data_offset) of one header open with chunks from ``first`` doubling up to ``most``."""
    server.reset_counts()
    if head:
        pool(url).request("HEAD", url).release_conn()
    src = HttpFile(url, options().replace(first_chunk=first, max_chunk=most)).open()
    f = gguf_from_source(src, strict=False)
    return server.counts.requests, server.counts.bytes, f.data_offset


def bench_headers(server: TestServer, smoke: bool) -> None:
    cases = [("vocab 2k", model(2_000, 32)), ("vocab 32k", model(32_000, 32)), ("vocab 150k", model(150_000, 32))]
    if smoke:
        cases = [("vocab 2k", model(2_000, 4)), ("vocab 32k", model(32_000, 4))]
    else:
        cases += [(p.name, p.read_bytes()) for p in sorted(CORPUS.glob("*.gguf"))[:3]]
    print(
        "| file | size | header | ours: requests | ours: bytes | HF 2 MB: requests | "
        "HF 2 MB: bytes | go 4 MiB: requests | go 4 MiB: bytes |"
    )
    print("|:--|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name, data in cases:
        url = server.add(f"/h/{name.replace(' ', '_')}.gguf", data)
        ours = header_open(server, url, options().first_chunk, options().max_chunk)
        hf = header_open(server, url, HF_CHUNK, HF_CHUNK)
        go = header_open(server, url, GO_BUFFER, GO_BUFFER, head=True)
        assert ours[2] == hf[2] == go[2]
        assert ours[1] <= ours[2] + options().max_chunk
        mb = lambda n: f"{n / 1e6:.2f} MB"  # noqa: E731
        print(f"| {name} | {mb(len(data))} | {mb(ours[2])} | {ours[0]} | {mb(ours[1])} | {hf[0]} | {mb(hf[1])} | {go[0]} | {mb(go[1])} |")


def bench_first_chunks(server: TestServer, sizes_kib: list[int]) -> None:
    """Requests per header open for several first-chunk sizes (the choice of the default)."""
    cases = [("vocab 2k", model(2_000, 1)), ("vocab 32k", model(32_000, 1)), ("vocab 150k", model(150_000, 1))]
    cases += [(p.name, p.read_bytes()) for p in sorted(CORPUS.glob("*.gguf"))[:3]]
    print("\n| file | header | " + " | ".join(f"first {k} KiB: requests, MB" for k in sizes_kib) + " |")
    print("|:--|--:|" + "--:|" * len(sizes_kib))
    for name, data in cases:
        url = server.add(f"/c/{name.replace(' ', '_')}.gguf", data)
        runs = [header_open(server, url, k << 10, options().max_chunk) for k in sizes_kib]
        print(f"| {name} | {runs[0][2] / 1e6:.2f} | " + " | ".join(f"{r[0]}, {r[1] / 1e6:.2f}" for r in runs) + " |")


def small_files(server: TestServer, n: int) -> list[str]:
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.tensors.add("w", np.arange(64, dtype=np.float32))
    import io

    urls = []
    for i in range(n):
        f.metadata["general.name"] = f"model {i}"
        out = io.BytesIO()
        GGUF.build_stream(f.to_container(), out)
        urls.append(server.add(f"/s/m{i:05d}.gguf", out.getvalue()))
    return urls


def check_output(path: Path, urls: list[str]) -> None:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    sources = [x["source"] for x in lines]
    assert len(sources) == len(set(sources)), "a line twice"
    assert set(sources) == set(urls), f"{len(set(urls) - set(sources))} files lost"
    assert all(x["ok"] for x in lines)


def bench_scan(server: TestServer, urls: list[str], tmp: Path) -> None:
    print(f"\n| scan of {len(urls)} files | files/s | requests | lines |")
    print("|:--|--:|--:|--:|")
    runs: list[tuple[str, dict]] = [
        ("concurrency 1", {"concurrency": 1}),
        ("concurrency 16", {"concurrency": 16}),
        ("concurrency 64", {"concurrency": 64}),
    ]
    runs.append(("Dask LocalCluster (1 worker, 16 threads, batches of 32)", {"concurrency": 16, "dask": "local", "batch": 32}))
    for label, kw in runs:
        out = tmp / f"scan-{label.split()[0]}-{kw['concurrency']}.jsonl"
        server.reset_counts()
        started = time.perf_counter()
        scan(urls, out, opts=options(), **kw)
        seconds = time.perf_counter() - started
        check_output(out, urls)
        print(f"| {label} | {len(urls) / seconds:.0f} | {server.counts.requests} | {len(urls)} |")


def bench_kill_resume(server: TestServer, urls: list[str], tmp: Path) -> None:
    listing = tmp / "list.txt"
    listing.write_text("\n".join(urls) + "\n")
    out = tmp / "killed.jsonl"
    cmd = [sys.executable, "-m", "gguf_construct.cli.main", "scan", str(listing), "--concurrency", "4", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server.faults.delay = 0.005  # slow enough to kill it midway
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or out.read_bytes().count(b"\n") < len(urls) // 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = out.read_bytes().count(b"\n")
    server.faults.delay = 0.0
    server.reset_counts()
    subprocess.run(cmd, env=env, stderr=subprocess.DEVNULL, timeout=600, check=False)
    check_output(out, urls)
    print(
        f"\nkilled scan: {before} of {len(urls)} lines written before the kill; the rerun fetched {server.counts.requests} files' headers "
        f"(the rest); {len(urls)} lines, each source once"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument(
        "--quick", "--smoke", dest="smoke", action="store_true", help="small files and 60 scan sources: a quick check that it all runs"
    )
    ap.add_argument("--first-chunks", metavar="KIB,...", help="only compare first-chunk sizes, e.g. 64,128,256,512")
    args = ap.parse_args()
    configure(retries=2, backoff=0.05, read_timeout=30.0)
    n = 60 if args.smoke else args.files
    with TestServer() as server, tempfile.TemporaryDirectory() as tmp:
        if args.first_chunks:
            bench_first_chunks(server, [int(k) for k in args.first_chunks.split(",")])
            return
        bench_headers(server, args.smoke)
        urls = small_files(server, n)
        bench_scan(server, urls, Path(tmp))
        bench_kill_resume(server, urls, Path(tmp))


if __name__ == "__main__":
    main()
