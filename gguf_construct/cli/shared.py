"""What every command shares: the exit codes, the usage error, argument types and the registration of a
subcommand with the arguments several commands take alike."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from ..errors import FormatError, MissingExtraError

#: grep's contract, for every command: 0 done (or the check passed); 1 a model file is invalid, or two files
#: differ; 2 trouble: a usage error, a missing or unreadable path, a missing extra, the network, a refused output.
EXIT_OK, EXIT_BAD, EXIT_TROUBLE = 0, 1, 2

DIGITS = re.compile(r"[0-9]+\Z")  # ASCII only: int() also takes other scripts' digits and '1_000'


def usage(message: str) -> NoReturn:
    """Stop with a usage error: the message on stderr, exit code 2."""
    print(message, file=sys.stderr)
    raise SystemExit(EXIT_TROUBLE)


def exit_code(error: BaseException) -> int:
    """The exit code for an exception that ended a command: 1 when a model file's bytes break a rule, 2 for
    trouble (a refused request, a path that cannot be read, a missing extra, the network)."""
    from ..core.rules import is_request_fault

    if isinstance(error, FormatError):
        return EXIT_TROUBLE if is_request_fault(error) else EXIT_BAD
    if isinstance(error, (OSError, MissingExtraError)):
        return EXIT_TROUBLE
    raise error


def whole(least: int = 0, most: int = 2**63 - 1) -> Callable[[str], int]:
    """An argparse ``type``: a whole number written in ASCII digits, between ``least`` and ``most``. argparse
    turns its refusal into a usage error (exit 2), never a later ValueError from a writer or a hang."""

    def parse(text: str) -> int:
        digits = text.strip()
        neg = digits.startswith("-")
        if not DIGITS.match(digits[neg:]) or len(digits) > 20:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        value = -int(digits[1:]) if neg else int(digits)
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{value} is not between {least} and {most}")
        return value

    parse.__name__ = "whole number"
    return parse


def finite(least: float = 0.0, *, above: bool = True, most: float = float("inf")) -> Callable[[str], float]:
    """An argparse ``type``: a finite decimal number above (or, ``above=False``, at least) ``least`` and below
    ``most``: ``nan``, ``inf`` and ``1e99999`` are usage errors."""

    def parse(text: str) -> float:
        try:
            value = float(text) if text.strip().isascii() else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < least or (above and value == least) or value > most:
            raise argparse.ArgumentTypeError(
                f"{text!r} must be {'above' if above else 'at least'} {least:g}" + (f" and at most {most:g}" if math.isfinite(most) else "")
            )
        return value

    parse.__name__ = "number"
    return parse


def command(
    sub: argparse._SubParsersAction,
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    description: str | None = None,
    **options,
) -> argparse.ArgumentParser:
    """Register the subcommand ``name``: its parser (its line in the command list from ``commands.COMMANDS``,
    ``description`` on its own page, ``options`` such as an epilog passed to argparse) with ``run(args) -> exit
    code`` as its handler."""
    from .commands import COMMANDS

    p = sub.add_parser(name, help=COMMANDS[name].help, description=description, **options)
    p.set_defaults(run=run)
    return p


def add_in_out(p: argparse.ArgumentParser, output_help: str, input_help: str = "the model file to read (a path or a URL)") -> None:
    """``IN OUT``: the commands that write one file from another (each takes ``--sync``). The CLI's convention: an
    output a command must have is a positional ``OUT``; an optional one is ``-o/--output``."""
    p.add_argument("input", metavar="IN", help=input_help)
    p.add_argument("output", metavar="OUT", help=output_help)
    add_sync(p)


SYNC_HELP = (
    "fsync what is written (and its folder) before returning, even a new file; by default only a file that "
    "replaces an existing one is fsynced before its rename, and a new file is left to the page cache as cp leaves it"
)


def add_sync(p: argparse.ArgumentParser) -> None:
    """``--sync``: every command that writes files takes it; ``main`` runs the command under
    ``fileio.durability(True)``, so every write of the command is fsynced (see ``fileio``)."""
    p.add_argument("--sync", action="store_true", help=SYNC_HELP)
