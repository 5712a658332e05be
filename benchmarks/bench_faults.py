"""Fault injection: how many checks of ggml's GGUF reader the fuzzer notices missing, and how fast.

ggml's reader (``gguf_init_from_reader`` / ``gguf_init_from_file_impl`` in ``ggml/src/gguf.cpp``) guards every size,
count, offset, dimension, alignment, string and array it reads with a check. Each variant here removes ONE of those
checks from the source (patched programmatically: the condition becomes ``false``) and builds the reader with
ASan+UBSan into the native harness (fuzz/native/gguf_harness.c, which loads the file and uses each tensor as ggml's
ops do: the block of its last element through ne[]/nb[], its first and last row through the type's to_float). A
variant counts as *found* when an arm produces a file on which the variant reports a crash, a sanitizer error, an
abort, or an allocation past the memory budget (``BUDGET_MB``, the same for every build), that the unmodified build
does not: the file then tells the two builds apart. Each arm stops at its first such file (time to first finding).

Arms, each from the same seeds (the fuzz command's built-in corpus) and for the same time per variant:

- ``ours``: the fuzz command's input stream (the seeds, the strategies, the arithmetic-boundary generator and the
  mutators) into a persistent harness process;
- ``libfuzzer``: blind libFuzzer (coverage-guided byte mutation, fork mode so it keeps going after a crash).

The ggml source comes from the llama-cpp-python sdist on PyPI (``pip download --no-binary :all: --no-deps``; it
vendors llama.cpp's ggml/), so the benchmark runs from one command on a fresh machine with clang and pip; or give
``--ggml DIR`` (a ggml or llama.cpp checkout). Nothing of ggml is written into this repository.

    python benchmarks/bench_faults.py                      # every variant, 300 s per variant and arm
    python benchmarks/bench_faults.py --seconds 60 --arms ours
    python benchmarks/bench_faults.py --quick              # CI: the variant table and the input stream; builds and
                                                           # runs 3 s per variant only when clang and a source are at hand
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g", "-O1"]
# ggml reads type fields into enum variables before range-checking them: UBSan's enum check would stop every build
# (the unmodified one too) on the first unknown type, so it is left out, as in bench_cve.py
SAN += ["-fno-sanitize=enum"]
#: The memory budget of one allocation, for every build alike (ASan's max_allocation_size_mb; libFuzzer's
#: -malloc_limit_mb): four times the harness's data-section cap (64 MiB). A variant that allocates more than this for
#: a file of a few KiB, where the unmodified reader refuses the file before allocating, has the bug its check prevents.
BUDGET_MB = 256
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:abort_on_error=1:symbolize=1:handle_abort=1"
    f":max_allocation_size_mb={BUDGET_MB}",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "GGML_NO_BACKTRACE": "1",  # ggml_abort otherwise runs gdb for a backtrace: seconds per abort
}
BASE_SOURCES = (
    "ggml.c",
    "ggml.cpp",
    "ggml-alloc.c",
    "ggml-backend.cpp",
    "ggml-backend-meta.cpp",
    "ggml-opt.cpp",
    "ggml-threading.cpp",
    "ggml-quants.c",
)
SDIST = "llama-cpp-python"
ARMS = ("ours", "libfuzzer")


@dataclass(frozen=True)
class Variant:
    """One check removed: ``needle`` (a condition in gguf.cpp, found exactly once) becomes ``replacement``."""

    name: str
    guards: str
    needle: str
    replacement: str = "false"


VARIANTS = (
    Variant(
        "n-tensors-range",
        "the tensor count is in [0, SIZE_MAX / sizeof(gguf_tensor_info)]",
        "n_tensors < 0 || n_tensors > int64_t(SIZE_MAX/sizeof(gguf_tensor_info))",
    ),
    Variant(
        "n-kv-range", "the key-value count is in [0, SIZE_MAX / sizeof(gguf_kv)]", "n_kv < 0 || n_kv > int64_t(SIZE_MAX/sizeof(gguf_kv))"
    ),
    Variant("string-max", "a string is at most GGUF_MAX_STRING_LENGTH", "size > GGUF_MAX_STRING_LENGTH"),
    Variant(
        "string-remaining",
        "a string's bytes are in the file",
        'size > nbytes_remain) {\n            GGML_LOG_ERROR("%s: string length',
        'false) {\n            GGML_LOG_ERROR("%s: string length',
    ),
    Variant("array-max", "an array has at most GGUF_MAX_ARRAY_ELEMENTS", "n > GGUF_MAX_ARRAY_ELEMENTS"),
    Variant("array-remaining", "an array's elements are in the file", "nbytes_remain < n * sizeof(T)"),
    Variant(
        "alignment-type", "general.alignment is a u32", "alignment_idx != -1 && gguf_get_kv_type(ctx, alignment_idx) != GGUF_TYPE_UINT32"
    ),
    Variant(
        "alignment-pow2", "the alignment is a power of two above 0", "ctx->alignment == 0 || (ctx->alignment & (ctx->alignment - 1)) != 0"
    ),
    Variant("name-length", "a tensor name is shorter than GGML_MAX_NAME", "name.length() >= GGML_MAX_NAME"),
    Variant("n-dims", "n_dims is at most GGML_MAX_DIMS", "n_dims > GGML_MAX_DIMS"),
    Variant("ne-negative", "every dimension is non-negative", "info.t.ne[j] < 0"),
    Variant("ne-product", "the element count fits in int64", "INT64_MAX / info.t.ne[i] < current_nelements"),
    Variant("type-range", "the tensor type is below GGML_TYPE_COUNT", "info.t.type < 0 || info.t.type >= GGML_TYPE_COUNT"),
    Variant("block-size-zero", "the type has a block size (removed types have 0)", "blck_size == 0 || info.t.ne[0]", "info.t.ne[0]"),
    Variant("ne0-block-multiple", "ne0 is a multiple of the block size", "info.t.ne[0] % blck_size != 0", "blck_size == 0"),
    Variant(
        "byte-size",
        "the byte size fits in size_t",
        "uint64_t(ggml_nelements(&info.t)/ggml_blck_size(info.t.type)) > SIZE_MAX/ggml_type_size(info.t.type)",
    ),
    Variant("offset-running-sum", "each offset equals the running sum of padded sizes", "ti.offset != ctx->size"),
    Variant("padded-size", "the padded size does not wrap (ggml d99724f2's live case)", "nbytes > SIZE_MAX - (ctx->alignment - 1)"),
    Variant("size-sum", "the running sum does not wrap (CVE-2025-53630, fixed by 26a48ad69)", "SIZE_MAX - ctx->size < padded_size"),
)


# -- the source ---------------------------------------------------------------------------------------------------
def ggml_source(given: Path | None, cache: Path, network: bool = True) -> Path | None:
    """The ggml folder (with include/ and src/gguf.cpp): ``given``, else the one extracted from the llama-cpp-python
    sdist in ``cache`` (downloaded with pip when ``network``); None when there is none."""
    if given is not None:
        for cand in (given, given / "ggml", given / "vendor/llama.cpp/ggml"):
            if (cand / "src/gguf.cpp").is_file():
                return cand
        raise SystemExit(f"no src/gguf.cpp under {given}")
    found = sorted(cache.glob("*/vendor/llama.cpp/ggml/src/gguf.cpp"))
    if found:
        return found[-1].parent.parent
    sdists = sorted(cache.glob("llama_cpp_python-*.tar.gz"))
    if not sdists and network:
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", SDIST, "-d", str(cache)]
        subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sdists = sorted(cache.glob("llama_cpp_python-*.tar.gz"))
    if not sdists:
        return None
    with tarfile.open(sdists[-1]) as tar:  # ggml's headers and its top-level sources (no backend's sources)
        members = []
        for m in tar.getmembers():
            _, _, rest = m.name.partition("/vendor/llama.cpp/ggml/")
            if m.isfile() and (rest.startswith("include/") or (rest.startswith("src/") and (rest.count("/") == 1 or rest.endswith(".h")))):
                members.append(m)
        tar.extractall(cache, members=members, filter="data")
    found = sorted(cache.glob("*/vendor/llama.cpp/ggml/src/gguf.cpp"))
    return found[-1].parent.parent if found else None


def patched(source: str, variant: Variant) -> str:
    """gguf.cpp with the variant's check removed; the needle must occur exactly once."""
    if source.count(variant.needle) != 1:
        raise ValueError(f"{variant.name}: the check occurs {source.count(variant.needle)} times in gguf.cpp (expected once)")
    return source.replace(variant.needle, variant.replacement)


