"""``command_of`` picks the one command whose parser is built: for every argv form the result (namespace, or
exit status and output) equals the full parser's."""

from __future__ import annotations

import contextlib
import io

import pytest

from gguf_construct.cli.main import ALL, command_of, parser

ARGV_FORMS = [
    [],
    ["info", "m.gguf"],
    ["--limit", "string_length=5", "info", "m.gguf"],
    ["--limit=string_length=5", "info", "m.gguf"],
    ["--lim", "string_length=5", "info", "m.gguf"],
    ["--li=string_length=5", "info", "m.gguf"],
    ["--l", "nesting=3", "validate", "m.gguf"],
    ["--limit", "info", "validate", "m.gguf"],
    ["--limit", "diff", "info", "m.gguf"],
    ["info", "--limit", "string_length=5", "m.gguf"],
    ["--", "info", "m.gguf"],
    ["--limit", "nesting=3", "--", "info", "m.gguf"],
    ["info", "--", "-m.gguf"],
    ["nosuch", "m.gguf"],
    ["-", "m.gguf"],
    ["--nosuch", "info", "m.gguf"],
    ["-h"],
    ["--help"],
    ["--version"],
    ["info", "-h"],
    ["diff", "--help"],
    ["--limit"],
    ["--limit", "--version"],
    ["diff", "a.gguf", "b.gguf", "--header-only"],
    ["hash", "m.gguf"],
    ["set", "m.gguf", "general.name", "x"],
    ["merge", "--help"],
    ["example"],
    ["INFO", "m.gguf"],
    ["--max-b", "5", "info", "m.gguf"],
    ["--header", "info: x", "info", "m.gguf"],
    ["--limit", "-5", "info", "m.gguf"],
    ["--version", "info"],
    ["info", "diff", "m.gguf"],
]


def _parse(argv: list[str], command: str | None) -> tuple[object, ...]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            ns = parser(command).parse_args(argv)
        except SystemExit as e:
            return ("exit", e.code, out.getvalue(), err.getvalue().splitlines()[-1:])
    return ("ok", {k: getattr(v, "__qualname__", v) for k, v in sorted(vars(ns).items())})


@pytest.mark.parametrize("argv", ARGV_FORMS, ids=" ".join)
def test_command_of_parses_as_the_full_parser(argv: list[str]) -> None:
    assert _parse(argv, command_of(argv)) == _parse(argv, ALL)
