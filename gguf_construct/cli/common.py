"""What every command shares: the exit codes and the usage error."""

from __future__ import annotations

import sys
from typing import NoReturn

#: 0 the file is fine (or the command did its job), 1 the file is bad, 2 the command line is wrong.
EXIT_OK, EXIT_BAD, EXIT_USAGE = 0, 1, 2


def usage(message: str) -> NoReturn:
    """Stop with a usage error: the message on stderr, exit code 2."""
    print(message, file=sys.stderr)
    raise SystemExit(EXIT_USAGE)
