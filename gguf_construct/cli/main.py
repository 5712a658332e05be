"""``gguf-construct``: inspect and validate model files.

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
