"""A fuzz campaign spread over a Dask cluster (``fuzz --dask SCHEDULER``).

The campaign is cut into slices: slice ``i`` is an ordinary :func:`.runner.run` with its own seed (derived from
the campaign's seed and ``i``), at most :data:`SLICE_SECONDS` long, one lane, its reproducers minimized on the
worker. Every worker thread of the cluster runs one slice at a time; as a slice ends, its kinds are merged here:
counts added, and a kind new to the campaign saved (reproducer and findings.tsv row) exactly as a local run saves
it. The next slice number is kept in ``fuzz-slices.json`` beside findings.tsv, so that a campaign started again
with the same ``--output`` resumes: new seeds, and the kinds already saved not saved again.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...api.fileio import files_under, write_atomic
from ...errors import MissingExtraError
from .findings_file import Row, read_findings, write_findings
from .runner import Kind, Report, _matches, _slug, hypothesis_storage, run

#: The longest slice a worker runs (shorter at the campaign's end): long enough that the readers' start-up is
#: small beside it, short enough that the results come in steadily.
SLICE_SECONDS = 30.0
#: Files per slice of a campaign given by ``count`` alone.
SLICE_FILES = 100
#: What the campaign's deadline leaves a slice for handing its results back.
SLICE_MARGIN = 2.0
#: How long connecting to the scheduler may take.
CONNECT_TIMEOUT = 30.0
#: The resume file in the output folder.
STATE = "fuzz-slices.json"


def slice_seed(seed: int, number: int) -> int:
    """Slice ``number``'s seed: distinct for every (campaign seed, slice) pair."""
    return seed * 1_000_003 + number


def run_slice(
    against: str, seed: int, count: int | None, seconds: float | None, options: dict[str, Any], save: bool = True, saved: Iterable[str] = ()
) -> dict[str, Any]:
    """One slice, on a worker: the slice's report as plain data, each new kind with its reproducer's bytes when
    ``save`` (minimized there); ``saved``: the kinds the campaign has saved already (counted, not saved again)."""
    hypothesis_storage()
    with tempfile.TemporaryDirectory(prefix="gguf-construct-fuzz-slice-") as folder:
        out = Path(folder) if save else None
        report = run(against, count=count, seconds=seconds, seed=seed, out=out, jobs=1, saved=saved, **options)
        kinds = []
        for k in report.kinds.values():
            data = (Path(folder) / k.reproducer).read_bytes() if k.reproducer else None
            kinds.append(
                {
                    "cls": k.cls,
                    "signature": k.signature,
                    "explanation": k.explanation,
                    "origin": k.origin,
                    "count": k.count,
                    "data": data,
                    "suffix": Path(k.reproducer).suffix,
                }
            )
    return {"files": report.files, "agreed": report.agreed, "kinds": kinds, "restarts": report.restarts, "hang_cpu": report.hang_cpu}


def _state(out: Path | None) -> int:
    """The next slice number of a campaign resumed in ``out`` (0 for a new one)."""
    if out is None or not (out / STATE).is_file() or (out / STATE).is_symlink():
        return 0
    try:
        with open(out / STATE, "rb") as f:
            value = json.loads(f.read(4096)).get("next_slice", 0)
    except (OSError, ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) and 0 <= value < 2**40 else 0


