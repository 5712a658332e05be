"""What every atheris harness shares: the reader's contract, checked on each input.

The contract (docs/howto/fuzz.md, "Coverage-guided fuzzing"): for any input, a reader entry point returns or raises a
``FormatError`` subclass, never another exception, never an ``internal.*`` rule (that is ``guarded`` catching
a check the schema is missing), never a ``RecursionError``; it allocates at most twice the input's size (plus
a fixed allowance for the interpreter's own bookkeeping) and finishes within a second. Any breach raises
``ContractBreach``, which atheris reports as a crash and saves as a reproducer.

Memory is measured with ``tracemalloc`` (Python and numpy allocations both go through it). It slows every
input down, so only every ``FUZZ_MEMCHECK_EVERY``-th input (default 4) is traced; libFuzzer's ``-rss_limit_mb``
backs it up for the rest.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import atheris

with atheris.instrument_imports(include=["gguf_construct"]):
    import gguf_construct  # noqa: F401  (instrumented for coverage before any harness imports from it)
    from gguf_construct.errors import FormatError

#: Allocation allowed beyond twice the input's size: containers, small numpy headers, exception objects.
ALLOWANCE = 1 << 20
#: The slowest an input may be, in seconds (libFuzzer's ``-timeout`` catches hangs; this catches slow inputs).
TIME_LIMIT = 1.0
MEMCHECK_EVERY = max(1, int(os.environ.get("FUZZ_MEMCHECK_EVERY", "4")))
#: Bugs already reported, as ``ExceptionType@path/fragment`` (comma-separated): an exception of that type raised
#: in a file whose path contains the fragment is counted and saved once (``known-*`` beside the crashes), and
#: fuzzing goes on, so that one known bug does not stop a long run. Empty by default.
IGNORE = [tuple(x.split("@", 1)) for x in os.environ.get("FUZZ_IGNORE", "").split(",") if "@" in x]


class ContractBreach(AssertionError):
    """The reader broke its contract on this input."""


def expect_format_error(action: Callable[[], Any]) -> Any:
    """Run ``action``; a FormatError is fine unless its rule is ``internal.*``. Returns the result or None."""
    try:
        return action()
    except FormatError as e:
        if e.rule.startswith("internal."):
            raise ContractBreach(f"internal rule {e.rule}: a missing check ({e})") from e
        return None
    except RecursionError as e:
        raise ContractBreach("RecursionError escaped") from e


class Budget:
    """Checks time and (every few inputs) allocation of one input against the contract."""

    def __init__(self) -> None:
        self.count = 0
        self.slowest = 0.0
        self.tracing = False

    def run(self, data: bytes, action: Callable[[], int | None]) -> None:
        """Run ``action`` on ``data``; it returns the bytes of output it was asked to make (dequantized values),
        which are allowed on top of the input's budget."""
        self.count += 1
        trace = self.count % MEMCHECK_EVERY == 0
        base = 0
        if trace:
            if not self.tracing:
                tracemalloc.start()
                self.tracing = True
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
        modules = len(sys.modules)
        start = time.perf_counter()
        produced = 0
        try:
            produced = action() or 0
        finally:
            elapsed = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1] - base if trace else 0
            if trace:
                tracemalloc.stop()
                self.tracing = False
        if elapsed > TIME_LIMIT:
            # A shared machine stalls now and then (another process, a full garbage collection of atheris's own
            # growing heap): a slow input counts only if it is slow again when run once more.
            start = time.perf_counter()
            action()
            elapsed = min(elapsed, time.perf_counter() - start)
            if elapsed > TIME_LIMIT:
                raise ContractBreach(f"took {elapsed:.2f} s on {len(data)} bytes, twice")
        self.slowest = max(self.slowest, elapsed)
        if len(sys.modules) != modules:
            return  # a module was imported on the way (a format's reader, first used): a one-time cost, not this input's
        if peak > 2 * len(data) + 2 * produced + ALLOWANCE:
            raise ContractBreach(f"allocated {peak} bytes for a {len(data)}-byte input")


def known_signature(e: BaseException) -> str | None:
    """``Type@file:line`` of the innermost frame when ``e`` matches ``FUZZ_IGNORE``, else None."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""
    for kind, fragment in IGNORE:
        if type(e).__name__ == kind and fragment in where:
            return f"{kind}@{where}"
    return None


def save_known(sig: str, data: bytes) -> None:
    """Keep the first input hitting a known bug, beside libFuzzer's crash files."""
    prefix = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("-artifact_prefix=")), "./")
    name = "".join(c if c.isalnum() else "_" for c in sig)[-80:]
    with open(f"{prefix}known-{name}", "wb") as f:
        f.write(data)
    print(f"known bug hit (saved, fuzzing goes on): {sig}", file=sys.stderr)


def warm_up(test_one: Callable[[bytes], int | None], folders: list[str], limit: int = 200) -> None:
    """Run the seeds once untraced, so that one-time costs (lazy imports, numpy and table caches) are not
    charged to the first input that happens to be traced. Failures are left for the fuzzing run to report."""
    from gguf_construct.core.tables import GGML_TYPES
    from gguf_construct.quants import SUPPORTED, dequantize

    for t in GGML_TYPES.values():  # the lookup tables each kernel builds on first use (f16: 256 KiB, grids ...)
        if t.name in SUPPORTED:
            for order in ("little", "big"):
                with contextlib.suppress(Exception):
                    dequantize(bytes(t.type_size), t.name, byte_order=order)
    paths = sorted((os.path.join(d, n) for d in folders if os.path.isdir(d) for n in os.listdir(d)), key=os.path.getsize)
    for path in paths[:limit]:
        with open(path, "rb") as f:
            data = f.read()
        with contextlib.suppress(Exception):
            test_one(data)


def main(test_one: Callable[[bytes], int | None]) -> None:
    """Run a harness: ``test_one(data)`` under the budget, through atheris (argv as libFuzzer takes it).

    ``test_one`` returns None, or the size of the output it legitimately made (see ``Budget.run``).
    """
    budget = Budget()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    warm_up(test_one, [a for a in sys.argv[1:] if not a.startswith("-")])

    seen: set[str] = set()

    def entry(data: bytes) -> None:
        try:
            budget.run(data, lambda: test_one(data))
        except Exception as e:
            sig = known_signature(e)
            if sig is None:
                raise
            if sig not in seen:
                seen.add(sig)
                save_known(sig, data)

    atheris.Setup(sys.argv, entry, **structured_mutator())
    atheris.Fuzz()


def structured_mutator() -> dict[str, Any]:
    """With FUZZ_STRUCTURED=1, libFuzzer mutates through gguf-construct's structure-aware mutator (parsed-file
    edits laid out with consistent offsets, reader-breaker classes) instead of its own byte mutations."""
    if os.environ.get("FUZZ_STRUCTURED") != "1":
        return {}
    from gguf_construct.testing.fuzzing.structured import crossover, mutate

    return {"custom_mutator": mutate, "custom_crossover": crossover}
