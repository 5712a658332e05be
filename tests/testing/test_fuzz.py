"""The differential harness: the fuzz command against gguf-py, ggml and a command, reproducers, determinism,
the workers' caps, the mutators and the minimizer (the protocol and triage: test_fuzz_protocol.py)."""

from __future__ import annotations

import argparse
import random
import subprocess
import sys

from conftest import DATA, corpus_file
from oracle_pins import known_behaviour

from gguf_construct.cli import fuzz as fuzz_cli
from gguf_construct.testing.fuzzing import Answer, ddmin, findings, mutate, run
from gguf_construct.testing.fuzzing.findings_file import read_findings
from gguf_construct.testing.fuzzing.runner import _python_worker
from gguf_construct.testing.fuzzing.targets import OneShotTarget


def fuzz_main(argv):
    p = argparse.ArgumentParser()
    fuzz_cli.register(p.add_subparsers())
    args = p.parse_args(["fuzz", *argv])
    return args.run(args)


def test_fuzz_against_gguf_py_reports_and_saves_reproducers(tmp_path, capsys):
    code = fuzz_main(
        ["--against", "gguf-py", "--count", "24", "--seed", "1", "--out", str(tmp_path), "--minimize", "30", "--corpus", str(DATA)]
    )
    out = capsys.readouterr().out
    assert code == 1, out  # gguf-py refuses v1 and type 42 (q2_0) in the corpus: there are always disagreements
    rows = read_findings(tmp_path / "findings.tsv")
    assert rows
    for name, size, cls, signature, explanation, _origin in rows:
        assert (tmp_path / name).stat().st_size == int(size) and explanation and signature.startswith(cls + "/")
    assert "gguf-py rejects a file we accept: ValueError: np.uint32(42) is not a valid GGMLQuantizationType" in out  # q2_0
    # gguf-py dequantizes big-endian words as native ones: seven types of gguf-py-be.gguf differ: one kind
    assert "dequant:big-endian" in (tmp_path / "findings.tsv").read_text() and "dequant:f16" not in out


def test_same_seed_same_findings():
    a, b = (run("gguf-py", count=14, seed=5, corpus=DATA) for _ in range(2))
    assert a.files == b.files == 14
    assert {k: f.count for k, f in a.findings.items()} == {k: f.count for k, f in b.findings.items()}


def test_against_ggml_finds_exactly_the_known_disagreements():
    """On tests/data and seed 4 the fuzzer meets three things ggml-python 0.0.45's ggml does differently, and no more;
    ggml's first log line (not its last, a generic "failed to read") tells the causes apart."""
    report = run("ggml", count=24, seed=4, corpus=DATA)
    found = {f.signature: (f.count, f.origin.split(" ")[0]) for f in report.findings.values()}
    assert found == {
        # ggml-python 0.0.45 predates type 42 (q2_0), which the all-types file holds: its ggml cannot read the tensor info
        "rejected-valid/ggml/gguf_init_from_file returned NULL: tensor 'S' has invalid ggml type N. should be in [N, N)": (
            1,
            "corpus:generated/ggml-writer-all-types.gguf",
        ),
        # ggml reads a file in its host's byte order only
        "rejected-valid/ggml/gguf_init_from_file returned NULL: failed to load model: this "
        "GGUF file version N is extremely large, is there a mismatc": (
            2,
            "corpus:generated/gguf-py-be.gguf",
        ),
        # ggml (ggml-python 0.0.45) does not check that tensor data lies inside the file
        # (tests/reproducers/ggml-accepts-truncated-data.gguf)
        "accepted-invalid/ggml/tensor.bounds": (1, "corpus:generated/gguf-py-align64.gguf"),
    }, (known_behaviour("ggml-python", "disagrees on exactly these files"), report.lines())
    assert report.files == 24 and report.agreed == 20


def test_a_command_printing_info_json_agrees_with_us(tmp_path):
    script = tmp_path / "reader.py"
    script.write_text(
        "import json, sys\nfrom gguf_construct import load\nfrom gguf_construct.api.describe import info_json\n"
        "json.dump(info_json(load(sys.argv[1])), sys.stdout, default=str)\n"
    )
    report = run(f"{sys.executable} {script} {{}}", count=8, seed=3, corpus=DATA, timeout=60)  # a loaded machine starts Python slowly
    assert report.files == 8 and not report.findings, report.lines()


def test_time_and_memory_caps():
    answer = OneShotTarget("sh -c 'sleep 5' {}", timeout=1.0).ask("/dev/null")
    assert answer.status == "hang", answer
    greedy = OneShotTarget(f"{sys.executable} -c 'bytearray(1 << 31)' {{}}", timeout=20.0, memory_mb=256, guard="as")
    answer = greedy.ask("/dev/null")
    assert answer.status == "rejected" and "MemoryError" in answer.error, answer
    worker = _python_worker("ours", "spec", 256, timeout=20.0)
    try:  # the built-in workers cap their own address space: a reader asked for too much says MemoryError
        assert worker.ask(str(DATA / "generated" / "gguf-py-le.gguf")).status == "accepted"
    finally:
        worker.close()


def test_mutations_are_reproducible_and_change_the_file():
    data = corpus_file("generated/gguf-py-le.gguf").read_bytes()  # parses, so schema-aware mutations apply
    a = [mutate(data, random.Random(9), rounds=2) for _ in range(2)]
    assert a[0] == a[1] and a[0][0] != data and a[0][1]
    notes = " ".join(mutate(data, random.Random(s))[1] for s in range(40))
    assert "->" in notes  # schema-aware field mutations happen


def test_ddmin_finds_a_minimal_input():
    data = bytes(range(200)) + b"XY" + bytes(range(100))
    assert ddmin(data, lambda d: b"XY" in d, budget=400) == b"XY"


def test_compare_ignores_conventions_and_names_differences():
    view = {
        "version": 3,
        "alignment": 32,
        "data_offset": 100,
        "kv": [["a.s", "str", "x\0y"], ["a.e", "arr[u8]", []]],
        "tensors": [],
        "dequant": {},
    }
    ok = Answer("accepted", view=view)
    theirs = Answer("accepted", view={**view, "kv": [["a.s", "str", "x"], ["a.e", "arr[u8]", []]], "data_offset": 128})
    assert findings(ok, theirs, "ggml") == []  # C strings end at NUL; no tensors, no data offset
    refused = Answer("rejected", error="ValueError: nope 12", where="r.py:1")
    assert [f.signature for f in findings(ok, refused, "gguf-py")] == ["rejected-valid/gguf-py/ValueError: nope N@r.py:1"]
    changed = Answer("accepted", view={**view, "kv": [["a.s", "str", "z"], ["a.e", "arr[u8]", []]]})
    assert [f.signature for f in findings(ok, changed, "gguf-py")] == ["value-mismatch/gguf-py/kv.value:a.s"]


def test_fuzz_help_through_the_main_command():
    done = subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", "fuzz", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--against" in done.stdout


def test_trouble_is_one_line_and_exit_status_2(capsys, tmp_path):
    assert fuzz_main(["--against", "no-such-reader-program {}", "--count", "1"]) == 2
    assert fuzz_main(["--against", "gguf-py", "--corpus", str(tmp_path / "missing")]) == 2
    assert fuzz_main(["--against", "gguf-py", "--known", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("gguf-construct fuzz: ") for line in err), err
