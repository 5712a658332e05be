"""``fuzz --dask``: a campaign in slices over a LocalCluster of one and two workers, its findings merged (each kind
saved once, counts added) and resumed (new slices, earlier kinds not saved again)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gguf_construct import GGUF, new
from gguf_construct.testing.fuzzing import cluster
from gguf_construct.testing.fuzzing.findings_file import read_findings

distributed = pytest.importorskip("distributed")

TOY = Path(__file__).parents[1] / "fuzz_targets" / "toy_reader.py"


def gguf_with(marker: str) -> bytes:
    f = new()
    f.metadata["general.name"] = marker
    return bytes(GGUF.build(f.to_container()))


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for marker in ("SEGV", "FPE", "ABORT"):
        (folder / f"{marker.lower()}.gguf").write_bytes(gguf_with("TOY:" + marker))
    (folder / "fine.gguf").write_bytes(gguf_with("fine"))
    return folder


@pytest.mark.parametrize("workers", [1, 2])
def test_a_campaign_over_a_local_cluster_merges_and_resumes(tmp_path, corpus, workers, monkeypatch):
    monkeypatch.setattr(cluster, "SLICE_FILES", 6)  # several slices per worker
    monkeypatch.setattr(cluster, "hypothesis_storage", lambda: None)  # the workers are threads of this test session
    out = tmp_path / "out"
    with (
        distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=None) as lc,
        distributed.Client(lc) as client,
    ):
        report = cluster.run_dask(f"{sys.executable} {TOY}", client, count=24, corpus=corpus, out=out, timeout=3.0, minimize_budget=0)
        assert report.files == 24 and not report.interrupted
        rows = read_findings(out / "findings.tsv")
        # every slice starts with the corpus: each of its kinds is found by every slice and saved once
        toy = [k for k in report.findings.values() if k.cls in ("crash", "dos")]
        assert len(toy) == 3 and all(k.count >= 4 for k in toy), report.lines()
        assert len({r.signature for r in rows}) == len(rows) == len(report.findings)
        assert all((out / r.reproducer).stat().st_size == r.size for r in rows)
        assert json.loads((out / cluster.STATE).read_text())["next_slice"] == 4
        again = cluster.run_dask(f"{sys.executable} {TOY}", client, count=6, corpus=corpus, out=out, timeout=3.0, minimize_budget=0)
    assert not again.findings and all(k.earlier for k in again.kinds.values())
    assert read_findings(out / "findings.tsv") == rows
    assert json.loads((out / cluster.STATE).read_text())["next_slice"] == 5


def test_slices_have_their_own_seeds():
    assert len({cluster.slice_seed(s, n) for s in range(5) for n in range(100)}) == 500


def test_the_command_runs_a_campaign_on_a_scheduler_address(tmp_path, corpus, monkeypatch, capsys):
    from gguf_construct.cli.main import main

    monkeypatch.setattr(cluster, "hypothesis_storage", lambda: None)
    out = tmp_path / "out"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as lc:
        argv = ["fuzz", "--against", f"{sys.executable} {TOY}", "--dask", lc.scheduler_address, "--count", "6"]
        code = main([*argv, "--corpus", str(corpus), "-o", str(out), "--minimize", "0", "--timeout", "3"])
    assert code == 1 and "6 files" in capsys.readouterr().out
    assert {r.cls for r in read_findings(out / "findings.tsv")} >= {"crash", "dos"}


def test_an_unreachable_scheduler_is_trouble(capsys, monkeypatch):
    from gguf_construct.cli.main import main

    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 2.0)
    assert main(["fuzz", "--against", "gguf-py", "--dask", "tcp://127.0.0.1:9", "--count", "1"]) == 2
    assert "Traceback" not in capsys.readouterr().err
