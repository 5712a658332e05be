"""The command line's exit codes, command by command: grep's contract.

0: done, or the check passed; 1: a model file is invalid, or two files differ; 2: trouble (usage, a missing or
unreadable path, a missing extra, the network, a refused request such as an output that is the input).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gguf_construct.cli.main import main
from gguf_construct.data import example_path

EXAMPLE = str(example_path())


def code(*argv: object) -> int:
    """``main``'s exit code, argparse's own usage errors (SystemExit) included."""
    try:
        return main([str(a) for a in argv])
    except SystemExit as e:
        return int(e.code or 0)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    data = Path(EXAMPLE).read_bytes()
    (tmp_path / "m.gguf").write_bytes(data)
    (tmp_path / "cut.gguf").write_bytes(data[:200])  # ends inside the metadata
    (tmp_path / "short.gguf").write_bytes(data[:-64])  # a readable header, the last tensor's data cut short
    paths = {"ok": "m.gguf", "bad": "cut.gguf", "short": "short.gguf", "missing": "missing.gguf"}
    return {**{k: tmp_path / v for k, v in paths.items()}, "dir": tmp_path}


#: command -> (argv with {f} for the model file and {o} for an output path)
COMMANDS: dict[str, list[str]] = {
    "info": ["info", "{f}"],
    "validate": ["validate", "{f}"],
    "set": ["set", "{f}", "general.name", "x", "-o", "{o}"],
    "delete": ["delete", "{f}", "general.name", "-o", "{o}"],
    "rename-tensor": ["rename-tensor", "{f}", "output_norm.weight", "out_norm.weight", "-o", "{o}"],
    "diff": ["diff", "{f}", "{f}"],
    "hash": ["hash", "{f}"],
    "split": ["split", "{f}", "{o}", "--max-tensors", "4"],
    "convert": ["convert", "{f}", "{o}", "--byte-order", "big"],
    "quantize": ["quantize", "{f}", "{o}", "--type", "q8_0"],
    "dequant": ["dequant", "{f}", "{o}.npz"],
    "export": ["export", "{f}", "{o}", "--to", "ggjt"],
    "scan": ["scan", "{f}"],
}


def argv(command: str, f: Path, out: Path) -> list[str]:
    return [a.format(f=f, o=out) for a in COMMANDS[command]]


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "export"])  # export: see test_a_refused_request_is_2
def test_done_is_0(command: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert code(*argv(command, files["ok"], files["dir"] / "out.gguf")) == 0, capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_an_invalid_model_is_1(command: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert code(*argv(command, files["bad"], files["dir"] / "out.gguf")) == 1
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_path_is_2(command: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert code(*argv(command, files["missing"], files["dir"] / "out.gguf")) == 2
    out, err = capsys.readouterr()
    assert "missing.gguf" in out + err and "Traceback" not in err


@pytest.mark.parametrize("command", [*COMMANDS, "migrate", "merge", "fuzz"])
def test_usage_is_2(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert code(command, "--no-such-option") == 2


def test_files_that_differ_are_1(files: dict[str, Path]) -> None:
    assert code("set", files["ok"], "general.name", "other", "-o", files["dir"] / "other.gguf") == 0
    assert code("diff", files["ok"], files["dir"] / "other.gguf") == 1
    assert code("hash", files["ok"], "--against", files["dir"] / "other.gguf") == 0  # the tensors are the same
    assert code("rename-tensor", files["ok"], "output_norm.weight", "x.weight", "-o", files["dir"] / "renamed.gguf") == 0
    assert code("hash", files["ok"], "--against", files["dir"] / "renamed.gguf") == 1


def test_a_refused_request_is_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert code("convert", files["ok"], files["ok"], "--byte-order", "big") == 2  # the output is the input
    assert code("quantize", files["ok"], files["dir"] / "q.gguf", "--type", "Q4_K_M_X") == 2  # no such type
    assert code("set", files["ok"], "llama.context_length", "hello") == 2
    assert code("export", files["ok"], files["dir"] / "e.bin", "--to", "ggjt") == 2  # no legacy layout holds it
    (files["dir"] / "empty").mkdir()
    assert code("validate", files["dir"] / "empty") == 2  # no model file to check
    capsys.readouterr()


def test_a_missing_extra_is_2(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)  # import jinja2 fails as when it is not installed
    assert code("validate", "--security", files["ok"]) == 2
    assert "pip install 'gguf-construct[security]'" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from gguf_construct import __version__

    assert code("--version") == 0
    assert capsys.readouterr().out.strip() == f"gguf-construct {__version__}"


# -- what the command line says ---------------------------------------------------------------------------------
def test_messages_name_the_command_the_file_and_the_type(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert code("set", files["ok"], "llama.context_length", "hello") == 2
    assert "llama.context_length takes a u32: 'hello' is not an integer" in capsys.readouterr().err
    assert code("set", files["ok"], "general.name") == 2
    assert "give a VALUE for general.name" in capsys.readouterr().err
    assert code("convert", files["ok"], files["dir"] / "c.gguf", "--type", "q9") == 2
    err = capsys.readouterr().err
    assert "gguf-construct convert: error: argument --type" in err and "q4_K" in err and "Q4_K_M" in err
    assert code("convert", files["bad"], files["dir"] / "c.gguf", "--byte-order", "big") == 1
    assert capsys.readouterr().err.startswith(f"{files['bad']}: error: [")


def test_every_argument_has_help() -> None:
    from gguf_construct.cli.main import parser

    sub = next(a for a in parser()._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        for action in p._actions:
            assert action.help, f"{name} {action.dest}: no help"


# -- the exit code does not depend on what became of standard output -------------------------------------------
def _run_with_stdout(argv: list[str], how: str) -> tuple[int, str]:
    """Run the command line in a child whose standard output is ``how``: "closed" (descriptor 1 closed before the
    program starts) or "pipe-closed" (a pipe whose reader is gone before the first write)."""
    import os
    import subprocess
    import tempfile

    cmd = [sys.executable, "-m", "gguf_construct.cli.main", *argv]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with tempfile.TemporaryFile() as err:
        if how == "closed":
            status = subprocess.run(
                cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, timeout=120, preexec_fn=lambda: os.close(1)
            ).returncode
        else:
            child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
            assert child.stdout is not None
            child.stdout.close()  # before the interpreter has started: every write meets a pipe without a reader
            status = child.wait(timeout=120)
        err.seek(0)
        return status, err.read().decode("utf-8", "replace")


@pytest.mark.parametrize("how", ["closed", "pipe-closed"])
@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "export"])
def test_the_exit_code_does_not_depend_on_stdout(
    command: str, how: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A file cut inside its tensor data: reports (on stdout) come before the command decides it is invalid."""
    expected = code(*argv(command, files["short"], files["dir"] / f"kept-{command}.gguf"))
    capsys.readouterr()
    assert expected in (1, 2)
    got, err = _run_with_stdout(argv(command, files["short"], files["dir"] / f"{how}-{command}.gguf"), how)
    assert got == expected, err
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize("how", ["closed", "pipe-closed"])
def test_a_json_report_of_an_invalid_file_is_1_without_stdout(how: str, files: dict[str, Path]) -> None:
    for command in (["info"], ["info", "--json"], ["validate"], ["validate", "--json"]):
        got, err = _run_with_stdout([*command, str(files["short"])], how)
        assert got == 1 and "Traceback" not in err, (command, err)


# -- directories ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["info", "validate", "scan"])
def test_a_directory_without_model_files_is_2(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt.bak").write_text("not a model")
    for folder in ("empty", "notes"):
        assert code(command, tmp_path / folder) == 2
        out, err = capsys.readouterr()
        assert f"gguf-construct {command}: no model files found" in err and out == ""


def test_a_directory_with_a_model_is_read(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert code("info", files["dir"]) == 1  # m.gguf and the cut cut.gguf
    assert "m.gguf" in capsys.readouterr().out


# -- out of memory ----------------------------------------------------------------------------------------------
def test_out_of_memory_is_trouble(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from gguf_construct.cli import hash as hash_cli
    from gguf_construct.cli.shared import exit_code
    from gguf_construct.core import rules

    assert exit_code(rules.INTERNAL_MEMORY.error("out of memory")) == 2  # a guarded parse's MemoryError

    def exhausted(args: object) -> int:
        raise MemoryError

    monkeypatch.setattr(hash_cli, "_cmd_hash", exhausted)
    assert code("hash", files["ok"]) == 2
    assert "[internal.memory]" in capsys.readouterr().err
