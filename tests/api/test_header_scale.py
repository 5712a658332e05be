"""Header work costs the header, not the file: ``info``, ``validate``, ``plan``, ``diff``, ``scan`` and a lazy
``load`` on a 40 GB model (a Llama-3-70B-like header with a 201,088-token vocabulary, the tensor data a hole in a
sparse file) run in a child process under a hard data-size limit and within a resident-memory bound, with the data
all zeros (every position of a window of zeros looks like a short string) and random. Any pass over the tensor data
(a scan window sized by the file, a checksum, a copy) breaks the bound: the data is 300 times the bound.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.peak_rss import Measured, run_measured
from tests.sparse_models import SHAPES, write_sparse

ROOT = Path(__file__).resolve().parents[2]
#: the child's hard limit on private writable memory (RLIMIT_DATA: numpy's and Python's heap; a mapped file does
#: not count), and the resident set it must stay under
DATA_LIMIT = 512 << 20
RSS_BOUND = 200 << 20
#: wall time: generous for a loaded 2-core machine; a pass over 40 GB takes minutes or is killed
SECONDS_BOUND = 30


@pytest.fixture(scope="module")
def big_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sparse")
    f = SHAPES["llama70b"][0]()
    out = {}
    for fill in ("zeros", "random"):
        path = folder / f"llama70b-{fill}.gguf"
        size = write_sparse(path, f, fill, random_span=64 << 20)
        assert size > 35 << 30
        out[fill] = path
    return out


def run_bounded(*args: str | Path, script: str | None = None) -> Measured:
    """The CLI (or a Python ``script``) in a fresh child under the data limit, measured."""
    argv = [sys.executable, "-c", script] if script else [sys.executable, "-m", "gguf_construct.cli.main"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return run_measured([*argv, *map(str, args)], timeout=4 * SECONDS_BOUND, data_limit=DATA_LIMIT, env=env)


def _check(done: Measured, what: str, codes: tuple[int, ...] = (0,)) -> None:
    assert done.returncode in codes, (what, done.returncode, done.stderr[-2000:])
    assert done.peak_rss < RSS_BOUND, f"{what}: peak RSS {done.peak_rss >> 20} MiB"
    assert done.seconds < SECONDS_BOUND, f"{what}: {done.seconds:.1f} s"


@pytest.mark.parametrize("fill", ["zeros", "random"])
@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["info", "--json"],
        ["validate"],
        ["validate", "--profile", "ggml", "--keys"],
        ["plan", "--ctx", "8192", "--json"],
        ["split", "--dry-run", "--max-size", "4G"],
    ],
    ids=" ".join,
)
def test_header_commands_cost_the_header(big_models: dict[str, Path], command: list[str], fill: str) -> None:
    done = run_bounded(command[0], big_models[fill], *command[1:])
    _check(done, " ".join(command))
    if command[0] == "plan":
        assert json.loads(done.stdout)["model_bytes"] > 35 << 30


def test_diff_of_headers_and_scan(big_models: dict[str, Path], tmp_path: Path) -> None:
    """``diff A A`` reads no tensor (one unchanged file); ``--header-only`` compares two files' headers alone;
    ``scan DIR`` opens each file once, for its header."""
    _check(run_bounded("diff", big_models["zeros"], big_models["zeros"]), "diff A A")
    _check(run_bounded("diff", big_models["zeros"], big_models["random"], "--header-only"), "diff --header-only")
    done = run_bounded("scan", big_models["zeros"].parent, "-o", tmp_path / "scan.jsonl")
    _check(done, "scan")
    assert len((tmp_path / "scan.jsonl").read_text().splitlines()) == 2


def test_lazy_load_reads_one_tensor(big_models: dict[str, Path]) -> None:
    script = (
        "import sys, gguf_construct as gc\n"
        "f = gc.load(sys.argv[1])\n"
        "print(f.tensors['blk.79.attn_norm.weight'].to_numpy().shape, len(f.metadata['tokenizer.ggml.tokens']))\n"
    )
    done = run_bounded(big_models["random"], script=script)
    _check(done, "load + one tensor")
    assert done.stdout.split() == ["(8192,)", "201088"]
