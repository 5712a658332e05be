"""``scan``: ``info --json`` and ``validate`` over many sources (paths or URLs), one JSON line each.

Resumable: sources already in the output are skipped, and a last line cut short by a kill is dropped before
appending. The output is never a source, and never a file scan did not write (``done_sources``). On one machine a bounded thread pool does
the work (remote reads wait on the network, not the
CPU); with Dask, batches of sources go to a ``dask.distributed`` cluster through ``Client.map``.
Lines are written by the calling process only, one whole line at a time, so no line is lost or doubled.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..core import rules
from ..errors import FormatError, MissingExtraError
from ..sources.budget import budgeted
from ..sources.options import RemoteOptions, options
from ..sources.urls import scheme_of

if TYPE_CHECKING:
    from concurrent.futures import Future


def scan_one(source: str, profile: str = "spec", opts: RemoteOptions | None = None) -> dict[str, Any]:
    """One source's line: ``{"source", "ok", "format", "issues", "info", "error", "seconds"}``; the source is
    opened once, its header read once, for both the summary and the validation. A source that could not be read
    (the network, a path; not the file's bytes) has ``"unreadable": true``."""
    from .report import info_json

    opts = budgeted(opts or options(), fresh=True)  # each source its own budget: a scan is many commands in one
    started = time.perf_counter()
    line: dict[str, Any] = {
        "source": source,
        "ok": False,
        "format": None,
        "errors": 0,
        "warnings": 0,
        "issues": [],
        "info": None,
        "error": None,
    }
    try:
        f, issues = _open_and_check(source, profile, opts)
        line["format"] = getattr(f, "format", None)
        line["info"] = info_json(f, path=source)
        line["issues"] = [
            {"severity": i.severity, "rule": i.rule, "path": i.path, "offset": i.offset, "message": i.message} for i in issues
        ]
        line["errors"] = sum(i.severity == "error" for i in issues)
        line["warnings"] = len(issues) - line["errors"]
        line["ok"] = line["errors"] == 0
    except FormatError as e:
        line["error"] = e.describe()
        line["rule"] = e.rule
        line["status"] = getattr(e, "status", None)
        line["unreadable"] = rules.is_request_fault(e)  # the network, the path: not a verdict on the file's bytes
    except OSError as e:
        line["error"] = f"{type(e).__name__}: {e}"
        line["unreadable"] = True
    except Exception as e:  # a bug, not the file's fault: recorded (and reported) without stopping a long scan
        line["error"] = f"internal error {type(e).__name__}: {e}"
        line["rule"] = f"internal.{type(e).__name__}"
    line["seconds"] = round(time.perf_counter() - started, 6)
    return line


def _open_and_check(source: str, profile: str, opts: RemoteOptions | None) -> tuple[Any, list[Any]]:
    from ..api.registry import FORMATS, detect_source, load_source, profile_for, validate_bytes
    from ..sources.opening import open_source

    if scheme_of(source) == "ollama":
        from ..api.openers.ollama_registry import load_ollama

        return load_ollama(source, strict=False, opts=opts), []
    src = open_source(source, opts)
    fmt = detect_source(src)
    profile = profile_for(FORMATS[fmt], profile)
    if fmt == "gguf":  # the header's checks: the tensor data is not fetched
        from ..api.gguf_file import gguf_from_source
        from ..validation import check, model_issues

        g = gguf_from_source(src, strict=False)
        return g, check(g.container, src.size, profile) + model_issues(g.container, profile)
    if fmt == "safetensors":
        from ..api.openers.over_source import safetensors_from_source
        from ..validation.safetensors_checks import check_safetensors

        s = safetensors_from_source(src, strict=False)
        return s, check_safetensors(s.container, profile)
    return load_source(src, fmt, strict=False), validate_bytes(src.ensure(0, src.size), profile)


def scan_batch(sources: list[str], profile: str = "spec", opts: RemoteOptions | None = None, threads: int = 4) -> list[dict[str, Any]]:
    """A batch of sources, on ``threads`` threads (``run_dask`` uses 1: one after another in a Dask worker's thread)."""
    preload()
    if threads <= 1 or len(sources) <= 1:
        return [scan_one(s, profile, opts) for s in sources]
    from concurrent.futures import ThreadPoolExecutor  # here: the CLI imports this module at every start-up

    with ThreadPoolExecutor(max_workers=min(threads, len(sources))) as pool:
        return list(pool.map(lambda s: scan_one(s, profile, opts), sources))


def preload() -> None:
    """Import what ``scan_one`` imports, once, on the calling thread, before any thread of the scan starts: first
    imports of the same modules on many threads at once wait on each other's import locks."""
    from .. import validation  # noqa: F401
    from ..api.openers import over_source  # noqa: F401
    from ..sources import opening  # noqa: F401
    from ..sources.http import _urllib3
    from ..validation import safetensors_checks as safetensors  # noqa: F401

    with contextlib.suppress(FormatError):  # no urllib3: the URLs fail one by one, on their lines
        _urllib3()


# -- the output file --------------------------------------------------------------------------------------
#: How every line ``scan`` writes begins (``scan_one``'s first key): a file whose cut-off last line does not begin
#: so is not one of ours, and is never truncated.
LINE_START = b'{"source":'


def done_sources(path: str | os.PathLike[str]) -> set[str]:
    """Sources already in a results file (nothing when there is none). The file must be one ``scan`` wrote:
    every whole line a JSON object naming its source, read with the untrusted-JSON reader, else
    ``output.foreign`` and the file is left as it is. A last line cut short by a kill (it begins as scan's
    lines do) is cut off; nothing else is ever cut."""
    from ..core.untrusted import json_lines
    from ..formats.base import open_regular

    if not os.path.lexists(path):
        return set()
    with open_regular(path, blocking=False) as f:  # a FIFO or a directory is refused before it is read; nothing waits
        data = f.read()
    if data is None:  # a kernel file passing for a regular one, with nothing to give now
        raise rules.OUTPUT_FOREIGN.error(f"{os.fspath(path)} would make the reader wait: it is not a results file of scan")
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    if tail and not (tail.startswith(LINE_START) or LINE_START.startswith(tail)):
        raise rules.OUTPUT_FOREIGN.error(
            f"{os.fspath(path)} does not end with a newline and its last line is not a scan "
            "result: it is not a results file of scan; give another --output"
        )
    done = set()
    lines = json_lines(data[:end], what=os.fspath(path))
    while True:
        try:
            n, line = next(lines)
        except StopIteration:
            break
        except FormatError as e:
            raise rules.OUTPUT_FOREIGN.error(
                f"{os.fspath(path)} is not a results file of scan: {e.message}; give another --output"
            ) from None
        if not isinstance(line, dict) or not isinstance(line.get("source"), str):
            raise rules.OUTPUT_FOREIGN.error(
                f"{os.fspath(path)} is not a results file of scan: line {n} names no source; give another --output"
            )
        done.add(line["source"])
    if tail:
        with open(path, "rb+") as f:  # the same file: only our own cut-off line goes
            if os.fstat(f.fileno()).st_size == len(data):
                f.truncate(end)
    return done


def pending(sources: Iterable[str], done: set[str]) -> list[str]:
    """Sources not yet scanned, each once, in the given order."""
    seen = set(done)
    out = []
    for s in sources:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


# -- the engines --------------------------------------------------------------------------------------------
def run_local(
    sources: list[str],
    emit: Callable[[dict[str, Any]], None],
    *,
    concurrency: int = 16,
    profile: str = "spec",
    opts: RemoteOptions | None = None,
) -> None:
    """At most ``concurrency`` sources in flight on threads; each line emitted as it completes."""
    preload()
    if concurrency <= 1:
        for s in sources:
            emit(scan_one(s, profile, opts))
        return
    todo: Iterator[str] = iter(sources)
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        running: set[Future[dict[str, Any]]] = set()
        for s in todo:
            running.add(pool.submit(scan_one, s, profile, opts))
            if len(running) >= concurrency * 2:
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    emit(fut.result())
        for fut in wait(running).done:
            emit(fut.result())


#: ``scan --dask``: with no batch finished for this many seconds the scan stops with a ``RemoteError``
DASK_TIMEOUT = 600.0


def run_dask(
    sources: list[str],
    emit: Callable[[dict[str, Any]], None],
    scheduler: Any,
    *,
    batch: int = 32,
    threads: int = 4,
    profile: str = "spec",
    opts: RemoteOptions | None = None,
    timeout: float = DASK_TIMEOUT,
) -> None:
    """``Client.map(scan_batch, batches)`` on a Dask cluster: ``scheduler`` is a Client, a scheduler address
    (``tcp://host:8786``), or ``local`` for a LocalCluster in this process (one worker with ``threads`` threads).
    A batch's sources run one after another: the workers' threads are the parallelism (``dask worker --nthreads``;
    a thread pool started inside each task once stalled the cluster). A cluster on which no batch finishes for ``timeout`` seconds is a
    ``RemoteError``, not a hang; closing the client and the cluster is bounded too."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise MissingExtraError("scan --dask", "cluster", "dask.distributed") from None

    preload()  # before the worker threads start, in this process (LocalCluster) and for the results' unpickling
    cluster = None
    if isinstance(scheduler, Client):
        client, own = scheduler, False
    elif scheduler == "local":
        cluster = LocalCluster(
            n_workers=1, threads_per_worker=max(1, threads), processes=False, protocol="tcp://", host="127.0.0.1", dashboard_address=None
        )
        client, own = Client(cluster), True
    else:
        client, own = Client(scheduler), True
    try:
        batches = [sources[i : i + batch] for i in range(0, len(sources), batch)]
        futures = client.map(scan_batch, batches, profile=profile, opts=opts, threads=1, pure=False)
        done = as_completed(futures, with_results=True)
        last = time.monotonic()
        while not done.is_empty():
            if not done.has_ready():  # polled like as_completed's own wait: its timeout is for the whole run
                if time.monotonic() - last > timeout:
                    left = done.count()
                    raise rules.REMOTE_DASK_STALLED.error(
                        f"no batch finished on the Dask cluster in {timeout:g} s ({left} of {len(batches)} batches left)"
                    )
                time.sleep(0.05)
                continue
            _, lines = next(done)
            last = time.monotonic()
            for line in lines:
                emit(line)
    finally:  # a batch still running (a stall) makes closing wait for it: bounded, and never hiding the error
        if own:
            with contextlib.suppress(TimeoutError):
                client.close(timeout=10)
        if cluster is not None:
            with contextlib.suppress(TimeoutError):
                cluster.close(timeout=10)


def scan(
    sources: Iterable[str],
    out: TextIO | str | os.PathLike[str],
    *,
    concurrency: int = 16,
    dask: Any = None,
    batch: int = 32,
    profile: str = "spec",
    opts: RemoteOptions | None = None,
    dask_timeout: float = DASK_TIMEOUT,
    inputs: Iterable[str] = (),
) -> dict[str, int]:
    """Scan ``sources`` into ``out`` (a path: resumed, appended; or an open text stream); returns counts. A path
    that is a source or one of ``inputs`` (the lists the sources came from) is refused (``output.input``); so is
    a file that is not a results file of scan (``output.foreign``, see ``done_sources``)."""
    counts = {"skipped": 0, "scanned": 0, "ok": 0, "invalid": 0, "unreadable": 0}
    sources = list(sources)
    if isinstance(out, (str, os.PathLike)):
        from ..api.fileio import check_output, open_append

        check_output(out, [*inputs, *sources], what="--output")  # a model or a list being scanned is never appended to
        done = done_sources(out)
        stream: TextIO = open_append(out, what="--output")  # closed below, after the run
    else:
        done, stream = set(), out
    todo = pending(sources, done)
    counts["skipped"] = len(done)

    bar = _bar(len(todo))

    def emit(line: dict[str, Any]) -> None:
        stream.write(json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")
        stream.flush()
        counts["scanned"] += 1
        counts["ok" if line["ok"] else "unreadable" if line.get("unreadable", bool(line["error"])) else "invalid"] += 1
        if bar is not None:
            bar.update(1)

    try:
        if dask is not None:
            run_dask(todo, emit, dask, batch=batch, threads=max(1, min(concurrency, 16)), profile=profile, opts=opts, timeout=dask_timeout)
        else:
            run_local(todo, emit, concurrency=concurrency, profile=profile, opts=opts)
    finally:
        if stream is not out:
            stream.close()
        if bar is not None:
            bar.close()
    return counts


def _bar(total: int) -> Any:
    """A progress bar on a terminal (``progress.progress``'s rules), else None."""
    from ..core.progress import progress

    bar = progress(iter(()), total, "scan", unit="file", minimum=2)
    return bar if hasattr(bar, "update") else None
