"""The fuzzer under attack by the readers it runs and the files it is given: answers too long or too deep, messages
that forge findings.tsv rows, readers that never read, close their output or leave children behind, --known and
--output paths that are not what they seem, and signals. Every case ends in a finding or a clean refusal, with
nothing left behind (no temporary folder, no reader process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gguf_construct import GGUF, new
from gguf_construct.testing.fuzzing import run
from gguf_construct.testing.fuzzing.findings_file import (
    HEADER,
    KnownListError,
    Row,
    load_known,
    read_findings,
    write_findings,
)
from gguf_construct.testing.fuzzing.targets import ADAPTIVE_FLOOR, MAX_ANSWER, LineTarget, OneShotTarget, Pace, parse_answer

HOSTILE = Path(__file__).parents[1] / "fuzz_targets" / "hostile_reader.py"
TOY = Path(__file__).parents[1] / "fuzz_targets" / "toy_reader.py"
ROOT = Path(__file__).parents[2]


def gguf_with(marker: str) -> bytes:
    f = new()
    f.metadata["general.name"] = marker
    return bytes(GGUF.build(f.to_container()))


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """A temporary folder of this test's own, for everything the fuzzer creates (checked empty afterwards)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pids_in(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def corpus_of(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


# -- answers ----------------------------------------------------------------------------------------------------
def test_deep_or_invalid_answers_are_broken_not_a_crash():
    deep = b'{"ok": true, "view": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    assert parse_answer(deep).status == "broken" and "nested" in parse_answer(deep).error
    shallow_but_too_deep = b'{"ok": true, "view": {"kv": ' + b"[" * 100 + b"]" * 100 + b"}}"
    assert parse_answer(shallow_but_too_deep).status == "broken"
    assert parse_answer(b'{"ok": false, "error": "\xff\xfe"}').status == "broken"
    assert parse_answer(b'{"ok": true, "view": {"kv": [["a", "u8", 1]]}}').status == "accepted"


MARKERS = ["FLOOD", "DEEP", "NEWLINE", "UTF8", "CLOSE", "FORK", "HANG"]


def test_each_attack_of_a_reader_is_an_answer_and_the_reader_restarts(tmp_path):
    target = LineTarget([sys.executable, str(HOSTILE)], timeout=3.0)
    expected = {
        "FLOOD": ("broken", "longer than"),
        "DEEP": ("broken", "nested"),
        "NEWLINE": ("rejected", "forged"),
        "UTF8": ("broken", "not JSON"),
        "CLOSE": ("crash", "died"),
        "FORK": ("hang", "no answer"),  # the child holds the output open: no end of file, the time limit
        "HANG": ("hang", "no answer"),
    }
    try:
        for marker, (status, piece) in expected.items():
            (tmp_path / "f.gguf").write_bytes(gguf_with("HOSTILE:" + marker))
            answer = target.ask(str(tmp_path / "f.gguf"))
            assert answer.status == status and piece in answer.error, (marker, answer.status, answer.error[:200])
            (tmp_path / "f.gguf").write_bytes(gguf_with("fine"))
            assert target.ask(str(tmp_path / "f.gguf")).status == "accepted", marker
    finally:
        target.close()


def test_a_campaign_against_a_hostile_reader_ends_in_findings_and_leaves_nothing(tmp_path, private_tmp):
    corpus = corpus_of(tmp_path / "corpus", {f"{i}-{m.lower()}.gguf": gguf_with("HOSTILE:" + m) for i, m in enumerate(MARKERS)})
    pids, out = tmp_path / "pids", tmp_path / "out"
    report = run(f"{sys.executable} {HOSTILE} --pids {pids}", count=len(MARKERS), corpus=corpus, timeout=3.0, out=out, minimize_budget=0)
    assert report.files == len(MARKERS)
    # the message with a newline, a tab and a "*" row stays in its field: read back, no wildcard silences anything
    rows = read_findings(out / "findings.tsv")
    assert [r.signature for r in rows] == load_known(out / "findings.tsv") == [k.signature for k in report.findings.values()]
    assert "*" not in load_known(out / "findings.tsv")
    forged = next(r for r in rows if "forged" in r.explanation)
    assert "\n*\t\n001-x.gguf\t1\tcrash\t*\tforged" in forged.explanation
    # nothing left: no reader process (the forked child included), no temporary folder or file
    assert len(pids_in(pids)) >= len(MARKERS) - 1
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids_in(pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids_in(pids) if alive(p)]
    assert list(private_tmp.iterdir()) == []


