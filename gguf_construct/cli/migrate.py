"""``gguf-construct migrate`` (legacy → GGUF v3) and ``gguf-construct export`` (GGUF → GGJT v3 / rwkv.cpp v101)."""

from __future__ import annotations

import argparse
import sys

from ..migration import export, migrate
from .shared import EXIT_OK, add_in_out, command, finite, whole


def _cmd_migrate(args: argparse.Namespace) -> int:
    options = {
        k: v
        for k, v in (
            ("context_length", args.context_length),
            ("eps", args.eps),
            ("gqa", args.gqa),
            ("name", args.name),
            ("vocab", args.vocab),
        )
        if v is not None
    }
    report = migrate(args.input, args.output, hparams=args.hparams, progress=True, **options)
    for notice in report.notices:
        print(f"notice: {notice}", file=sys.stderr)
    print(report.summary())
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    print(export(args.input, args.output, args.to).summary())
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    from ..formats.legacy.magic import HPARAM_PROFILES  # not formats.ggml: the GGML schema at every start-up

    m = command(
        sub,
        "migrate",
        _cmd_migrate,
        description="Write IN as GGUF v3 at OUT. Tensors whose layout is current are copied bit for bit; retired block layouts are "
        "re-encoded when no value changes, else written as F16/F32 (with a notice). The output is validated and every tensor compared "
        "with the input before it replaces OUT; IN is never modified.",
    )
    add_in_out(m, "the GGUF v3 file to write", "the legacy model file to read (GGML, GGMF, GGJT, whisper.cpp, rwkv.cpp, GGUF v1/v2)")
    m.add_argument(
        "--context-length",
        type=whole(1, 2**32 - 1),
        help="llama.context_length / rwkv.context_length (default 2048 for llama, 1048576 for rwkv)",
    )
    m.add_argument(
        "--eps",
        type=finite(0, most=1.0),
        help="llama RMS-norm epsilon (default 1e-6, what llama.cpp used until July 2023; LLaMA-2 uses 1e-5)",
    )
    m.add_argument(
        "--gqa", type=whole(1, 2**32 - 1), help="llama grouped-query factor: head_count_kv = head_count / GQA (default 1; 70B: 8)"
    )
    m.add_argument("--name", help="general.name")
    m.add_argument(
        "--vocab",
        metavar="FILE",
        help="rwkv.cpp v6/v7: the World vocabulary file (rwkv_vocab_v20230424.txt format) for the 'rwkv' tokenizer; "
        "default: the 256 bytes for byte-level models, the World vocabulary shipped with gguf-construct otherwise",
    )
    m.add_argument("--hparams", choices=HPARAM_PROFILES, help="hyper-parameter layout of an unversioned 'ggml' file (default: detected)")

    e = command(
        sub,
        "export",
        _cmd_export,
        description="Write a GGUF file in a legacy format where its types allow; migrating the result back gives the same GGUF file.",
    )
    add_in_out(e, "the GGJT v3 or rwkv.cpp file to write", "the GGUF file to read")
    e.add_argument("--to", choices=("ggjt", "rwkv"), required=True, help="ggjt: GGJT v3 (llama); rwkv: rwkv.cpp v101 (rwkv, rwkv6, rwkv7)")
