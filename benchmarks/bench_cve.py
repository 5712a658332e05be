"""Minutes to a known CVE: CVE-2025-53630, an integer overflow in ggml's GGUF reader's data-section size.

ggml-org/llama.cpp commit 26a48ad69 (2025-07-09; synced to ggml-org/ggml as 19356a42, "llama/14595") added the
check; at its parent, tensor sizes whose padded sum wraps past 2**64 give a small data section while the tensors
point far beyond it, and a program reading the tensors reads out of bounds. This script builds the harness
(fuzz/native/gguf_harness.c) with ASan+UBSan at the parent and at the fix, and times each arm to its first
sanitizer crash, capped at ``--cap`` seconds:

- ``generators``: our generators straight to the harness (arithmetic-boundary files, reader-breaker classes, broken
  files, structure-aware mutations of the seeds), through a persistent process; none of them is aimed at this CVE;
- ``afl-structured``: AFL++ with gguf-construct's structure-aware custom mutator (fuzz/native/afl_gguf_mutator.py);
- ``libfuzzer-blind`` and ``afl-blind``: the engines' own mutations only.

Every arm starts from the same seeds (the GGUF files under 64 KiB in tests/data). A crash counts as the CVE when
the fixed build loads the crashing input cleanly; other sanitizer reports (ASan's refusal of a huge ``new``, which
is fatal under ASan even where the reader would catch ``std::bad_alloc``) are counted and passed over: libFuzzer
runs in fork mode and AFL++ keeps going, so every arm is timed to the CVE itself. Not run in CI: it compiles C code (needs clang; afl++ for
the
AFL++ arms). Run from the repository root:

    python benchmarks/bench_cve.py /path/to/llama.cpp/.git            # or a ggml-org/ggml git directory
    python benchmarks/bench_cve.py GITDIR --cap 600 --arms generators,afl-structured,libfuzzer-blind
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:abort_on_error=1:symbolize=1", "UBSAN_OPTIONS": "print_stacktrace=1"}
ARMS = ("generators", "afl-structured", "libfuzzer-blind", "afl-blind")


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True).stdout.strip()


def fix_commit(gitdir: str, rev: str | None) -> str:
    """The fixing commit: ``rev``, else llama.cpp's 26a48ad69, else ggml's sync of it (subject ends in llama/14595)."""
    for candidate in [rev] if rev else ["26a48ad69"]:
        try:
            return git(gitdir, "rev-parse", "--verify", f"{candidate}^{{commit}}")
        except subprocess.CalledProcessError:
            if rev:
                raise SystemExit(f"{rev} is not in {gitdir}") from None
    found = git(gitdir, "log", "--format=%H", "--grep=prevent integer overflow in gguf tensor size calculation")
    if not found:
        raise SystemExit(f"{gitdir} does not reach 26a48ad69 (nor ggml's sync of it): fetch more history")
    return found.splitlines()[-1]


def build(gitdir: str, rev: str, out: Path, flavours: str = "gguf_libfuzzer gguf_load gguf_afl") -> Path:
    """The harness at ``rev`` in ``out`` (flavours already there are kept: a rerun in the same --work)."""
    missing = [f for f in flavours.split() if not (out / f).exists() and (f != "gguf_afl" or shutil.which("afl-clang-fast"))]
    if not missing:
        return out
    # ggml's reader reads type fields into enum variables before it range-checks them: UBSan's enum check stops
    # every arm on the first file with an unknown type, at both commits (a finding of its own, docs/findings.md),
    # so the arms are built without that one check and timed to the CVE
    env = {**os.environ, "HARNESS_EXTRA_FLAGS": "-fno-sanitize=enum", "HARNESS_FLAVOURS": " ".join(missing)}
    subprocess.run([str(ROOT / "fuzz/native/build.sh"), f"{gitdir}:{rev}", str(out)], check=True, stdout=subprocess.DEVNULL, env=env)
    return out


def seeds(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(sorted((ROOT / "tests/data").rglob("*.gguf"))):
        if f.stat().st_size <= 64 * 1024:
            shutil.copy(f, folder / f"{i:02d}-{f.name}")
    return sorted(folder.iterdir())


def is_sanitizer_report(text: str) -> bool:
    return "ERROR: AddressSanitizer" in text or "runtime error:" in text or "ERROR: UndefinedBehaviorSanitizer" in text


def crashes_fixed(fixed: Path, data: bytes) -> bool:
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(data)
        f.flush()
        r = subprocess.run([str(fixed / "gguf_load"), f.name], capture_output=True, text=True, env={**os.environ, **SAN_ENV}, timeout=60)
    return r.returncode != 0


def is_the_cve(vuln: Path, fixed: Path, data: bytes) -> tuple[bool, str]:
    """Whether ``data`` crashes the parent with a sanitizer report and loads cleanly at the fix (the report head)."""
    with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
        f.write(data)
        f.flush()
        try:
            r = subprocess.run([str(vuln / "gguf_load"), f.name], capture_output=True, text=True, env={**os.environ, **SAN_ENV}, timeout=60)
        except subprocess.TimeoutExpired:
            return False, "timeout"
    if not is_sanitizer_report(r.stderr):
        return False, ""
    return not crashes_fixed(fixed, data), _head(r.stderr)


def poll_for_cve(
    proc: subprocess.Popen[bytes], pattern: str, folder: Path, vuln: Path, fixed: Path, cap: float, start: float, seen_other: list[str]
) -> tuple[float | None, bytes | None, str]:
    """Watch an engine's crash files until one is the CVE (others, such as an allocator's refusal of a huge
    size, are counted and passed over), the engine ends, or ``cap`` runs out."""
    checked: set[Path] = set()
    while True:
        for path in sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime):
            if path in checked or path.name.endswith(".txt"):
                continue
            checked.add(path)
            data = path.read_bytes()
            cve, head = is_the_cve(vuln, fixed, data)
            if cve:
                took = path.stat().st_mtime - (time.time() - (time.monotonic() - start))
                proc.kill()
                proc.wait()
                return took, data, head
            seen_other.append(head)
        if proc.poll() is not None or time.monotonic() - start > cap + 30:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            return None, None, ""
        time.sleep(2)


# -- arms ---------------------------------------------------------------------------------------------------------
def arm_generators(
    vuln: Path, fixed: Path, seed_files: list[Path], cap: float, work: Path, others: list[str]
) -> tuple[float | None, bytes | None, int, str]:
    """Our generators to a persistent harness; returns (seconds to crash, input, files tried, report head)."""
    sys.path.insert(0, str(ROOT))
    from gguf_construct.testing.boundaries import boundary_file
    from gguf_construct.testing.fuzzing.structured import mutate_structured
    from gguf_construct.testing.strategies import draw_examples, invalid_gguf
    from gguf_construct.testing.strategies.reader_breakers import READER_BREAKERS

    rng = random.Random(0)
    pool = [p.read_bytes() for p in seed_files] + [x.data for x in draw_examples(invalid_gguf(), 50, seed_value=0)]
    path = work / "input.gguf"
    start, n = time.monotonic(), 0
    proc = None
    while time.monotonic() - start < cap:
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen(
                [str(vuln / "gguf_load")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **SAN_ENV},
                text=True,
            )
        kind = rng.random()
        if kind < 0.15:
            data = boundary_file(rng).data
        elif kind < 0.3:
            data = READER_BREAKERS[rng.choice(list(READER_BREAKERS))].make(rng)
        elif kind < 0.4:
            data = rng.choice(pool)
        else:
            data, _ = mutate_structured(rng.choice(pool), rng, 65536)
        path.write_bytes(data)
        n += 1
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(f"{path}\n")
        proc.stdin.flush()
        if proc.stdout.readline().strip() != "ok":
            proc.wait(timeout=30)
            report = proc.stderr.read()
            if is_sanitizer_report(report):
                took = time.monotonic() - start
                if not crashes_fixed(fixed, data):
                    return took, data, n, _head(report)
                others.append(_head(report))  # a finding of its own (present at the fix too): keep going
    if proc is not None:
        proc.kill()
    return None, None, n, ""


def _head(report: str) -> str:
    lines = [x for x in report.splitlines() if "ERROR:" in x or "runtime error" in x or x.strip().startswith("#0") or "SUMMARY" in x]
    return " | ".join(x.strip() for x in lines[:3])


def arm_libfuzzer(
    vuln: Path, fixed: Path, seed_dir: Path, cap: float, work: Path, others: list[str]
) -> tuple[float | None, bytes | None, int, str]:
    """Blind libFuzzer in fork mode, which keeps going after a crash, an OOM or a timeout."""
    corpus = work / "corpus"
    shutil.copytree(seed_dir, corpus)
    start = time.monotonic()
    cmd = [
        str(vuln / "gguf_libfuzzer"),
        "-fork=1",
        "-ignore_crashes=1",
        "-ignore_ooms=1",
        "-ignore_timeouts=1",
        f"-max_total_time={int(cap)}",
        "-timeout=10",
        "-rss_limit_mb=4096",
        "-max_len=65536",
        f"-artifact_prefix={work}/",
        str(corpus),
    ]
    with open(work / "libfuzzer-log.txt", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env={**os.environ, **SAN_ENV}, cwd=work)
        took, data, head = poll_for_cve(proc, "crash-*", work, vuln, fixed, cap, start, others)
    return took, data, 0, head


def arm_afl(
    vuln: Path, fixed: Path, seed_dir: Path, cap: float, work: Path, structured: bool, others: list[str]
) -> tuple[float | None, bytes | None, int, str]:
    env = {
        **os.environ,
        **SAN_ENV,
        "AFL_NO_UI": "1",
        "AFL_SKIP_CPUFREQ": "1",
        "AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES": "1",
        "AFL_NO_AFFINITY": "1",
        "AFL_SKIP_BIN_CHECK": "1",
    }
    env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].replace("symbolize=1", "symbolize=0")  # afl-fuzz refuses to start otherwise
    if structured:
        env["AFL_PYTHON_MODULE"] = "afl_gguf_mutator"
        # AFL++ embeds the system's libpython: give it this environment's packages, not its standard library
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "fuzz/native"), str(ROOT), *(p for p in sys.path if p.endswith("site-packages"))])
    start = time.monotonic()
    cmd = [
        "afl-fuzz",
        "-i",
        str(seed_dir),
        "-o",
        str(work / "afl"),
        "-m",
        "none",
        "-t",
        "10000",
        "-V",
        str(int(cap)),
        "--",
        str(vuln / "gguf_afl"),
    ]
    with open(work / "afl-log.txt", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env)
        took, data, head = poll_for_cve(proc, "afl/*/crashes/id:*", work, vuln, fixed, cap, start, others)
    return took, data, 0, head


def quick() -> None:
    """CI's smoke run: the seeds are made and the native harness's sources are where the build expects them."""
    with tempfile.TemporaryDirectory() as tmp:
        made = seeds(Path(tmp))
    native = Path(__file__).resolve().parents[1] / "fuzz" / "native"
    missing = [n for n in ("gguf_harness.c", "build.sh") if not (native / n).is_file()]
    if not made or missing:
        raise SystemExit(f"bench_cve: {len(made)} seeds, missing {missing}")
    print(f"bench_cve --quick: {len(made)} seeds, harness sources present; nothing built")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("gitdir", nargs="?", help="a llama.cpp or ggml git directory (a bare mirror is fine)")
    p.add_argument("--rev", help="the fixing commit (default: 26a48ad69, or ggml's sync of it)")
    p.add_argument("--cap", type=float, default=600, help="seconds per arm (default 600)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    p.add_argument("--work", type=Path, help="build and run folder (default: a temporary one, kept)")
    p.add_argument("--quick", action="store_true", help="check the script's own parts (seeds, the harness sources), build nothing")
    a = p.parse_args()
    if a.quick:
        quick()
        return
    if a.gitdir is None:
        p.error("give the llama.cpp or ggml git directory")
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-cve-"))
    fix = fix_commit(a.gitdir, a.rev)
    print(f"fix {fix[:10]}; building the parent and the fix in {work}", flush=True)
    arms = a.arms.split(",")
    flavours = (
        "gguf_load"
        + (" gguf_libfuzzer" if "libfuzzer-blind" in arms else "")
        + (" gguf_afl" if any(x.startswith("afl") for x in arms) else "")
    )
    vuln, fixed = (
        build(a.gitdir, f"{fix}^", work / "vuln", flavours),
        build(a.gitdir, fix, work / "fixed", "gguf_load"),
    )  # fixed: the check only
    seed_dir = work / "seeds"
    seed_files = seeds(seed_dir)
    print(f"{len(seed_files)} seeds; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; cap {a.cap:.0f} s per arm", flush=True)
    rows = []
    for arm in arms:
        arm_dir = work / arm
        shutil.rmtree(arm_dir, ignore_errors=True)
        arm_dir.mkdir()
        load = os.getloadavg()[0]
        others: list[str] = []
        if arm == "generators":
            took, data, n, head = arm_generators(vuln, fixed, seed_files, a.cap, arm_dir, others)
        elif arm == "libfuzzer-blind":
            took, data, n, head = arm_libfuzzer(vuln, fixed, seed_dir, a.cap, arm_dir, others)
        elif arm in ("afl-structured", "afl-blind"):
            if not shutil.which("afl-fuzz"):
                print(f"{arm}: skipped (afl-fuzz not installed)")
                continue
            took, data, n, head = arm_afl(vuln, fixed, seed_dir, a.cap, arm_dir, arm == "afl-structured", others)
        else:
            raise SystemExit(f"unknown arm {arm}")
        if data is not None:
            (arm_dir / "cve-crash.gguf").write_bytes(data)
        minutes = f"{took / 60:.2f}" if took is not None else f"> {a.cap / 60:.0f} (not found)"
        rows.append((arm, minutes, len(others), n or "-", f"{load:.1f}", head[:120]))
        print(
            f"{arm}: {minutes} min; other sanitizer reports first: {len(others)} "
            f"{sorted(set(others))[:3]}; inputs {n or '-'}; load {load:.1f}; {head}",
            flush=True,
        )
    print("\n| arm | minutes to the CVE's crash | other sanitizer reports passed over | inputs run | load at start | report |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")


if __name__ == "__main__":
    main()
