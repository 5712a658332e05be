"""Sanitizer reports as findings: every ASan and UBSan report with its kind and first frame whatever the reader's
verdict, one kind for arithmetic traps, allocation failures told apart by where they happen, leaks not looked for;
further reproducers kept per kind by the quantity that broke; reproducers rerun against a second build."""

from __future__ import annotations

import sys
import textwrap

import pytest

from gguf_construct.testing.fuzzing.compare import Comparison, compare, kinds_that_differ, reproducers
from gguf_construct.testing.fuzzing.findings_file import Row, write_findings
from gguf_construct.testing.fuzzing.runner import Kind, quantity_of, sanitizer_env
from gguf_construct.testing.fuzzing.targets import Answer
from gguf_construct.testing.fuzzing.triage import failure, findings

UBSAN = (
    "/src/ggml/src/gguf.cpp:712:36: runtime error: signed integer overflow: 4611686018427387904 * 4 cannot be represented in type 'long'\n"
)
ASAN_FPE = """==77==ERROR: AddressSanitizer: FPE on unknown address 0x55d0 (pc 0x55d0 bp 0x7ffc sp 0x7ffc T0)
    #0 0x55d0a1 in gguf_init_from_reader /src/ggml/src/gguf.cpp:736:40
    #1 0x55d0a2 in gguf_init_from_file /src/ggml/src/gguf.cpp:1025:9
SUMMARY: AddressSanitizer: FPE /src/ggml/src/gguf.cpp:736:40 in gguf_init_from_reader
"""


def too_big(frame: str) -> str:
    return (
        "==9==ERROR: AddressSanitizer: requested allocation size 0xfffffffffffffff0 exceeds maximum supported size\n"
        f"    #0 0x1 in malloc /llvm/asan_malloc_linux.cpp:69:3\n    #1 0x2 in {frame} /src/ggml/src/ggml.c:1500:10\n"
        "SUMMARY: AddressSanitizer: allocation-size-too-big /llvm/asan_malloc_linux.cpp:69:3 in malloc\n"
    )


@pytest.mark.parametrize("status", ["accepted", "rejected", "crash"])
def test_a_ubsan_report_is_a_finding_whatever_the_verdict(status):
    answer = Answer(status, view={} if status == "accepted" else None, returncode=0 if status != "crash" else -6, stderr=UBSAN)
    found = failure(answer, "ggml")
    assert found is not None and found.cls == "crash"
    assert found.signature == "crash/ggml/ubsan:signed integer overflow: N * N cannot be represented in type 'long'@gguf.cpp:712"


def test_an_accepted_file_with_a_ubsan_report_is_still_compared():
    ours = Answer("accepted", view={"version": 3})
    theirs = Answer("accepted", view={"version": 2}, stderr=UBSAN)
    classes = [f.cls for f in findings(ours, theirs, "ggml")]
    assert classes == ["crash", "value-mismatch"]


def test_asan_fpe_and_sigfpe_are_one_kind():
    asan = failure(Answer("crash", returncode=1, stderr=ASAN_FPE), "ggml")
    signal = failure(Answer("crash", returncode=-8, stderr="    #0 0x1 in gguf_init_from_reader /src/ggml/src/gguf.cpp:736:40\n"), "ggml")
    assert asan is not None and signal is not None
    assert asan.cls == signal.cls == "crash"
    assert asan.signature == signal.signature == "crash/ggml/arithmetic-trap@gguf_init_from_reader (gguf.cpp:736)"


def test_allocation_failures_are_told_apart_by_where_they_happen():
    a = failure(Answer("crash", returncode=1, stderr=too_big("ggml_new_tensor_impl")), "ggml")
    b = failure(Answer("crash", returncode=1, stderr=too_big("gguf_read_emplace_helper")), "ggml")
    assert a is not None and b is not None and a.cls == b.cls == "memory"
    assert a.signature != b.signature and a.signature.endswith("@ggml_new_tensor_impl (ggml.c:1500)")