def test_a_one_shot_command_printing_too_much_is_cut_off(tmp_path):
    answer = OneShotTarget(f"{sys.executable} -c 'import sys; sys.stdout.write(\"x\" * {MAX_ANSWER + 4096})' {{}}", timeout=30).ask("x")
    assert answer.status == "broken" and "longer than" in answer.error


def test_bytes_are_sent_under_the_time_limit(tmp_path):
    """A reader that never reads its input: the 4 MiB request cannot be written, and the run does not wait for it."""
    target = LineTarget([sys.executable, str(HOSTILE), "--no-read"], send="bytes", timeout=1.0)
    try:
        start = time.monotonic()
        answer = target.ask(str(tmp_path / "unused"), b"GGUF" + b"\0" * (4 << 20))
        assert answer.status == "hang" and time.monotonic() - start < 1.0 + 5.0, answer  # the limit, plus a start-up
    finally:
        target.close()


# -- findings.tsv and --known ---------------------------------------------------------------------------------
def test_findings_tsv_round_trips_any_text(tmp_path):
    rows = [
        Row("001-a.gguf", 12, "crash", "crash/x/sig\twith tab", 'line one\n*\nline "three"\r', "from seed:a"),
        Row("002-b.gguf", 0, "hang", "hang/x", "", "from corpus:\x00b"),
        Row("003-c.gguf", 7, "value-mismatch", "value-mismatch/x/kv.value:" + "k" * 300_000, "long key", "from seed:c"),
    ]
    write_findings(tmp_path / "findings.tsv", rows)
    assert read_findings(tmp_path / "findings.tsv") == rows
    assert load_known(tmp_path / "findings.tsv") == [r.signature for r in rows]
    assert (tmp_path / "findings.tsv").read_text().splitlines()[0] == "\t".join(f'"{h}"' for h in HEADER)


@pytest.mark.parametrize(
    "content, why",
    [
        (b"\xff\xfe signature\n", "not UTF-8"),
        (b"x" * ((16 << 20) + 1), "larger than"),
        (b'"reproducer"\t"bytes"\n"a"\t"b"\n', "not a findings.tsv"),
    ],
)
def test_a_known_file_is_untrusted_text(tmp_path, content, why):
    path = tmp_path / "known"
    path.write_bytes(content)
    with pytest.raises(KnownListError, match=why):
        load_known(path)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder"])
def test_a_known_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path, special):
    path = tmp_path / "known"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "folder":
        path.mkdir()
    else:
        path = Path(special)
    done = subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "fuzz", "--against", "gguf-py", "--known", str(path), "--count", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_output_refuses_a_foreign_findings_tsv_or_a_symlink_and_resumes_its_own(tmp_path, private_tmp):
    corpus = corpus_of(tmp_path / "corpus", {"a.gguf": gguf_with("TOY:SEGV"), "b.gguf": gguf_with("TOY:FPE")})
    reader = f"{sys.executable} {TOY}"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "findings.tsv").write_text("my notes\n")
    with pytest.raises(Exception, match="output.foreign"):
        run(reader, count=2, corpus=corpus, out=foreign, minimize_budget=0)
    assert (foreign / "findings.tsv").read_text() == "my notes\n"
    linked = tmp_path / "linked"
    linked.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (linked / "findings.tsv").symlink_to(victim)
    with pytest.raises(Exception, match="output.foreign"):
        run(reader, count=2, corpus=corpus, out=linked, minimize_budget=0)
    assert victim.read_text() == "keep\n"
    out = tmp_path / "out"
    first = run(reader, count=2, corpus=corpus, out=out, minimize_budget=0)
    saved = sorted(p.name for p in out.iterdir())
    assert len(first.findings) == 2 and len(saved) == 3
    again = run(reader, count=2, corpus=corpus, out=out, minimize_budget=0)
    assert not again.findings and all(k.earlier for k in again.kinds.values()) and sorted(p.name for p in out.iterdir()) == saved
    assert list(private_tmp.iterdir()) == []


