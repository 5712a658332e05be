"""gguf-parser-go's estimate of llama.cpp's memory for one file and context, read from its binary.

Two binaries answer: ``gguf-parser`` itself, whose ``--json`` gives each device's total only, and
``gguf-parser-breakdown`` (``benchmarks/peers/gguf_parser_breakdown``, a main around the same
``EstimateLLaMACppRun``), which also gives the components. Both take the same command line, with no layer
offloaded (the CPU, as llama.cpp is measured here). The components, on the CPU device:

- weights: every tensor's bytes (``weight``: input, compute, overridden, output; gguf-parser counts a tied
  output matrix twice and knows no CPU repacking);
- KV / state: ``kvCache`` (keys and values, or the recurrent state's two parts);
- compute: ``computation`` without its ``footprint`` (graph metadata, not a buffer): input plus the larger of
  the layer's and the output's tensors, as gguf-parser sums it; also asked for one GPU holding every layer and
  the output (``gpu_compute``), the setting gguf-parser-go is mostly asked about, whose graph is the one
  llama.cpp runs on a CPU alone;
- total: the CPU's total that ``gguf-parser --json`` prints without mmap and platform footprints (the
  components, the tokenizer and metadata footprint and the logits buffer).

The binary is run as an untrusted program: bounded in time and output, its answer checked before use.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

ENV = "GGUF_PARSER"
OUTPUT_LIMIT = 16 << 20  # bytes of JSON read from the binary; its answer is a few kilobytes
TIMEOUT = 120.0  # seconds per file: it reads a header


class PeerError(Exception):
    """The binary could not answer for this file (a message saying why)."""


@dataclass(frozen=True)
class PeerEstimate:
    """gguf-parser-go's bytes for the CPU device; the components are None from ``gguf-parser`` itself."""

    total: int
    weights: int | None = None
    kv: int | None = None
    compute: int | None = None


def binary_from(option: str | None) -> str | None:
    """The binary named by ``--gguf-parser`` or else by ``GGUF_PARSER``, or None."""
    return option or os.environ.get(ENV) or None


def command(binary: str, path: str, *, n_ctx: int, n_batch: int, n_ubatch: int, n_seq_max: int, flash_attn: bool,
            type_k: str, type_v: str, swa_full: bool, gpu_layers: int = 0) -> list[str]:  # fmt: skip
    """The command line asking for this context with ``gpu_layers`` offloaded (0: the CPU alone; -1: every layer
    and the output on one GPU), mmap off and no platform footprints."""
    cmd = [binary, "--path", path, "--json", "--estimate", "--no-mmap", "--platform-footprint", "0,0", "--gpu-layers", str(gpu_layers)]
    cmd += ["--ctx-size", str(n_ctx), "--batch-size", str(n_batch), "--ubatch-size", str(n_ubatch)]
    cmd += ["--parallel-size", str(n_seq_max), "--cache-type-k", type_k, "--cache-type-v", type_v]
    if flash_attn:
        cmd.append("--flash-attention")
    if swa_full:
        cmd.append("--swa-full")
    return cmd


def run(cmd: list[str], *, timeout: float = TIMEOUT, limit: int = OUTPUT_LIMIT) -> bytes:
    """The binary's standard output; PeerError if it cannot start, fails, outlives ``timeout`` or writes more
    than ``limit`` bytes. The output is read against the deadline (a child that left the process group with the
    pipe open cannot hold it past it), and the process group is ended on the way out."""
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        raise PeerError(f"cannot run {cmd[0]}: {e.strerror or e}") from None
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    late = PeerError(f"{cmd[0]} did not answer within {timeout:g} s")
    try:
        out = _read(proc.stdout.fileno(), deadline, limit, late)
        if len(out) > limit:
            raise PeerError(f"{cmd[0]} wrote more than {limit:,} bytes")
        try:
            code = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise late from None
    finally:
        _kill_group(proc)
        proc.wait()
        proc.stdout.close()
    if code != 0:
        raise PeerError(f"{cmd[0]} exited with status {code}")
    return out


def _read(fd: int, deadline: float, limit: int, late: PeerError) -> bytes:
    """Bytes from ``fd`` until its end or ``limit`` + 1 of them; ``late`` is raised at ``deadline``."""
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while size <= limit:
            left = deadline - time.monotonic()
            if left <= 0:
                raise late
            if not sel.select(left):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def parse(out: bytes) -> PeerEstimate:
    """The CPU device's figures from either binary's JSON; PeerError naming the field when it is not an answer."""
    doc = _json(out)
    summary = _field(doc, "summary") if isinstance(doc, dict) and "summary" in doc else _field(doc, "estimate")
    total = _count(_field(_first(_field(summary, "items"), "items"), "ram"), "uma", "items[0].ram")
    if not (isinstance(doc, dict) and "summary" in doc):
        return PeerEstimate(total=total)
    cpu = _first(_field(_field(doc, "estimate"), "devices"), "devices")
    weight, kv, comp = (_field(cpu, k) for k in ("weight", "kvCache", "computation"))
    return PeerEstimate(
        total=total,
        weights=sum(_count(weight, k, "weight") for k in ("input", "compute", "computeOverridden", "output")),
        kv=_count(kv, "key", "kvCache") + _count(kv, "value", "kvCache"),
        compute=_compute(comp),
    )


def parse_gpu_compute(out: bytes) -> int | None:
    """The first GPU's compute buffer from the breakdown's JSON (None from gguf-parser itself, which has no
    components); PeerError when it is not an answer."""
    doc = _json(out)
    if not (isinstance(doc, dict) and "summary" in doc):
        _field(doc, "estimate")
        return None
    devices = _field(_field(doc, "estimate"), "devices")
    if not isinstance(devices, list) or len(devices) < 2:
        raise PeerError("'devices' has no GPU")
    return _compute(_field(devices[1], "computation"))


def estimate(binary: str, path: str, **context: Any) -> PeerEstimate:
    """gguf-parser-go's estimate for ``path`` with ``context`` (the arguments of ``command``) on the CPU alone."""
    return parse(run(command(binary, path, **context)))


def gpu_compute(binary: str, path: str, **context: Any) -> int | None:
    """gguf-parser-go's compute buffer for one GPU holding every layer and the output (how it is mostly asked),
    or None from gguf-parser itself."""
    return parse_gpu_compute(run(command(binary, path, gpu_layers=-1, **context)))


def _json(out: bytes) -> Any:
    try:
        return json.loads(out)
    except (ValueError, RecursionError) as e:
        raise PeerError(f"not JSON: {str(e)[:200]}") from None


def _compute(comp: object) -> int:
    """A device's compute buffer as gguf-parser sums it, without the graph metadata (``footprint``)."""
    return _count(comp, "input", "computation") + max(_count(comp, "graph", "computation"), _count(comp, "output", "computation"))


def _field(obj: object, key: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise PeerError(f"no {key!r} in the answer")
    return obj[key]


def _first(items: object, name: str) -> Any:
    if not isinstance(items, list) or not items:
        raise PeerError(f"{name!r} is not a non-empty list")
    return items[0]


def _count(obj: object, key: str, where: str) -> int:
    value = _field(obj, key)
    if type(value) is not int or not 0 <= value < 1 << 63:
        raise PeerError(f"{where}.{key} is not a byte count: {str(value)[:40]}")
    return value
