"""The fuzzer's targets and triage: the line protocol, restarts, and the class of every way a reader can fail,
proven on a deliberately broken toy reader (tests/fuzz_targets/toy_reader.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gguf_construct import GGUF, new
from gguf_construct.testing.fuzzing import findings, run
from gguf_construct.testing.fuzzing.findings_file import load_known, read_findings
from gguf_construct.testing.fuzzing.targets import Answer, LineTarget, OneShotTarget
from gguf_construct.testing.fuzzing.triage import compare_views, failure, first_frame

TOY = Path(__file__).parents[1] / "fuzz_targets" / "toy_reader.py"


def gguf_with(marker: str) -> bytes:
    f = new()
    f.metadata["general.name"] = marker
    return bytes(GGUF.build(f.to_container()))


@pytest.fixture
def toy(tmp_path):
    starts = tmp_path / "starts"
    # 4 s: room for a loaded machine (only the hang waits it out)
    target = LineTarget([sys.executable, str(TOY), "--count-starts", str(starts)], timeout=4.0, memory_mb=300, guard="rss")
    yield target, starts
    target.close()


def ask(target, tmp_path, data: bytes, name: str = "x.gguf") -> Answer:
    path = tmp_path / name
    path.write_bytes(data)
    return target.ask(str(path))


# every way the toy fails: (marker, class, a piece of the signature)
FAILURES = [
    ("TOY:SEGV", "crash", "SIGSEGV"),
    ("TOY:ABORT", "dos", "GGML_ASSERT(key && key[0])@gguf.cpp:612"),
    ("TOY:LENGTH", "dos", "uncaught std::length_error"),
    ("TOY:FPE", "crash", "arithmetic-trap"),
    ("TOY:HANG", "hang", "hang/"),
    ("TOY:MEM", "memory", "memory/"),
    ("TOY:ASAN", "crash", "heap-buffer-overflow@gguf_read_emplace_helper (gguf.cpp:314)"),
]


def test_each_failure_is_classified_and_the_target_restarts(toy, tmp_path):
    target, starts = toy
    good = gguf_with("fine")
    assert ask(target, tmp_path, good).status == "accepted"
    for marker, cls, piece in FAILURES:
        answer = ask(target, tmp_path, gguf_with(marker))
        found = failure(answer, "toy")
        assert found is not None and found.cls == cls and piece in found.signature, (marker, answer, found)
        assert ask(target, tmp_path, good).status == "accepted", marker  # restarted, answering again
    assert starts.read_text().count("start") == 1 + len(FAILURES)


def test_an_allocator_refusal_is_not_a_memory_error(toy, tmp_path):
    target, _ = toy
    answer = ask(target, tmp_path, gguf_with("TOY:REFUSED"))
    assert answer.status == "rejected" and failure(answer, "toy") is None
    found = findings(Answer("accepted", view={}), answer, "toy")
    assert [f.signature for f in found] == ["memory/toy/refused", "rejected-valid/toy/failed to allocate tensor data"]


def test_a_file_both_readers_reject_still_counts_the_crash():
    ours = Answer("rejected", error="TruncatedError: ...", rule="file.truncated")
    theirs = Answer("crash", returncode=-11, error="Crash")
    assert [f.cls for f in findings(ours, theirs, "toy")] == ["crash"]
    assert findings(ours, Answer("rejected", error="bad magic"), "toy") == []


def test_a_campaign_against_the_toy_files_every_failure_in_its_class(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for marker, _cls, _piece in FAILURES:
        (corpus / f"{marker[4:].lower()}.gguf").write_bytes(gguf_with(marker))
    (corpus / "both-reject.gguf").write_bytes(b"GGUF\x03\x00\x00\x00TOY:SEGV")  # we reject it too: still a crash
    out = tmp_path / "out"
    report = run(f"{sys.executable} {TOY}", count=len(FAILURES) + 1, corpus=corpus, timeout=1.5, memory_mb=300, out=out, minimize_budget=0)
    classes = {k.signature.split("/")[0] + ":" + k.signature for k in report.findings.values()}
    assert report.files == len(FAILURES) + 1
    for _marker, cls, piece in FAILURES:
        assert any(c.startswith(cls + ":") and piece.split("/")[-1] in c for c in classes), (cls, piece, classes)
    crash = next(k for k in report.findings.values() if "SIGSEGV" in k.signature)
    assert crash.count == 2  # the file we reject as well as the one we accept
    rows = read_findings(out / "findings.tsv")
    assert len(rows) == len(report.findings) and all((out / r.reproducer).stat().st_size == r.size for r in rows)
    # --known silences what was triaged: the same campaign has nothing new
    known = tmp_path / "known.txt"
    known.write_text("# triaged\n" + "\n".join(k.signature for k in report.findings.values()) + "\n")
    again = run(f"{sys.executable} {TOY}", count=3, corpus=corpus, timeout=1.5, memory_mb=300, known=load_known(known))
    assert again.files == 3 and again.kinds and not again.findings
    assert load_known(out / "findings.tsv") == [r.signature for r in rows]  # a findings.tsv works as a --known file


def test_bytes_requests(tmp_path):
    script = tmp_path / "echo_size.py"
    script.write_text(
        "import json, sys\nb = sys.stdin.buffer\nwhile True:\n    line = b.readline()\n    if not line: break\n"
        "    n = int(line.split()[1]); data = b.read(n)\n"
        "    sys.stdout.write(json.dumps({'ok': True, 'view': {'size': len(data), 'head': "
        "data[:4].decode('latin-1')}}) + '\\n'); sys.stdout.flush()\n"
    )
    target = LineTarget([sys.executable, str(script)], send="bytes", timeout=10)
    try:
        for data in (b"GGUF\n\n\x00x", b"", b"\n" * 1000):
            answer = target.ask(str(tmp_path / "unused"), data)
            assert answer.view == {"size": len(data), "head": data[:4].decode("latin-1")}
    finally:
        target.close()


def test_one_shot_commands_crash_hang_and_answer(tmp_path):
    path = tmp_path / "f.gguf"
    path.write_bytes(gguf_with("x"))
    assert failure(OneShotTarget("sh -c 'kill -SEGV $$' {}").ask(str(path)), "cmd").cls == "crash"
    assert failure(OneShotTarget("sh -c 'sleep 5' {}", timeout=0.5).ask(str(path)), "cmd").cls == "hang"
    rejected = OneShotTarget("sh -c 'echo nope >&2; exit 3' {}").ask(str(path))
    assert rejected.status == "rejected" and rejected.error == "nope"
    accepted = OneShotTarget("""sh -c 'echo "{\\"version\\": 3}"' {}""").ask(str(path))
    assert accepted.status == "accepted" and accepted.view == {"version": 3}


def test_unknown_matches_anything_and_every_difference_is_reported():
    ours = {
        "version": 3,
        "alignment": 32,
        "data_offset": 64,
        "kv": [["a", "u32", 1], ["b", "str", "x"], ["c", "f32", 1069547520]],
        "tensors": [["t", "f32", [4], 0, 16], ["u", "q4_0", [32], 32, 18]],
        "dequant": {"t": "aa", "u": "bb"},
    }
    theirs = {
        "version": "unknown",
        "alignment": 32,
        "data_offset": "unknown",
        "kv": [["a", "u32", 2], ["b", "str", "y"], ["c", "f32", 1.5]],
        "tensors": [["t", "f32", "unknown", 0, 17], ["u", "q4_0", [32], 32, 19]],
        "dequant": {"t": "aa", "u": "cc"},
    }
    found = {f.signature: f.cls for f in compare_views(ours, theirs, "x")}
    assert found == {
        "value-mismatch/x/kv.value:a": "value-mismatch",
        "value-mismatch/x/kv.value:b": "value-mismatch",
        "adapter-representation/x/kv.value:f32": "adapter-representation",  # a float where the view has bit patterns
        "value-mismatch/x/tensor.nbytes": "value-mismatch",  # one kind for both tensors, not one per type
        "value-mismatch/x/dequant:q4_0": "value-mismatch",
    }
    theirs["dequant"] = {"t": "zz", "u": "cc"}  # every tensor differs: one cause of the file, not one per type
    assert [f.signature for f in compare_views(ours, theirs, "x") if "dequant" in f.signature] == ["value-mismatch/x/dequant:many-types"]
    # gguf-py gives no element type for an empty array, nested ones included (whose values no view compares)
    empty = {"kv": [["e", "arr[u8]", []], ["n", "arr[arr]", None]]}
    assert compare_views(empty, {"kv": [["e", "arr[None]", None], ["n", "arr[None]", None]]}, "gguf-py") == []
    # in a big-endian file, even one type that differs is the file's byte order: one kind, whatever the type
    theirs["dequant"] = {"t": "zz", "u": "dd"}
    ours_be = {**ours, "byte_order": "big"}
    assert [f.signature for f in compare_views(ours_be, theirs, "x") if "dequant" in f.signature] == ["value-mismatch/x/dequant:big-endian"]
    theirs["dequant"] = {"t": "aa", "u": "dd"}
    assert [f.signature for f in compare_views(ours_be, theirs, "x") if "dequant" in f.signature] == ["value-mismatch/x/dequant:big-endian"]


def test_first_frame_skips_the_runtime():
    assert first_frame("    #0 0x1 in __interceptor_memcpy x.inc:1\n    #1 0x2 in f /a/b.cpp:3:4\n") == "f (b.cpp:3)"
    assert (
        first_frame('Traceback (most recent call last):\n  File "/a/x.py", line 1, in <module>\n  File "/a/y.py", line 9, in g\n')
        == "g (y.py:9)"
    )


# -- the shipped adapters agree with us on the seed files ---------------------------------------------------
SEEDS = sorted((Path(__file__).parents[2] / "gguf_construct" / "testing" / "fuzzing" / "seeds").glob("*.gguf"))


def _node_reader() -> list[str]:
    """The example adapter for @huggingface/gguf (the test is marked ``hf_gguf``: deselected without node and it)."""
    return ["node", str(Path(__file__).parents[2] / "gguf_construct" / "testing" / "fuzzing" / "examples" / "hf_gguf_reader.cjs")]


@pytest.mark.parametrize("reader", ["gguf-py", "ggml", "llama.cpp", pytest.param("node", marks=pytest.mark.hf_gguf)])
def test_shipped_adapters_agree_on_the_seed_files(reader):
    from gguf_construct.testing.fuzzing.adapters import ADAPTERS, read_ours
    from gguf_construct.testing.fuzzing.runner import _python_worker

    if reader == "node":
        target = LineTarget(_node_reader(), timeout=30)
    else:
        pytest.importorskip(ADAPTERS[reader].module)
        target = _python_worker(reader, "ggml" if reader != "gguf-py" else "spec", 2048, 30)
    try:
        for seed in SEEDS:
            answer = target.ask(str(seed))
            if reader == "llama.cpp" and "vocab" not in seed.name:
                assert answer.status == "rejected", answer  # no architecture, or no tokenizer: llama.cpp refuses
                continue
            assert answer.status == "accepted", (seed.name, answer)
            ours = read_ours(str(seed), "ggml" if reader != "gguf-py" else "spec")
            assert compare_views(ours, answer.view, reader) == [], seed.name
            if reader == "llama.cpp":
                assert answer.view["n_vocab"] == len(next(v for k, _t, v in ours["kv"] if k == "tokenizer.ggml.tokens"))
    finally:
        target.close()


def test_safetensors_adapter_agrees_on_the_seed_files():
    pytest.importorskip("safetensors")
    from gguf_construct.testing.fuzzing.adapters import read_ours_safetensors, read_safetensors

    seeds = sorted(SEEDS[0].parent.glob("*.safetensors"))
    assert seeds
    for seed in seeds:
        theirs = read_safetensors(str(seed))
        assert theirs["tensors"] and compare_views(read_ours_safetensors(str(seed)), theirs, "safetensors") == []


def test_what_a_c_reader_printed_before_dying_reaches_triage(tmp_path):
    """The built-in workers capture a C reader's stderr (to tell its reason for a rejection); when the reader dies
    inside the call, the captured text (here a GGML_ASSERT message before abort) is still part of the evidence."""
    script = tmp_path / "dies_in_c.py"
    script.write_text(
        "import os, sys\nfrom gguf_construct.testing.fuzzing.adapters import _with_stderr\n"
        "for line in sys.stdin:\n"
        "    _with_stderr(lambda: (os.write(2, b'/src/ggml/src/gguf.cpp:99: GGML_ASSERT(n_dims <= 4) failed\\n'), os.abort()))\n"
    )
    side_log = tmp_path / "c.log"
    env = {**__import__("os").environ, "GGUF_CONSTRUCT_FUZZ_C_LOG": str(side_log)}
    target = LineTarget([sys.executable, str(script)], timeout=20, env=env, side_log=str(side_log))
    try:
        found = failure(target.ask(str(tmp_path / "any.gguf")), "ggml")
    finally:
        target.close()
    assert found is not None and found.signature == "dos/ggml/GGML_ASSERT(n_dims <= 4)@gguf.cpp:99", found


def test_a_signal_in_native_code_names_the_native_function_called(tmp_path):
    """A reader that dies of a signal inside a binding call leaves only Python frames in faulthandler's dump; the
    kind names the native function the innermost line calls (not the Python frame, nor its line number)."""
    script = tmp_path / "dies_natively.py"
    script.write_text(
        "import ctypes, faulthandler, os, signal, sys\nfaulthandler.enable()\nlibc = ctypes.CDLL(None)\n"
        "for line in sys.stdin:\n"
        "    libc.kill(os.getpid(), signal.SIGFPE)\n"
    )
    target = LineTarget([sys.executable, str(script)], timeout=20)
    try:
        found = failure(target.ask(str(tmp_path / "any.gguf")), "toy")
    finally:
        target.close()
    assert found is not None and found.signature == "crash/toy/arithmetic-trap@kill (called from dies_natively.py)", found


@pytest.mark.parametrize(
    ("printed", "signature"),
    [
        ("/src/llama.cpp/src/llama-vocab.cpp:3207: fatal error\n", "dos/r/abort(fatal error)@llama-vocab.cpp:3207"),
        ("python3: reader.c:12: load: Assertion `n > 0' failed.\n", "dos/r/abort(load: Assertion `n > N' failed.)@reader.c:12"),
    ],
)
def test_a_deliberate_abort_is_denial_of_service_at_its_source_line(printed, signature):
    """GGML_ABORT (ggml_abort prints ``file:line: message``) and libc's assert are deliberate aborts on a crafted
    file, like GGML_ASSERT: dos, at the line that aborted. A SIGABRT without such a line stays a crash."""
    assert failure(Answer("crash", returncode=-6, stderr=printed), "r") == failure(Answer("crash", returncode=134, stderr=printed), "r")
    found = failure(Answer("crash", returncode=-6, stderr=printed), "r")
    assert found is not None and (found.cls, found.signature) == ("dos", signature)
    assert failure(Answer("crash", returncode=-6, stderr="/src/x.c:3:7: runtime error: shift\n"), "r").cls == "crash"
    assert failure(Answer("crash", returncode=-6, stderr="no message"), "r").cls == "crash"