# -- building -----------------------------------------------------------------------------------------------------
def _generated_headers(ggml: Path, work: Path) -> Path:
    """The headers ggml's CMake generates (``ggml-version.h`` from its ``.in``), in ``work/gen``."""
    gen = work / "gen"
    gen.mkdir(parents=True, exist_ok=True)
    template = ggml / "src/ggml-version.h.in"
    if template.is_file():
        text = template.read_text(encoding="utf-8").replace("@GGML_VERSION@", "harness").replace("@GGML_BUILD_COMMIT@", "harness")
        (gen / "ggml-version.h").write_text(text, encoding="utf-8")
    return gen


def _compile(src: Path, out: Path, ggml: Path, extra: list[str]) -> None:
    cc = "clang" if src.suffix == ".c" else "clang++"
    std = "-std=gnu11" if src.suffix == ".c" else "-std=c++17"
    gen = out.parent.parent / "gen"  # work/obj/x.o and work/VARIANT/gguf.o: work/gen
    inc = [
        f"-I{ggml / 'include'}",
        f"-I{ggml / 'src'}",
        f"-I{gen}",
        "-DNDEBUG",
        "-D_GNU_SOURCE",
        '-DGGML_VERSION="harness"',
        '-DGGML_COMMIT="harness"',
    ]
    _checked([cc, *SAN, *extra, *inc, std, "-c", str(src), "-o", str(out)])


