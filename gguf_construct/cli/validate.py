"""``validate``: check files and directories against a profile, on a process pool; ``--keys`` adds the spec's
standard-key rules (required keys present, standard keys with their types). One line per problem (at most
``--max-issues`` per file, then a count of the rest; ``--json`` lists all), then a summary table when there are
several files. Exit 1 when any file has an error."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from functools import partial
from typing import Any

from ..core.rules import lookup
from ..errors import FormatError
from ..validation import Issue, check_keys
from ..validation.profiles import PROFILES
from .many_files import default_jobs, model_paths, run_pool
from .shared import EXIT_BAD, EXIT_OK, EXIT_TROUBLE, command, whole

#: Issues printed per file by default: a file broken 60,000 ways is known to be broken after a screenful.
MAX_ISSUES = 50


def validate_one(path: str, profile: str = "spec", keys: bool = False, security: bool = False) -> dict[str, Any]:
    """Every issue of one file as plain data (runs in a worker process)."""
    from ..api.registry import load, validate_file

    issues = validate_file(path, profile)
    if (keys or security) and not any(i.severity == "error" and i.rule in ("file.read", "format.unknown", "header.magic") for i in issues):
        try:
            f = load(path, strict=False)
            seen = {(i.rule, i.path) for i in issues}
            if keys:
                issues += [i for i in check_keys(f) if (i.rule, i.path) not in seen]
            if security:
                from ..security.chat_templates import scan_templates

                issues += scan_templates(f)
        except (FormatError, OSError):
            pass  # the structural issues above already say why the file cannot be read

    errors = sum(i.severity == "error" for i in issues)
    unreadable = any(i.severity == "error" and (r := lookup(i.rule)) is not None and r.fault == "request" for i in issues)
    return {
        "file": path,
        "ok": errors == 0,
        "unreadable": unreadable,
        "errors": errors,
        "warnings": len(issues) - errors,
        "issues": [asdict(i) for i in issues],
    }


def _line(issue: dict[str, Any]) -> str:
    return Issue(**issue).line()


def _cmd_validate(args: argparse.Namespace) -> int:
    paths = model_paths("validate", args.files)
    if args.security:  # before any file is read: a missing extra is trouble (exit 2), whatever the files hold
        from ..security.chat_templates import _jinja

        _jinja()
    results = run_pool(partial(validate_one, profile=args.profile, keys=args.keys, security=args.security), paths, args.jobs, "validating")
    if args.json:
        json.dump(results, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        what = f"{args.profile} profile" + (", standard keys" if args.keys else "") + (", chat templates" if args.security else "")
        for r in results:
            shown = r["issues"] if not args.max_issues else r["issues"][: args.max_issues]
            for issue in shown:
                print(f"{r['file']}: {_line(issue)}")
            if len(shown) < len(r["issues"]):
                rest = r["issues"][len(shown) :]
                errors = sum(i["severity"] == "error" for i in rest)
                print(
                    f"{r['file']}: ... and {len(rest)} more issues ({errors} errors, {len(rest) - errors} "
                    "warnings; --max-issues 0 shows all, --json lists all)"
                )
            if r["ok"]:
                print(f"{r['file']}: ok ({what})")
        if len(results) > 1:
            from .report import table

            rows = [[r["file"], "ok" if r["ok"] else "INVALID", r["errors"], r["warnings"]] for r in results]
            bad = sum(not r["ok"] for r in results)
            print()
            print(table(rows, ["FILE", "STATUS", "ERRORS", "WARNINGS"], right={2, 3}))
            print(f"\n{len(results)} files: {len(results) - bad} valid, {bad} invalid ({what})")
    if any(r["unreadable"] for r in results):  # a path or URL that could not be read: trouble, as grep's 2
        return EXIT_TROUBLE
    return EXIT_OK if all(r["ok"] for r in results) else EXIT_BAD


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "validate",
        _cmd_validate,
        description=(
            "Check files (and every model file under a directory); print one line per problem (rule, field, byte "
            "offset) and, for several files, a summary table. Exit 1 if any file is invalid."
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="model files or directories")
    p.add_argument(
        "--profile",
        choices=PROFILES,
        default="spec",
        help="'spec': each format's own rules (default); 'ggml': also what ggml's readers demand (GGUF, legacy formats); "
        "'hf': also what the safetensors library demands (safetensors files). A profile checks other formats as 'spec'",
    )
    p.add_argument(
        "--keys",
        action="store_true",
        help="also check standard keys: required keys present (general.*, the architecture's), standard types",
    )
    p.add_argument(
        "--security",
        action="store_true",
        help="also scan every tokenizer.chat_template* with Jinja2's sandboxed parser for sandbox escapes (needs the 'security' extra)",
    )
    p.add_argument(
        "--max-issues",
        type=whole(0, 2**31),
        default=MAX_ISSUES,
        metavar="N",
        help="print at most N issues per file, then a count of the rest (default: %(default)s; 0: all). --json always lists every issue",
    )
    p.add_argument("--json", action="store_true", help="print the issues as JSON (every issue, whatever --max-issues)")
    p.add_argument("-j", "--jobs", type=whole(1, 4096), default=default_jobs(), metavar="N", help="worker processes (default: %(default)s)")
