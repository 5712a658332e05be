"""``gguf-construct``: inspect, validate, convert and dequantize model files.

Exit codes: 0 the file is fine, 1 the file is bad (one line per problem, no traceback), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ..api.file import load
from ..errors import FormatError
from ..validation import PROFILES, validate_file
from .report import info_json, info_text

EXIT_OK, EXIT_BAD, EXIT_USAGE = 0, 1, 2


def _cmd_info(args: argparse.Namespace) -> int:
    f = load(args.file, strict=False)
    if args.json:
        json.dump(info_json(f, full=args.full), sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        print(info_text(f, args.file, full=args.full))
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    worst = EXIT_OK
    for path in args.files:
        issues = validate_file(path, args.profile)
        errors = [i for i in issues if i.severity == "error"]
        for issue in issues:
            print(f"{path}: {issue.line()}")
        if not errors:
            print(f"{path}: ok ({args.profile} profile)")
        else:
            worst = EXIT_BAD
    return worst


def _cmd_convert(args: argparse.Namespace) -> int:
    f = load(args.input)
    if args.byte_order is None and args.version is None:
        raise SystemExit("gguf-construct convert: give --byte-order and/or --version")
    f.save(args.output, byte_order=args.byte_order, version=args.version)
    print(f"{args.output}: GGUF v{args.version or f.version}, {args.byte_order or f.byte_order}-endian, {len(f.tensors)} tensors")
    return EXIT_OK


def _progress(items: list, total: int, desc: str):
    """tqdm over ``items`` when tqdm is installed (an optional extra), else the items as they are."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, total=total, desc=desc, unit="tensor", disable=total < 8 or not sys.stderr.isatty())


def _cmd_dequant(args: argparse.Namespace) -> int:
    import numpy as np

    f = load(args.file)
    names = args.tensor or list(f.tensors)
    missing = [n for n in names if n not in f.tensors]
    if missing:
        raise SystemExit(f"gguf-construct dequant: no tensor {missing[0]!r} in {args.file}")
    if args.output.endswith(".npy"):
        if len(names) != 1:
            raise SystemExit("gguf-construct dequant: .npy holds one tensor: name it with --tensor")
        np.save(args.output, f.tensors[names[0]].to_numpy())
    else:
        arrays = {n: f.tensors[n].to_numpy() for n in _progress(names, len(names), "dequantizing")}
        np.savez(args.output, **arrays)
    print(f"{args.output}: {len(names)} tensors as float32")
    return EXIT_OK


def _cmd_example(args: argparse.Namespace) -> int:
    from ..data import example_path

    print(example_path())
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gguf-construct", description="Inspect and validate GGUF model files.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser("info", help="show a file's header, metadata and tensors", description="Show a file's header, metadata (with types) and tensors.")
    info.add_argument("file")
    info.add_argument("--json", action="store_true", help="print JSON (type names as ggml spells them)")
    info.add_argument("--full", action="store_true", help="include every array element")
    info.set_defaults(run=_cmd_info)

    val = sub.add_parser(
        "validate",
        help="check files against the spec or ggml's reader",
        description="Check files; print one line per problem (rule, field, byte offset). Exit 1 if any file is invalid.",
    )
    val.add_argument("files", nargs="+", metavar="FILE")
    val.add_argument("--profile", choices=PROFILES, default="spec", help="'spec': the GGUF spec's rules (default); 'ggml': also what ggml's C reader demands")
    val.set_defaults(run=_cmd_validate)

    conv = sub.add_parser(
        "convert",
        help="rewrite a file in the other byte order or another GGUF version",
        description="Rewrite a GGUF file: --byte-order converts every tensor block by block (any ggml type); --version writes v1, v2 or v3.",
    )
    conv.add_argument("input")
    conv.add_argument("output")
    conv.add_argument("--byte-order", choices=("little", "big"))
    conv.add_argument("--version", type=int, choices=(1, 2, 3))
    conv.set_defaults(run=_cmd_convert)

    deq = sub.add_parser(
        "dequant",
        help="write tensors as float32 numpy arrays",
        description="Dequantize tensors (bit-exact with ggml) into an .npz (any number of tensors) or .npy (one tensor), shaped in numpy order.",
    )
    deq.add_argument("file")
    deq.add_argument("--tensor", action="append", metavar="NAME", help="a tensor to write (repeatable; default: all)")
    deq.add_argument("-o", "--output", required=True, help="OUT.npz or OUT.npy")
    deq.set_defaults(run=_cmd_dequant)

    ex = sub.add_parser("example", help="print the path of a small GGUF file shipped with the package")
    ex.set_defaults(run=_cmd_example)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except FormatError as e:
        print(f"{getattr(args, 'file', '')}: error: {e.describe()}", file=sys.stderr)
        return EXIT_BAD
    except BrokenPipeError:
        return EXIT_OK
    except OSError as e:
        print(f"gguf-construct: {e}", file=sys.stderr)
        return EXIT_BAD


if __name__ == "__main__":
    sys.exit(main())