def _checked(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        errors = [line for line in r.stderr.splitlines() if "error" in line][:5]
        raise SystemExit(f"bench_faults: {Path(cmd[0]).name} failed on {cmd[-3] if '-c' in cmd else cmd[-1]}: {errors}")


def build_base(ggml: Path, work: Path) -> list[Path]:
    """ggml's base objects (everything but gguf.cpp) and the two harness objects, built once, instrumented for
    libFuzzer's coverage (the plain program links them too)."""
    objs = work / "obj"
    objs.mkdir(parents=True, exist_ok=True)
    _generated_headers(ggml, work)
    out = []
    for name in BASE_SOURCES:
        src = ggml / "src" / name
        if src.is_file():
            o = objs / (name + ".o")
            if not o.exists():
                _compile(src, o, ggml, ["-fsanitize=fuzzer-no-link"])
            out.append(o)
    harness = ROOT / "fuzz/native/gguf_harness.c"
    for flavour, defs in (("load", ["-DHARNESS_STANDALONE"]), ("libfuzzer", [])):
        o = objs / f"harness-{flavour}-{harness_stamp()}.o"
        if not o.exists():
            _compile(harness, o, ggml, ["-fsanitize=fuzzer-no-link", *defs])
    return out


def harness_stamp() -> str:
    """A digest of the harness source and the sanitizer flags: a build made with others is rebuilt."""
    text = (ROOT / "fuzz/native/gguf_harness.c").read_bytes() + " ".join(SAN).encode()
    return hashlib.sha256(text).hexdigest()[:12]


def build_variant(ggml: Path, work: Path, base: list[Path], variant: Variant | None) -> Path:
    """``work/NAME/gguf_load`` and ``gguf_libfuzzer`` with ``variant``'s check removed (None: unmodified)."""
    name = variant.name if variant else "unmodified"
    folder = work / name
    stamp = folder / "harness.stamp"
    built = (folder / "gguf_load").exists() and (folder / "gguf_libfuzzer").exists()
    if built and stamp.is_file() and stamp.read_text() == harness_stamp():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    text = (ggml / "src/gguf.cpp").read_text(encoding="utf-8")
    src = folder / "gguf.cpp"
    source = patched(text, variant) if variant else text
    if not (folder / "gguf.o").exists() or not src.exists() or src.read_text(encoding="utf-8") != source:
        src.write_text(source, encoding="utf-8")
        _compile(src, folder / "gguf.o", ggml, ["-fsanitize=fuzzer-no-link"])
    objs = [str(o) for o in base] + [str(folder / "gguf.o")]
    for flavour, link in (("load", []), ("libfuzzer", ["-fsanitize=fuzzer"])):
        exe = folder / f"gguf_{flavour}"
        harness = work / "obj" / f"harness-{flavour}-{harness_stamp()}.o"
        _checked(["clang++", *SAN, *link, *objs, str(harness), "-o", str(exe), "-lm", "-lpthread", "-ldl"])
    stamp.write_text(harness_stamp())
    return folder


# -- judging a file -----------------------------------------------------------------------------------------------
def verdict(exe: Path, data: bytes, scratch: Path, timeout: float = 20.0) -> str | None:
    """The crash, dos or memory signature of ``exe`` on ``data`` (the fuzz command's triage; memory: an allocation
    past ``BUDGET_MB`` reported by ASan), or None when it loads cleanly (a hang counts as clean: the arms time out
    hangs of their own)."""
    from gguf_construct.testing.fuzzing.targets import Answer
    from gguf_construct.testing.fuzzing.triage import failure

    path = scratch / "judge.gguf"
    path.write_bytes(data)
    try:
        r = subprocess.run([str(exe), str(path)], capture_output=True, text=True, env={**os.environ, **SAN_ENV}, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    status = "accepted" if r.returncode == 0 and "runtime error:" not in r.stderr and "ERROR: " not in r.stderr else "crash"
    f = failure(Answer(status, returncode=r.returncode, stderr=r.stderr), "ggml")
    return f.signature if f is not None and f.cls in ("crash", "dos", "memory") else None


def tells_apart(variant_dir: Path, unmodified: Path, data: bytes, scratch: Path) -> str | None:
    """The variant's finding on ``data`` when the unmodified build has none, else None."""
    found = verdict(variant_dir / "gguf_load", data, scratch)
    if found is None or verdict(unmodified / "gguf_load", data, scratch) is not None:
        return None
    return found


# -- arms ---------------------------------------------------------------------------------------------------------
def arm_ours(variant_dir: Path, unmodified: Path, seconds: float, scratch: Path, seed: int = 0) -> tuple[float | None, str, int]:
    """The fuzz command's input stream into a persistent harness; (seconds to the first telling file, its finding,
    files run)."""
    from gguf_construct.testing.fuzzing.runner import corpus_files, inputs

    files = inputs(seed, corpus_files(None))
    path = scratch / "input.gguf"
    start, n = time.monotonic(), 0
    proc: subprocess.Popen[bytes] | None = None
    try:
        while time.monotonic() - start < seconds:
            if proc is None or proc.poll() is not None:
                proc = subprocess.Popen(
                    [str(variant_dir / "gguf_load")],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env={**os.environ, **SAN_ENV},
                )
            _, data = next(files)
            path.write_bytes(data)
            n += 1
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(f"{path}\n".encode())
                proc.stdin.flush()
            except BrokenPipeError:
                pass
            ready, _, _ = select.select([proc.stdout], [], [], 10.0)
            answered = bool(ready) and proc.stdout.readline().strip() == b"ok"
            if answered:
                continue
            if proc.poll() is None:  # a hang: not what this benchmark counts
                proc.kill()
                proc.wait()
                continue
            finding = tells_apart(variant_dir, unmodified, data, scratch)
            if finding is not None:
                took = time.monotonic() - start
                (variant_dir / "ours-finding.gguf").write_bytes(data)
                return took, finding, n
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
    return None, "", n


def arm_libfuzzer(variant_dir: Path, unmodified: Path, seconds: float, scratch: Path, seeds: Path) -> tuple[float | None, str, int]:
    """Blind libFuzzer in fork mode over the same seeds; every crash file it writes is judged as ours are."""
    work = scratch / "libfuzzer"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(seeds, work / "corpus")
    cmd = [
        str(variant_dir / "gguf_libfuzzer"),
        "-fork=1",
        "-ignore_crashes=1",
        "-ignore_ooms=1",
        "-ignore_timeouts=1",
        f"-max_total_time={max(1, int(seconds))}",
        "-timeout=10",
        "-rss_limit_mb=2048",
        f"-malloc_limit_mb={BUDGET_MB}",
        "-max_len=65536",
        f"-artifact_prefix={work}/",
        str(work / "corpus"),
    ]
    start = time.monotonic()
    checked: set[Path] = set()
    with open(work / "log.txt", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env={**os.environ, **SAN_ENV}, cwd=work)
        try:
            while True:
                found = [*work.glob("crash-*"), *work.glob("oom-*")]
                for crash in sorted(found, key=lambda p: p.stat().st_mtime):
                    if crash in checked:
                        continue
                    checked.add(crash)
                    finding = tells_apart(variant_dir, unmodified, crash.read_bytes(), scratch)
                    if finding is not None:
                        return crash.stat().st_mtime - (time.time() - (time.monotonic() - start)), finding, 0
                if proc.poll() is not None or time.monotonic() - start > seconds + 20:
                    return None, "", 0
                time.sleep(1)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# -- the run ------------------------------------------------------------------------------------------------------
def seeds_folder(work: Path) -> Path:
    from gguf_construct.testing.fuzzing.runner import corpus_files

    folder = work / "seeds"
    folder.mkdir(parents=True, exist_ok=True)
    for i, (_, data) in enumerate(corpus_files(None)):
        (folder / f"{i:02d}.gguf").write_bytes(data)
    return folder


def run(ggml: Path, work: Path, variants: list[Variant], arms: list[str], seconds: float) -> list[dict[str, object]]:
    print(f"building ggml's reader from {ggml} in {work}", flush=True)
    base = build_base(ggml, work)
    unmodified = build_variant(ggml, work, base, None)
    seeds = seeds_folder(work)
    rows: list[dict[str, object]] = []
    for v in variants:
        folder = build_variant(ggml, work, base, v)
        row: dict[str, object] = {"variant": v.name, "guards": v.guards, "seconds": seconds, "load": round(os.getloadavg()[0], 1)}
        scratch = Path(tempfile.mkdtemp(prefix=f"faults-{v.name}-", dir=work))
        for arm in arms:
            if arm == "ours":
                took, finding, n = arm_ours(folder, unmodified, seconds, scratch)
                row["ours_files"] = n
            else:
                took, finding, n = arm_libfuzzer(folder, unmodified, seconds, scratch, seeds)
            row[arm] = None if took is None else round(max(took, 0.0), 1)
            row[f"{arm}_finding"] = finding
        shutil.rmtree(scratch, ignore_errors=True)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def table(rows: list[dict[str, object]], arms: list[str]) -> str:
    head = "| variant (check removed) | " + " | ".join(f"{a}: s to first finding" for a in arms) + " | finding (ours) |"
    lines = [head, "|" + "---|" * (len(arms) + 2)]
    for r in rows:
        cells = [f"{r[a]}" if r.get(a) is not None else f"not in {r['seconds']:.0f}" for a in arms]
        lines.append(f"| {r['variant']} ({r['guards']}) | " + " | ".join(cells) + f" | {str(r.get('ours_finding') or '-')[:70]} |")
    for a in arms:
        found = sum(r.get(a) is not None for r in rows)
        lines.append(f"\n{a}: {found} of {len(rows)} variants found ({100 * found / max(1, len(rows)):.0f}%)")
    return "\n".join(lines)


def quick(work: Path, ggml_dir: Path | None) -> None:
    """CI: every variant's name is unique; the input stream gives files; with clang and a ggml source (given, or
    in the cache) three variants run 3 s each with the ``ours`` arm. No network."""
    from gguf_construct.testing.fuzzing.runner import corpus_files, inputs

    assert len({v.name for v in VARIANTS}) == len(VARIANTS) >= 12
    stream = inputs(0, corpus_files(None))
    kinds = {name.split(":")[0].split("[")[0] for name, _ in (next(stream) for _ in range(300))}
    assert any(k == "boundary" for k in kinds), kinds
    print(f"bench_faults --quick: {len(VARIANTS)} variants; input stream kinds {sorted(kinds)[:6]}...")
    ggml = ggml_source(ggml_dir, Path.home() / ".cache/gguf-construct/bench-faults", network=False)
    if ggml is None or not shutil.which("clang"):
        print("bench_faults --quick: no clang or no ggml source in the cache: the build and run part needs them (see --help)")
        return
    text = (ggml / "src/gguf.cpp").read_text(encoding="utf-8")
    for v in VARIANTS:
        patched(text, v)
    chosen = [v for v in VARIANTS if v.name in ("size-sum", "padded-size", "ne-product")]
    rows = run(ggml, work, chosen, ["ours"], 3.0)
    print(table(rows, ["ours"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ggml", type=Path, help="a ggml or llama.cpp checkout (default: the llama-cpp-python sdist from PyPI)")
    p.add_argument("--seconds", type=float, default=300, help="seconds per variant and arm (default 300)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    p.add_argument("--variants", help="comma-separated variant names (default: all)")
    p.add_argument("--work", type=Path, help="build and run folder (default: a cache folder; builds are reused)")
    p.add_argument("--out", type=Path, help="write the rows as JSON here")
    p.add_argument("--quick", action="store_true", help="CI's smoke run (no network; builds only with clang and a cached source)")
    a = p.parse_args()
    cache = Path.home() / ".cache/gguf-construct/bench-faults"
    work = a.work or cache / "work"
    if a.quick:
        quick(work, a.ggml)
        return
    if not shutil.which("clang"):
        raise SystemExit("bench_faults needs clang (Debian: apt-get install clang)")
    ggml = ggml_source(a.ggml, cache)
    if ggml is None:
        raise SystemExit(f"no ggml source: pip download of {SDIST} failed; give --ggml DIR")
    names = a.variants.split(",") if a.variants else [v.name for v in VARIANTS]
    unknown = set(names) - {v.name for v in VARIANTS}
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {', '.join(v.name for v in VARIANTS)}")
    arms = a.arms.split(",")
    rows = run(ggml, work, [v for v in VARIANTS if v.name in names], arms, a.seconds)
    print(table(rows, arms))
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
