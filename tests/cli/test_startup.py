"""Start-up: ``--version`` and ``--help`` import no command module, and each command imports its own alone (the
command list in ``cli/commands.py`` gives every other command's line in the help)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gguf_construct.cli.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
COMMAND_MODULES = {f"gguf_construct.cli.{c.module}" for c in COMMANDS.values()}
#: command modules another command's module uses: convert takes quantize's options (``--type`` and the rest)
USES = {"convert": {"quantize"}}
PROBE = """
import contextlib, io, json, sys
from gguf_construct.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("gguf_construct.cli.")), "out": out.getvalue()}))
"""


def probe(*argv: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []], ids=repr)
def test_version_and_help_import_no_command(argv: list[str]) -> None:
    seen = probe(*argv)
    assert not COMMAND_MODULES & set(seen["modules"])
    if argv == ["--help"]:
        for name, entry in COMMANDS.items():  # every command is listed, with its line
            assert name in seen["out"] and entry.help[:40] in " ".join(seen["out"].split())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_imports_its_own_module_alone(name: str) -> None:
    seen = probe(name, "--help")
    own = {COMMANDS[name].module, *USES.get(COMMANDS[name].module, ())}
    assert COMMAND_MODULES & set(seen["modules"]) == {f"gguf_construct.cli.{m}" for m in own}
    assert seen["out"].startswith(f"usage: gguf-construct {name}")