def test_leak_reports_are_not_findings_and_leak_detection_is_off_by_default(monkeypatch):
    leak = "==1==ERROR: LeakSanitizer: detected memory leaks\n    #0 0x1 in malloc x.c:1\n"
    assert failure(Answer("rejected", error="bad", returncode=1, stderr=leak), "ggml") is None
    monkeypatch.setenv("ASAN_OPTIONS", "abort_on_error=1")
    assert sanitizer_env()["ASAN_OPTIONS"] == "abort_on_error=1:detect_leaks=0"
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1")
    assert sanitizer_env()["ASAN_OPTIONS"] == "detect_leaks=1"  # the user's choice stands


def test_the_cause_of_a_file_comes_from_how_it_was_made():
    assert quantity_of("boundary:tensor.padded_size@2^64+0:at") == "tensor.padded_size@2^64"
    assert quantity_of("seed:x.gguf mutated (boundary data.size@2^64+4096:wrapped; flip bit 0x01 of byte 3)") == "data.size@2^64"
    assert quantity_of("generated:S3.array_count[4.1]") == "S3.array_count"
    assert quantity_of("breaker:alignment-absurd mutated (flip bit 0x01 of byte 3)") == "alignment-absurd"
    assert quantity_of("generated:valid[0.1]") is None and quantity_of("seed:a.gguf") is None


def test_a_kind_keeps_a_few_reproducers_with_distinct_causes_and_prefers_light_ones():
    kind = Kind("crash", "crash/ggml/SIGSEGV@f", "x", "boundary:data.size@2^64+0:at", causes=["data.size@2^64"])
    assert not kind.wants("data.size@2^64", heavy=False)  # the same cause again
    assert kind.wants("tensor.end@2^64", heavy=False)
    kind.causes += ["tensor.end@2^64", "tensor.nbytes@2^64"]
    assert not kind.wants("string.alloc@2^32", heavy=False)  # three kept
    heavy = Kind("dos", "dos/ggml/abort@g", "x", "seed", causes=[None], heavy=True)
    assert heavy.wants(None, heavy=False) and not heavy.wants(None, heavy=True)
    assert not Kind("value-mismatch", "v", "x", "o", causes=[None]).wants("a@2^64", heavy=False)


SECOND_BUILD = textwrap.dedent(
    """
    import os, signal, sys
    data = open(sys.argv[1], "rb").read()
    if b"STILL" in data:
        sys.stderr.write("    #0 0x1 in gguf_init_from_reader /src/gguf.cpp:9:1\\n")
        os.kill(os.getpid(), signal.SIGSEGV)
    sys.stderr.write("gguf_init_from_reader: tensor 't' has offset 7, expected 0\\n")
    sys.exit(1)
    """
)


def test_compare_reruns_the_failure_reproducers_against_a_second_build(tmp_path):
    script = tmp_path / "second_build.py"
    script.write_text(SECOND_BUILD)
    out = tmp_path / "out"
    out.mkdir()
    (out / "001-a.gguf").write_bytes(b"GGUF STILL")
    (out / "002-b.gguf").write_bytes(b"GGUF FIXED")
    (out / "003-c.gguf").write_bytes(b"GGUF")
    rows = [
        ("001-a.gguf", "crash", "crash/gguf_load/SIGSEGV@gguf_init_from_reader (gguf.cpp:9)"),
        ("002-b.gguf", "crash", "crash/gguf_load/heap-buffer-overflow@gguf_init_from_reader (gguf.cpp:9)"),
        ("003-c.gguf", "value-mismatch", "value-mismatch/gguf_load/kv.keys"),
    ]
    write_findings(out / "findings.tsv", [Row(n, 4, c, s, "explained", "from seed") for n, c, s in rows])
    assert [r[0] for r in reproducers(out)] == ["001-a.gguf", "002-b.gguf"]  # the failures only
    results = compare(out, f"{sys.executable} {script} {{}}", timeout=20)
    by_file = {r.reproducer: r for r in results}
    assert not by_file["001-a.gguf"].differs and by_file["001-a.gguf"].other == "crash/*/SIGSEGV@gguf_init_from_reader (gguf.cpp:9)"
    assert by_file["002-b.gguf"].differs and by_file["002-b.gguf"].other is None
    assert kinds_that_differ(results) == [rows[1][2]]
    assert "differs: 002-b.gguf" in by_file["002-b.gguf"].line() and "no failure" in by_file["002-b.gguf"].line()
    assert isinstance(results[0], Comparison)