# -- throughput ------------------------------------------------------------------------------------------------
def test_the_adaptive_limit_follows_the_usual_time_once_a_reader_hung():
    pace = Pace(5.0)
    for _ in range(20):
        pace.record(0.01)
    assert pace.limit() == 5.0  # no hang seen yet: the whole limit
    pace.adaptive = True
    assert pace.limit() == ADAPTIVE_FLOOR
    for _ in range(300):
        pace.record(0.2)
    assert pace.limit() == 2.0 and "adaptive" in pace.hang(pace.limit())
    for _ in range(300):
        pace.record(4.0)
    assert pace.limit() == 5.0  # never more than the limit given


def test_a_known_hang_costs_its_whole_limit_once(tmp_path):
    files = {f"a{i:02d}.gguf": gguf_with(f"fine {i}") for i in range(20)}
    files |= {f"h{i}.gguf": gguf_with(f"HOSTILE:HANG {i}") for i in range(3)}
    corpus = corpus_of(tmp_path / "corpus", files)
    report = run(f"{sys.executable} {HOSTILE} --ready", count=len(files), corpus=corpus, timeout=6.0, minimize_budget=0)
    hang = next(k for k in report.kinds.values() if k.cls == "hang")
    assert hang.count == 3
    assert report.seconds < 6.0 + 2 * 6.0 - 6.0, report.seconds  # the two repeats cost far less than 6 s each


def test_lanes_try_the_same_files(tmp_path):
    corpus = corpus_of(tmp_path / "corpus", {f"{m}.gguf": gguf_with("TOY:" + m) for m in ("SEGV", "FPE", "ABORT", "ASAN")})
    one = run(f"{sys.executable} {TOY}", count=12, corpus=corpus, timeout=3.0, seed=4, jobs=1)
    two = run(f"{sys.executable} {TOY}", count=12, corpus=corpus, timeout=3.0, seed=4, jobs=2)
    assert one.files == two.files == 12
    assert {k: v.count for k, v in one.kinds.items()} == {k: v.count for k, v in two.kinds.items()}


# -- the end of a run ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_prints_the_summary_keeps_the_findings_and_leaves_nothing(tmp_path, signum, status):
    corpus = corpus_of(tmp_path / "corpus", {"a.gguf": gguf_with("HOSTILE:UTF8"), "b.gguf": gguf_with("HOSTILE:HANG")})
    scratch, pids, out = tmp_path / "tmp", tmp_path / "pids", tmp_path / "out"
    scratch.mkdir()
    reader = f"{sys.executable} {HOSTILE} --pids {pids}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gguf_construct.cli.main", "fuzz", "--against", reader, "--corpus", str(corpus)]
        + ["--seconds", "120", "--timeout", "60", "-o", str(out), "--jobs", "1", "--minimize", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(scratch)),
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 90
        while len(pids_in(pids)) < 2 and time.monotonic() < deadline:  # restarted after the broken answer: on the hang
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == status, (stdout, stderr)
    assert stdout.startswith("interrupted: ") and "Traceback" not in stderr, (stdout, stderr)
    assert [r.cls for r in read_findings(out / "findings.tsv")] == ["adapter-representation"]  # found before the signal: saved
    assert not [p for p in pids_in(pids) if alive(p)]
    assert list(scratch.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "out", "pids", "tmp"]


def test_seconds_is_a_deadline_minimization_included(tmp_path):
    """Every file is a new kind to minimize slowly (a hang each time): the run still ends on time."""
    corpus = corpus_of(tmp_path / "corpus", {f"h{i}.gguf": gguf_with(f"TOY:HANG {i}") for i in range(4)})
    start = time.monotonic()
    report = run(f"{sys.executable} {TOY}", count=None, seconds=6.0, corpus=corpus, timeout=4.0, out=tmp_path / "out", minimize_budget=50)
    assert report.seconds < 6.0 + 3.0 and time.monotonic() - start < 6.0 + 3.0, report.seconds


def test_the_adapter_record_says_which_readers_cut_strings_at_a_nul():
    from gguf_construct.testing.fuzzing import ADAPTERS, compare_views

    ours = {"kv": [["general.name", "str", "a\0b"]]}
    theirs = {"kv": [["general.name", "str", "a"]]}
    cutting = sorted(name for name, a in ADAPTERS.items() if a.c_strings)
    assert cutting == ["ggml", "llama.cpp"]
    assert compare_views(ours, theirs, "ggml") == [] and compare_views(ours, theirs, "gguf-py") != []