def run_dask(
    against: str,
    scheduler: Any,
    *,
    count: int | None = 200,
    seconds: float | None = None,
    seed: int = 0,
    out: Path | None = None,
    corpus: Path | None = None,
    known: list[str] | None = None,
    jobs: int = 1,
    log: Callable[[str], None] | None = None,
    **options: Any,
) -> Report:
    """:func:`.runner.run` over the Dask cluster at ``scheduler`` (an address, or a ``distributed.Client``):
    slices of the campaign on every worker thread, the findings merged and saved here. ``jobs`` is unused: the
    cluster's threads are the parallelism. A KeyboardInterrupt ends it with the report so far."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise MissingExtraError("fuzz --dask", "cluster", "dask.distributed") from None
    if count is None and seconds is None:
        raise ValueError("give count, seconds or both")
    start = time.monotonic()
    deadline = start + seconds if seconds is not None else None
    report = Report()
    patterns = known or []
    rows: list[Row] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for row in read_findings(out / "findings.tsv"):
            rows.append(row)
            report.kinds[row.signature] = Kind(row.cls, row.signature, row.explanation, row.origin, row.reproducer, earlier=True)
    number = _state(out)
    guarded = files_under(corpus)
    options = dict(options, corpus=corpus, known=patterns)
    client, own = (scheduler, False) if isinstance(scheduler, Client) else (Client(scheduler, timeout=CONNECT_TIMEOUT), True)
    taken = 0

    def next_slice() -> tuple[int, int | None, float | None] | None:
        """(number, files, seconds) of the next slice, or None when the campaign has no room for one."""
        nonlocal number, taken
        files = None
        if count is not None:
            files = min(count - taken, SLICE_FILES if seconds is None else max(1, math.ceil(count / slots)))
            if files <= 0:
                return None
        length = SLICE_SECONDS if seconds is not None else None
        if deadline is not None:
            left = deadline - time.monotonic() - SLICE_MARGIN
            if left < 1.0:
                return None
            length = min(SLICE_SECONDS, left)
        taken += files or 0
        number += 1
        return number - 1, files, length

    def merge(result: dict[str, Any]) -> None:
        report.files += result["files"]
        report.agreed += result["agreed"]
        report.hang_cpu += result["hang_cpu"]
        for who, n in result["restarts"].items():
            report.restarts[who] = report.restarts.get(who, 0) + n
        for k in result["kinds"]:
            kind = report.kinds.get(k["signature"])
            if kind is None:
                kind = report.kinds[k["signature"]] = Kind(k["cls"], k["signature"], k["explanation"], k["origin"])
                kind.known = _matches(kind.signature, patterns)
                if out is not None and not kind.known and k["data"] is not None:
                    _save(kind, k["data"], k["suffix"])
                if log and not kind.known:
                    log(f"new {kind.cls}: {kind.reproducer or kind.signature}: {kind.explanation}")
            kind.count += k["count"]

    def _save(kind: Kind, data: bytes, suffix: str) -> None:
        assert out is not None
        n = len(rows) + 1
        while os.path.lexists(out / (name := f"{n:03d}-{_slug(kind.signature)}{suffix}")):
            n += 1
        write_atomic(out / name, lambda f: f.write(data), inputs=guarded)
        kind.reproducer = name
        rows.append(Row(name, len(data), kind.cls, kind.signature, kind.explanation, f"from {kind.origin}"))
        write_findings(out / "findings.tsv", rows, inputs=guarded)

    def remember() -> None:
        if out is not None:
            state = json.dumps({"against": against, "seed": seed, "next_slice": number}).encode()
            write_atomic(out / STATE, lambda f: f.write(state), inputs=guarded)

    submitted: list[Any] = []

    def submit(piece: tuple[int, int | None, float | None]) -> Any:
        n, files, length = piece
        saved = [s for s, k in report.kinds.items() if k.reproducer or k.earlier]
        task = client.submit(run_slice, against, slice_seed(seed, n), files, length, options, out is not None, saved, pure=False)
        submitted.append(task)
        return submitted[-1]

    try:
        slots = max(1, sum(client.nthreads().values()))
        first = [s for s in (next_slice() for _ in range(slots)) if s is not None]
        done = as_completed([submit(piece) for piece in first], with_results=True)
        for _future, result in done:
            merge(result)
            remember()
            following = next_slice()
            if following is not None:
                done.add(submit(following))
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        client.cancel([f for f in submitted if not f.done()])
        if own:
            client.close(timeout=10)
    report.seconds = time.monotonic() - start
    return report
