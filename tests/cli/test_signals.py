"""Every command ends on Ctrl-C, SIGTERM and SIGHUP the same way: its temporary output removed, one line on stderr,
no traceback, and the shell's status for the signal (128 + its number) — while importing as while working."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gguf_construct.data import example_path
from tests.sparse_models import SHAPES, write_sparse

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "gguf_construct.cli.main"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _as_from_a_terminal() -> None:
    """The child starts with the signals at their defaults, as a command typed at a shell does (a test run in the
    background or under nohup would otherwise pass its ignored signals on)."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def _run(args: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen([*COMMAND, *args], env=ENV, stderr=subprocess.PIPE, text=True, **kw)


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 40 GB sparse model: quantizing it takes long enough to be interrupted mid-write."""
    path = tmp_path_factory.mktemp("signals") / "llama70b.gguf"
    write_sparse(path, SHAPES["llama70b"][0]())
    return path


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_write_removes_the_temporary_output(big_model: Path, tmp_path: Path, signum: signal.Signals) -> None:
    out = tmp_path / "out"
    out.mkdir()
    p = _run(["quantize", str(big_model), str(out / "q.gguf"), "--type", "q8_0"], stdout=subprocess.DEVNULL, preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.monotonic() + 60
        while not any(out.iterdir()) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.02)
        assert [e.name for e in out.iterdir() if e.name.endswith(".tmp")], "the command never began writing"
        p.send_signal(signum)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 128 + signum
    assert err.splitlines()[-1] == "gguf-construct: interrupted"
    assert "Traceback" not in err
    assert list(out.iterdir()) == []  # no temporary left, no target created


def test_ctrl_c_while_importing_prints_no_traceback() -> None:
    """The signal lands at every point of the command's start-up in turn: while its modules import (numpy, construct,
    the schema), while it works, or after it is done. The interpreter's own start-up and the package's import (its
    first ~40 ms) are Python's, as in any Python program, and not tried."""
    for delay in [0.15 + i * 0.025 for i in range(14)]:
        p = _run(["info", str(example_path())], stdout=subprocess.DEVNULL, preexec_fn=_as_from_a_terminal)
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert "Traceback" not in err, (delay, err)
        assert p.returncode in (0, 130, -signal.SIGINT), (delay, p.returncode, err)
        if p.returncode == 130:
            assert err.splitlines()[-1] == "gguf-construct: interrupted"


def test_an_ignored_hangup_stays_ignored(tmp_path: Path) -> None:
    """``nohup``: a process started ignoring SIGHUP keeps ignoring it."""
    p = _run(["info", str(example_path())], stdout=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    time.sleep(0.3)
    p.send_signal(signal.SIGHUP)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "llama" in out
