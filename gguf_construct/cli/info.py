"""``info``: a readable report of one model file (``--json``, ``--markdown``), or a table over many files and
directories, read on a process pool with a progress bar (``many_files``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..errors import FormatError
from .many_files import default_jobs, model_paths, run_pool
from .shared import EXIT_BAD, EXIT_OK, EXIT_TROUBLE, command, whole


# -- info ----------------------------------------------------------------------------------------------
def _info_row(path: str) -> dict[str, Any]:
    """One file's summary row, or its error (for the many-files table; runs in a worker process)."""
    from ..api.registry import load
    from ..core.rules import is_request_fault
    from .report import summary_row

    try:
        return {"ok": True, **summary_row(load(path, strict=False), path)}
    except FormatError as e:
        return {"ok": False, "file": path, "error": e.describe(), "unreadable": is_request_fault(e)}
    except OSError as e:
        return {"ok": False, "file": path, "error": str(e), "unreadable": True}


def _cmd_info(args: argparse.Namespace) -> int:
    from ..api.registry import load
    from .report import info_json, info_markdown, info_text, reading_warnings

    files = args.files
    if len(files) == 1 and not os.path.isdir(files[0]):
        args.file = files[0]
        try:
            f = load(files[0], strict=False)
        except FormatError as e:
            return _show_partial(files[0], e, args)
        issues = reading_warnings(f, files[0])
        for issue in issues:
            print(f"{files[0]}: {issue.line()}", file=sys.stderr)
        if args.json:
            json.dump(info_json(f, full=args.full, path=files[0]), sys.stdout, ensure_ascii=False, indent=1)
            sys.stdout.write("\n")
        elif args.markdown:
            sys.stdout.write(info_markdown(f, files[0]))
        else:
            print(info_text(f, files[0], full=args.full))
        return EXIT_BAD if any(i.severity == "error" for i in issues) else EXIT_OK  # a file cut short
    paths = model_paths("info", files, skip_later_shards=True)
    rows = run_pool(_info_row, paths, args.jobs, "info")
    print_rows(rows, args)
    if any(r.get("unreadable") for r in rows):
        return EXIT_TROUBLE
    return EXIT_OK if all(r["ok"] and not r.get("errors") for r in rows) else EXIT_BAD


def _show_partial(path: str, error: FormatError, args: argparse.Namespace) -> int:
    """A file that stops at a value of an unknown type: show the keys before it (``readable_prefix``), say
    why nothing after it can be shown, exit 1. Any other error propagates."""
    from .report import info_json, info_text

    partial = getattr(error, "partial", None)
    if partial is None:
        raise error
    declared = getattr(partial, "declared", {})
    if args.json:
        doc = {**info_json(partial, full=args.full, path=path), "error": error.describe(), "partial": True, "declared": declared}
        json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        lines = info_text(partial, path, full=args.full).split("\n")
        header = (
            f"  GGUF v{partial.version}, {partial.byte_order}-endian: PARTIAL, the header declares {declared.get('metadata_kv_count')} "
            f"keys and {declared.get('tensor_count')} tensors; readable: the first {len(partial.metadata)} keys"
        )
        print("\n".join([path, header, "", *lines[lines.index("metadata:") :]]))
    print(
        f"{path}: error: {error.describe()}; shown: the {len(partial.metadata)} keys before it. A value of an unknown type has no "
        "known length, so the later keys and the tensor infos cannot be located.",
        file=sys.stderr,
    )
    return EXIT_BAD


def print_rows(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    from .report import ABSURD_COUNT, human_bytes, table

    if args.json:
        json.dump(rows, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return
    header = ["FILE", "FORMAT", "ARCH", "PARAMS", "TENSORS", "DATA", "MAIN TYPE", "STATUS"]
    body = []
    for r in rows:
        if r["ok"]:
            from ..core.naming import size_label

            notes = [f"TRUNCATED: {e.split('the file is cut short: ', 1)[-1]}" for e in r.get("errors", [])]
            notes += [f"{len(r['warnings'])} reading warnings"] if r.get("warnings") else []
            notes += [f"{r['name_warnings']} name warnings"] if r["name_warnings"] else []
            status = ", ".join(notes) or "ok"
            body.append(
                [
                    r["file"],
                    r["format"],
                    r["architecture"] or "-",
                    (size_label(r["parameters"]) if r["parameters"] < ABSURD_COUNT else "implausible") if r["parameters"] else "0",
                    r["tensors"],
                    human_bytes(r["tensor_bytes"]),
                    r["main_type"] or "-",
                    status,
                ]
            )
        else:
            body.append([r["file"], "-", "-", "-", "-", "-", "-", "error: " + r["error"]])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(":--" for _ in header) + "|")
        for b in body:
            print("| " + " | ".join(str(c).replace("|", "\\|") for c in b) + " |")
    else:
        print(table(body, header, right={3, 4, 5}))
    bad = sum(not r["ok"] for r in rows)
    cut = sum(bool(r.get("errors")) for r in rows)
    print(
        f"\n{len(rows)} files, {len(rows) - bad} read, {bad} unreadable" + (f", {cut} truncated" if cut else ""),
        file=sys.stderr if args.markdown else sys.stdout,
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "info",
        _cmd_info,
        description=(
            "Show a model file: architecture, parameter count, size by tensor type, general.* keys, tokenizer, chat "
            "template, the file name's components (with warnings where the metadata disagrees), then every key with "
            "its type and every tensor. Given several files or a directory: one summary row per file, read on a "
            "process pool. A gguf-split set opens as one model from its first shard."
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="model files or directories")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON (type names as ggml spells them)")
    fmt.add_argument("--markdown", action="store_true", help="print Markdown (like gguf_dump --markdown)")
    p.add_argument("--full", action="store_true", help="include every array element")
    p.add_argument(
        "-j",
        "--jobs",
        type=whole(1, 4096),
        default=default_jobs(),
        metavar="N",
        help="worker processes for many files (default: %(default)s)",
    )