def test_a_ubsan_kind_blanks_addresses_and_numbers():
    text = "gguf_harness.c:55:44: runtime error: addition of unsigned offset to 0x7f0a00001000 overflowed to 0x7f09ffffffff\n"
    found = failure(Answer("crash", returncode=-6, stderr=text), "ggml")
    assert found is not None and found.signature == "crash/ggml/ubsan:addition of unsigned offset to N overflowed to N@gguf_harness.c:55"


def test_an_abort_the_sanitizer_reports_is_judged_by_its_message():
    """ASAN_OPTIONS=handle_abort=1 reports a GGML_ASSERT's abort as 'ERROR: AddressSanitizer: ABRT': a deliberate
    abort (dos), not a memory error."""
    text = (
        "/src/ggml/src/gguf.cpp:776: GGML_ASSERT(int64_t(ctx->info.size()) == n_tensors) failed\n"
        "==5==ERROR: AddressSanitizer: ABRT on unknown address 0x5 (pc 0x1 bp 0x2 sp 0x3 T0)\n"
        "    #0 0x1 in __pthread_kill_implementation nptl/pthread_kill.c:44:76\n    #1 0x2 in raise x.c:1\n"
        "    #2 0x3 in gguf_init_from_reader /src/ggml/src/gguf.cpp:776:5\n"
    )
    found = failure(Answer("crash", returncode=-6, stderr=text), "ggml")
    assert found is not None and found.cls == "dos"
    assert found.signature == "dos/ggml/GGML_ASSERT(int64_t(ctx->info.size()) == n_tensors)@gguf.cpp:776"


def out_of_memory(build: str, build_id: str) -> str:
    """ASan's report as an unsymbolized build prints it: the module's path, offset and build id in the frame."""
    return (
        "==5==ERROR: AddressSanitizer: out of memory: allocator is trying to allocate 0x1a00000000000001 bytes\n"
        f"    #0 0x55e1 in operator new(unsigned long) (/tmp/{build}/gguf_load+0x1535ad) (BuildId: {build_id})\n"
        f"    #1 0x55e2 in std::vector<char>::resize(unsigned long) (/tmp/{build}/gguf_load+0x15aa10) (BuildId: {build_id})\n"
        "SUMMARY: AddressSanitizer: out-of-memory (/tmp/x/gguf_load+0x1535ad) in operator new(unsigned long)\n"
    )


def test_two_builds_of_the_same_code_fail_with_the_same_signature():
    """Unsymbolized frames carry what differs between builds (their path, the offset, the build id): the kind is
    the function and the module's name, so a campaign's kinds compare across builds; a hang is a hang in both."""
    from gguf_construct.testing.fuzzing.compare import _without_reader

    a = failure(Answer("crash", returncode=1, stderr=out_of_memory("vuln", "b86bbee5cd08")), "gguf_load")
    b = failure(Answer("crash", returncode=1, stderr=out_of_memory("fixed", "19271477138a")), "other")
    assert a is not None and b is not None and a.cls == b.cls == "memory"
    assert "BuildId" not in a.signature and "/tmp/" not in a.signature and "0x" not in a.signature
    assert _without_reader(a.signature) == _without_reader(b.signature)
    assert _without_reader("hang/gguf_load") == _without_reader("hang/other") == "hang/*"
