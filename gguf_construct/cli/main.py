"""``gguf-construct``: inspect, validate, convert and dequantize model files.

Exit codes (grep's contract, every command): 0 done, or the check passed; 1 a model file is invalid (one line
per problem, no traceback), or two files differ; 2 trouble: usage, a missing or unreadable path, a missing
extra, the network, a refused request; 130, 143 or 129 stopped by Ctrl-C, SIGTERM or SIGHUP (``signals``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Sequence

from ..errors import FormatError, MissingExtraError
from .commands import COMMANDS
from .output import lossy_stdout
from .shared import EXIT_TROUBLE, exit_code, usage

#: ``parser``'s default: every command's full parser (the help tests and the docs walk them all)
ALL = "*"


def parser(command: str | None = ALL) -> argparse.ArgumentParser:
    """The command line's parser. ``command``: the one command whose module is imported and whose full parser is
    built; every other command is listed by its line in ``commands.COMMANDS`` alone (so ``--version``, ``--help``
    and each command import no other command's module). ``ALL``: every command's full parser."""
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
    wanted = COMMANDS[command].module if command in COMMANDS else None
    for name, entry in COMMANDS.items():
        if name in sub.choices:
            continue  # registered with another command of its module
        if command == ALL or entry.module == wanted:
            importlib.import_module(f"{__package__}.{entry.module}").register(sub)
        else:
            sub.add_parser(name, help=entry.help, add_help=False)
    limit_help = "change a named resource limit (schema/limits.json: string_length, nesting, dimensions, ...); repeatable"
    p.add_argument("--limit", action="append", default=[], dest="limits_global", metavar="NAME=VALUE", help=limit_help)
    for each in sub.choices.values():
        each.add_argument("--limit", action="append", default=[], dest="limits_command", metavar="NAME=VALUE", help=limit_help)
    return p


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is neither an option nor ``--limit``'s value (``--limit``
    as argparse reads it: any unambiguous prefix, ``--l`` on, takes the next word unless it has ``=VALUE``)."""
    words = iter(argv)
    for word in words:
        if len(word) > 2 and "--limit".startswith(word):
            next(words, None)
        elif word == "--":
            return next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _apply_limits(args: argparse.Namespace) -> None:
    """``--limit NAME=VALUE`` (before or after the command) for the rest of the process."""
    from ..core.limits import parse_assignment, set_defaults

    try:
        set_defaults(dict(parse_assignment(a) for a in [*getattr(args, "limits_global", []), *getattr(args, "limits_command", [])]))
    except ValueError as e:
        usage(f"gguf-construct: {e}")


def main(argv: Sequence[str] | None = None) -> int:
    from .remote_args import apply_remote_args
    from .signals import interruptible, status

    try:
        with interruptible(), lossy_stdout():  # the exit code is the command's, whatever became of its output
            argv = apply_remote_args(sys.argv[1:] if argv is None else argv)
            args = parser(command_of(argv)).parse_args(argv)
            _apply_limits(args)
            return _run(args)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP, while importing or running: cleaned up, one line
        with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr closed or absent: the status says it
            print("gguf-construct: interrupted", file=sys.stderr)
        return status()


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
