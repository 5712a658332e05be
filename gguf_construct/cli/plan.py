"""``plan``: will it fit? llama.cpp's buffers for a model at a context, from the header alone (``planning``)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from fractions import Fraction

from ..core.tables import load_table
from .shared import EXIT_OK, EXIT_TROUBLE, command, whole

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_MOST_BYTES = 2**63 - 1  # a size past this is no memory a machine has


def size(text: str) -> int:
    """A byte count: 123, 512M, 8G, 8GiB, 1.5T (binary units), at most 2**63 - 1 bytes (exact: no float)."""
    m = re.fullmatch(r"\s*(\d{1,30}(?:\.\d{1,30})?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a size (e.g. 8G, 512M, 123456)")
    n = int(Fraction(m.group(1)) * _UNITS[m.group(2).lower()])
    if n > _MOST_BYTES:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is more than {_MOST_BYTES} bytes")
    return n


def layers(text: str) -> int | str:
    return "auto" if text == "auto" else whole(0, 2**31 - 1)(text)


def mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**20:10.2f} MiB"


def _report(p, source: str) -> str:
    c = p.context
    lines = [f"{source}: {p.architecture}"]
    lines.append(
        f"  context: n_ctx {c.n_ctx} ({c.n_ctx_seq} per sequence x {c.n_stream} stream(s)), n_batch {c.n_batch}, "
        f"n_ubatch {c.n_ubatch}, flash attention {'on' if c.flash_attn else 'off'}, K {c.type_k}, V {c.type_v}"
        + (f", sliding-window cache {c.n_ctx_swa} cells" if c.n_ctx_swa else "")
    )
    lines.append(f"  model      {mib(p.model_bytes)}")
    for name, n in sorted(p.weights.by_buffer.items()):
        lines.append(f"    {name:<12}{mib(n)}")
    if p.weights.repacked:
        lines.append(f"    ({len(p.weights.repacked)} tensors repacked for this CPU: {', '.join(p.features) or 'none'})")
    lines.append(f"  KV cache   {mib(p.kv_bytes)}" + (f"  ({len(p.kv_layers)} layers)" if p.kv_layers else ""))
    lines.append(f"  recurrent  {mib(p.recurrent_bytes)}")
    lines.append(f"  compute    {mib(p.compute_bytes)}")
    lines.append(f"  total      {mib(p.total_bytes)}")
    if p.gpu:
        fit = f", the most of {p.n_layer + 1} that fit in {mib(p.gpu_mem).strip()}" if p.gpu_mem is not None else ""
        lines.append(f"  GPU ({p.n_gpu_layers} layers offloaded{fit}): " + ", ".join(f"{k} {mib(v).strip()}" for k, v in p.gpu.items()))
    lines += [f"  note: {n}" for n in p.notes]
    return "\n".join(lines)


def _cmd_plan(args: argparse.Namespace) -> int:
    """A refusal is a ``PlanError`` that ``main`` reports: exit 1 for a model llama.cpp refuses, 2 for a request."""
    from ..planning import plan

    if args.n_gpu_layers == "auto" and args.gpu_mem is None:
        print("gguf-construct plan: --n-gpu-layers auto needs --gpu-mem SIZE", file=sys.stderr)
        return EXIT_TROUBLE
    if args.gpu_mem is not None and args.n_gpu_layers != "auto":
        print("gguf-construct plan: --gpu-mem is used with --n-gpu-layers auto only (it finds the layers that fit)", file=sys.stderr)
        return EXIT_TROUBLE
    p = _plan(plan, args)
    print(json.dumps({"file": args.file, **p.to_json()}, indent=2) if args.json else _report(p, args.file))
    return EXIT_OK


def _plan(plan, args: argparse.Namespace):
    return plan(
        args.file,
        n_ctx=args.ctx,
        n_batch=args.batch,
        n_ubatch=args.ubatch,
        n_seq_max=args.parallel,
        type_k=args.cache_type_k,
        type_v=args.cache_type_v,
        flash_attn=args.flash_attn,
        kv_unified=args.kv_unified,
        swa_full=args.swa_full,
        use_mmap=not args.no_mmap,
        n_gpu_layers=args.n_gpu_layers,
        gpu_mem=args.gpu_mem,
        features=None if args.cpu == "native" else tuple(f for f in args.cpu.split(",") if f and f != "none"),
    )


#: the K/V cache types llama.cpp's options accept (schema/memory.json)
CACHE_TYPES: tuple[str, ...] = tuple(load_table("memory").context["cache_types"])


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "plan",
        _cmd_plan,
        description=(
            "Plan the memory llama.cpp allocates for a GGUF model (a path, the first shard of a split set, or a "
            "URL: only the header is fetched): the model buffers (memory-mapped, repacked for this CPU, "
            "offloaded), the KV cache, the recurrent state, the compute buffer and the context llama.cpp really "
            "uses. Byte counts follow llama.cpp's own memory breakdown."
        ),
    )
    p.add_argument("file", metavar="FILE", help="a GGUF model file or URL")
    p.add_argument("--ctx", type=whole(0, 2**32 - 1), default=0, help="context size (0: the model's training context)")
    p.add_argument("--batch", type=whole(0, 2**32 - 1), default=0, help="logical batch size (llama.cpp's default 2048)")
    p.add_argument("--ubatch", type=whole(0, 2**32 - 1), default=0, help="physical batch size (llama.cpp's default 512)")
    p.add_argument("--parallel", type=whole(1, 2**32 - 1), default=1, help="sequences (llama.cpp's n_seq_max, at most 256)")
    p.add_argument("--cache-type-k", choices=CACHE_TYPES, default="f16", help="K cache type (default f16)")
    p.add_argument("--cache-type-v", choices=CACHE_TYPES, default="f16", help="V cache type (default f16)")
    p.add_argument("--flash-attn", choices=("auto", "on", "off"), default="auto", help="flash attention (default auto)")
    p.add_argument("--kv-unified", action="store_true", help="one KV buffer shared by all sequences")
    p.add_argument("--swa-full", action="store_true", help="a full-size sliding-window cache")
    p.add_argument("--no-mmap", action="store_true", help="plan for loading without mmap (weights copied to RAM)")
    p.add_argument("--n-gpu-layers", type=layers, default=0, metavar="N|auto", help="layers offloaded to a GPU, or auto with --gpu-mem")
    p.add_argument("--gpu-mem", type=size, metavar="SIZE", help="GPU memory for --n-gpu-layers auto (e.g. 8G)")
    p.add_argument(
        "--cpu",
        default="native",
        metavar="FEATURES",
        help="the CPU llama.cpp runs on, which decides weight repacking: native (this machine), none, or a list "
        "such as avx2 or avx2,avx512",
    )
    p.add_argument("--json", action="store_true", help="print JSON (byte counts as integers)")
