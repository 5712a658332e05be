"""``gguf-construct``: inspect, validate, convert and dequantize model files.

Exit codes (grep's contract, every command): 0 done, or the check passed; 1 a model file is invalid (one line
per problem, no traceback), or two files differ; 2 trouble: usage, a missing or unreadable path, a missing
extra, the network, a refused request.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..core.progress import progress
from ..errors import FormatError, MissingExtraError
from . import convert, diff, edit, info, plan, quantize, scan, split, validate
from . import fuzz as fuzz_cli
from . import hash as hash_cli
from . import migrate as migrate_cli
from .output import lossy_stdout
from .shared import EXIT_OK, EXIT_TROUBLE, command, exit_code, usage


def _cmd_dequant(args: argparse.Namespace) -> int:
    from ..api.fileio import check_output, files_of, reading
    from ..api.registry import load
    from ..core import rules

    kind = os.path.splitext(args.output)[1].lower()
    if kind not in (".npy", ".npz"):  # np.save/np.savez would add their suffix: the file written is the one named
        raise rules.OUTPUT_SUFFIX.error(f"{args.output}: name an .npz file (any number of tensors) or an .npy file (one tensor)")
    check_output(args.output, [args.file])
    f = load(args.file)
    names = args.tensor or list(f.tensors)
    missing = [n for n in names if n not in f.tensors]
    if missing:
        usage(f"gguf-construct dequant: no tensor {missing[0]!r} in {args.file}")
    if kind == ".npy" and len(names) != 1:
        usage("gguf-construct dequant: .npy holds one tensor: name it with --tensor")
    with reading(files_of(f)):
        write_arrays(args.output, f, names)
    print(f"{args.output}: {len(names)} tensors as float32")
    return EXIT_OK


def write_arrays(path: str, f: Any, names: list[str]) -> None:
    """Dequantize ``names`` of ``f`` into ``path`` (.npy: the one tensor; else an .npz), atomically and at exactly
    that path: numpy writes into the temporary file object, so it adds no suffix of its own."""
    import numpy as np

    from ..api.fileio import write_atomic

    def write(out: Any) -> None:
        import zipfile

        if path.lower().endswith(".npy"):
            np.save(out, f.tensors[names[0]].to_numpy())
            return
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:  # np.savez's layout, one array at a time
            for n in progress(names, len(names), "dequantizing", unit="tensor", minimum=8):
                with z.open(n + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, f.tensors[n].to_numpy(), allow_pickle=False)

    write_atomic(path, write)


def _cmd_example(args: argparse.Namespace) -> int:
    from ..data import example_path

    print(example_path())
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    from .remote_args import HELP

    p = argparse.ArgumentParser(
        prog="gguf-construct",
        description="Inspect and validate GGUF model files.",
        epilog=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .. import __version__

    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info.register(sub)
    validate.register(sub)
    edit.register(sub)
    diff.register(sub)
    hash_cli.register(sub)
    plan.register(sub)
    split.register(sub)

    convert.register(sub)
    quantize.register(sub)
    scan.register(sub)
    migrate_cli.register(sub)
    fuzz_cli.register(sub)

    deq = command(
        sub,
        "dequant",
        _cmd_dequant,
        help="write tensors as float32 numpy arrays",
        description="Dequantize tensors (bit-exact with ggml) into an .npz (any number of "
        "tensors) or .npy (one tensor), shaped in numpy order.",
    )
    deq.add_argument("file", metavar="FILE", help="a model file or URL (any format gguf-construct reads)")
    deq.add_argument("output", metavar="OUT", help="OUT.npz (any number of tensors) or OUT.npy (one tensor)")
    deq.add_argument("--tensor", action="append", metavar="NAME", help="a tensor to write (repeatable; default: all)")
    command(sub, "example", _cmd_example, help="print the path of a small GGUF file shipped with the package")
    limit_help = "change a named resource limit (schema/limits.json: string_length, nesting, dimensions, ...); repeatable"
    p.add_argument("--limit", action="append", default=[], dest="limits_global", metavar="NAME=VALUE", help=limit_help)
    for each in sub.choices.values():
        each.add_argument("--limit", action="append", default=[], dest="limits_command", metavar="NAME=VALUE", help=limit_help)
    return p


def _apply_limits(args: argparse.Namespace) -> None:
    """``--limit NAME=VALUE`` (before or after the command) for the rest of the process."""
    from ..core.limits import parse_assignment, set_defaults
    from .shared import usage

    try:
        set_defaults(dict(parse_assignment(a) for a in [*getattr(args, "limits_global", []), *getattr(args, "limits_command", [])]))
    except ValueError as e:
        usage(f"gguf-construct: {e}")


def main(argv: Sequence[str] | None = None) -> int:
    from .remote_args import apply_remote_args

    with lossy_stdout():  # the exit code is the command's, whatever became of its output
        args = parser().parse_args(apply_remote_args(sys.argv[1:] if argv is None else argv))
        _apply_limits(args)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command; its errors become one line on stderr and grep's exit code."""
    try:
        if getattr(args, "sync", False):  # a writing command's --sync: every write of the command is fsynced
            from ..api.fileio import durability

            with durability(True):
                return args.run(args)
        return args.run(args)
    except FormatError as e:
        print(f"{_subject(args)}: error: {e.describe()}", file=sys.stderr)
        return exit_code(e)
    except MemoryError:  # the machine's limit, not the file's fault: trouble, as a guarded parse reports it
        from ..core import rules

        print(f"{_subject(args)}: error: {rules.INTERNAL_MEMORY.error('out of memory').describe()}", file=sys.stderr)
        return EXIT_TROUBLE
    except (OSError, MissingExtraError) as e:
        print(f"gguf-construct {args.command}: {e}", file=sys.stderr)
        return exit_code(e)
    finally:
        if "gguf_construct.sources.options" in sys.modules:  # the command's remote budget ends with it
            from ..sources.options import configure

            configure(budget=None)


def _subject(args: argparse.Namespace) -> str:
    """What an error is about: the file the command was reading (``args.file``, kept current by commands that read
    several), else its input, else the command."""
    return str(getattr(args, "file", None) or getattr(args, "input", None) or f"gguf-construct {args.command}")


if __name__ == "__main__":
    sys.exit(main())
