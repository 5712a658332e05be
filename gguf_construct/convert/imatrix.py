"""Importance matrices for quantization: llama.cpp's two file formats, read into the per-column weights that
llama-quantize hands to ggml (tools/quantize/quantize.cpp):

- GGUF (``general.type = "imatrix"``): ``<name>.in_sum2`` (ne = [n_per_row, n_mat]) holds the raw sums of squared
  activations and ``<name>.counts`` (ne = [1, n_mat]) how many rows each matrix saw; weights = in_sum2 / count
  (a matrix with count 0 keeps its sums).
- legacy ``.dat`` (:mod:`.formats.imatrix`): values = (sums / count) * ncall; weights = values / ncall.

:func:`read_imatrix` gives ``{tensor name: float32 array (n_mat, n_per_row)}`` for either; :func:`write_dat` and
:func:`write_gguf` write the two formats (atomically), so both round-trip.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from construct import Container

from ..api import new
from ..api.fileio import write_atomic
from ..api.registry import load
from ..core import rules
from ..formats.base import map_file, open_regular

Stats = dict[str, tuple[np.ndarray, np.ndarray]]  # name → (sums (n_mat, n_per_row), counts (n_mat,))


def read_stats(path: str | os.PathLike[str]) -> tuple[Stats, dict[str, object]]:
    """The raw statistics and metadata of either format: GGUF's (sums, counts) as stored; a legacy entry's
    values with its ``ncall`` as the single count (the form llama.cpp's loader gives it)."""
    data = map_file(path)
    if bytes(data[:4]) == b"GGUF":
        return _read_gguf(path)
    from ..formats.gguf.imatrix_dat import IMATRIX_DAT  # the legacy .dat layout loads only for a .dat file

    parsed = IMATRIX_DAT.parse(data)
    stats = {e.name: (np.asarray(e["values"], np.float32)[None], np.array([e.ncall], np.float32)) for e in parsed.entries}
    meta: dict[str, object] = {"format": "dat"}
    if parsed.trailer is not None:
        meta.update(chunk_count=parsed.trailer.chunk_count, datasets=[parsed.trailer.dataset])
    return stats, meta


def _read_gguf(path: str | os.PathLike[str]) -> tuple[Stats, dict[str, object]]:
    f = load(path)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    for name in f.tensors:
        t = f.tensors[name]
        if name.endswith(".in_sum2"):
            sums[name[: -len(".in_sum2")]] = t.to_numpy().reshape(-1, t.shape[0] if t.shape else 1)
        elif name.endswith(".counts"):
            counts[name[: -len(".counts")]] = t.to_numpy().reshape(-1)
    if set(sums) != set(counts):
        odd = sorted(set(sums) ^ set(counts))[:3]
        raise rules.IMATRIX_PAIRS.error(f"in_sum2 and counts tensors do not pair up: {odd}")
    meta: dict[str, object] = {"format": "gguf"}
    for key in ("imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"):
        if key in f.metadata:
            value = f.metadata[key]
            meta[key.split(".", 1)[1]] = [str(v) for v in value] if key == "imatrix.datasets" else int(value)
    return {n: (sums[n].astype(np.float32), counts[n].astype(np.float32)) for n in sums}, meta


def read_imatrix(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Per tensor, the importance weights llama-quantize uses: ``(n_mat, n_per_row)`` float32. Statistics with a
    NaN, an infinity or a negative number are refused (``imatrix.finite``)."""
    stats, meta = read_stats(path)
    out = {}
    for name, (sums, counts) in stats.items():
        _check_finite(name, sums, counts, path)
        if meta["format"] == "gguf":
            c = counts.reshape(-1, 1)
            out[name] = np.where(c > 0, sums / np.where(c > 0, c, 1), sums).astype(np.float32)
        else:
            ncall = counts[0]
            out[name] = (sums / ncall if ncall > 0 else sums).astype(np.float32)
    return out


def _check_finite(name: str, sums: np.ndarray, counts: np.ndarray, path: str | os.PathLike[str]) -> None:
    """Refuse (``imatrix.finite``) a tensor's statistics holding a NaN, an infinity or a negative number: sums of
    squares and counts never do, and one such value makes the weights of a whole row meaningless (the quantizer
    then picks its scales from NaN and the output is noise, silently)."""
    for what, values in (("sums", sums), ("counts", counts)):
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            first = np.unravel_index(int(np.argmax(bad)), values.shape)
            raise rules.IMATRIX_FINITE.error(
                f"{os.fspath(path)}: {name}: {int(bad.sum())} {what} are NaN, infinite or negative "
                f"(first: {values[first]!r} at {tuple(int(i) for i in first)})",
                path=name,
            )


def write_dat(
    path: str | os.PathLike[str], stats: Stats, *, chunk_count: int | None = None, dataset: str = "", durable: bool | None = None
) -> None:
    """A legacy ``.dat`` file: entries sorted by name, each ``(sums, [ncall])`` written as llama.cpp's loader reads
    (``durable``: see ``fileio.durability``)."""
    from ..formats.gguf.imatrix_dat import IMATRIX_DAT

    entries = []
    for name in sorted(stats):
        sums, counts = stats[name]
        entries.append(Container(name=name, ncall=int(counts.reshape(-1)[0]), values=np.asarray(sums, np.float32).reshape(-1)))
    trailer = None if chunk_count is None else Container(chunk_count=chunk_count, dataset=dataset)
    blob = IMATRIX_DAT.build(Container(entries=entries, trailer=trailer))
    write_atomic(path, lambda f: f.write(blob), durable=durable)


def write_gguf(
    path: str | os.PathLike[str],
    stats: Stats,
    *,
    datasets: list[str] | None = None,
    chunk_count: int = 0,
    chunk_size: int = 512,
    durable: bool | None = None,
) -> None:
    """A GGUF imatrix as llama.cpp's ``save_imatrix`` writes it: keys, then ``in_sum2``/``counts`` per tensor
    (``durable``: see ``fileio.durability``)."""
    f = new()
    f.metadata["general.type"] = "imatrix"
    f.metadata.set("imatrix.datasets", list(datasets or []), type="arr[str]")
    f.metadata["imatrix.chunk_count"] = np.uint32(chunk_count)
    f.metadata["imatrix.chunk_size"] = np.uint32(chunk_size)
    for name in sorted(stats):
        sums, counts = stats[name]
        sums = np.asarray(sums, np.float32)
        sums = sums.reshape(-1, sums.shape[-1])
        f.tensors.add(f"{name}.in_sum2", sums)
        f.tensors.add(f"{name}.counts", np.asarray(counts, np.float32).reshape(-1, 1))
    f.save(path, durable=durable)


def imatrix_kind(path: str | os.PathLike[str]) -> str:
    """ "gguf" or "dat" (a file that is neither is rejected)."""
    with open_regular(Path(path)) as fh:  # a FIFO or a directory is refused before it is opened
        head = fh.read(4)
    if head == b"GGUF":
        return "gguf"
    if len(head) == 4:
        return "dat"
    raise rules.IMATRIX_KIND.error(f"{path}: too short for an imatrix file")
