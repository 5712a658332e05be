"""What a pair of answers means: findings with a class and a root-cause signature.

Classes, most serious first (:data:`CLASSES`):

- ``crash`` — a signal (SIGSEGV, SIGBUS, SIGILL, an abort without a known cause), a sanitizer's memory-error
  report, an UndefinedBehaviorSanitizer ``runtime error:`` (whatever the reader's verdict: printed by a reader that
  went on to accept or reject the file, it is a finding all the same) or an arithmetic trap (SIGFPE and ASan's FPE
  report alike: one kind, ``arithmetic-trap``); the signature names the signal or report kind and the first frame in
  the reader's own code;
- ``dos`` — denial of service by design flaw rather than memory error: an assertion abort (``GGML_ASSERT``,
  ``GGML_ABORT``, libc's ``assert``), an uncaught C++ exception (``std::length_error``);
- ``hang`` — no answer within the time limit;
- ``memory`` — the memory cap reached, MemoryError, an uncaught ``std::bad_alloc`` or a sanitizer's
  out-of-memory report (an allocation too big to honour, not memory corruption; one kind per place that asked); a reader that asked for an
  absurd allocation, was refused and then rejected the file cleanly is ``memory`` too, marked ``refused``;
- ``accepted-invalid`` — the other reader accepts a file we reject: one kind per rule broken;
- ``rejected-valid`` — the other reader rejects a file we accept: one kind per reason it gives;
- ``value-mismatch`` — both accept and read different things: one kind per key, per tensor field, per dequantized type;
- ``adapter-representation`` — the other side's answer is not in the view's conventions (a type label or value
  shape we do not know): a fault of the adapter, not of either reader.

Crash, dos, hang and memory are judged for each reader on its own, before any comparison: a file both readers
reject still yields a crash finding when one of them died on it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .adapters import ADAPTERS
from .targets import Answer

CLASSES = ("crash", "dos", "hang", "memory", "accepted-invalid", "rejected-valid", "value-mismatch", "adapter-representation")
#: The top-level keys of a view; any of them, and a tensor's shape, may be the string "unknown".
VIEW_KEYS = ("version", "alignment", "data_offset", "kv", "tensors", "dequant")
UNKNOWN = "unknown"
#: Dequantized values of this many types differing in one file are taken as one cause of the file.
MANY_TYPES = 3
#: Frames that belong to the sanitizer runtime, libc or the C++ runtime, skipped when naming where a crash is.
_RUNTIME_FRAME = re.compile(
    r"__asan|__ubsan|__sanitizer|__interceptor|__interception|asan_|ubsan_|libc\.so|libstdc\+\+|libc\+\+|"
    r"libgcc|pthread_kill|\b(raise|abort|memcpy|memmove|memset|strlen|malloc|calloc|realloc|free|operator new|operator delete)\b"
)
#: The line a deliberate abort prints before SIGABRT: ``GGML_ABORT(...)`` (``file.cpp:N: message``, as ggml_abort
#: formats it) and libc's ``assert`` (``prog: file.c:N: func: Assertion `x' failed.``). A sanitizer's
#: ``file:N:C: runtime error`` has a column, so it does not match.
_ABORT_LINE = re.compile(r"(?:^|[\s/:])([\w.\-]+\.(?:c|cc|cpp|h|hpp)):(\d+): (?!runtime error)(.+)$", re.M)
_SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 5: "SIGTRAP"}


@dataclass(frozen=True)
class Finding:
    """One finding on one file: ``signature`` groups the same root cause across files."""

    cls: str
    signature: str
    explanation: str


# -- crashes -------------------------------------------------------------------------------------------------
#: what differs between two builds of the same code in an unsymbolized frame: the build id and the module offset
_BUILD_ID = re.compile(r" \(BuildId: [0-9a-f]+\)")
_MODULE_OFFSET = re.compile(r"\(?([^()/]+)\+0x[0-9a-f]+\)")


def _frames(text: str) -> list[str]:
    """Stack frames of a sanitizer report or a Python traceback, innermost first, as ``function (file:line)``."""
    frames = []
    text = _BUILD_ID.sub("", text)
    for m in re.finditer(r"^\s*#\d+ 0x[0-9a-f]+ in (.+?) (\S+?)(?::(\d+))?(?::\d+)?\s*$", text, re.M):
        func, where, line = m.group(1), m.group(2).rsplit("/", 1)[-1], m.group(3)
        module = _MODULE_OFFSET.fullmatch(where)
        if module:  # not symbolized, "(/path/to/module+0x1535ad)": the module's name, the same in every build
            where, line = module.group(1), None
        frames.append(f"{func} ({where}{':' + line if line else ''})")
    if not frames:  # faulthandler / traceback: innermost last in a traceback, first in faulthandler's dump
        dump = re.findall(r'^\s*File "([^"]+)", line (\d+),? in (\S+)', text, re.M)
        frames = [f"{func} ({path.rsplit('/', 1)[-1]}:{line})" for path, line, func in dump]
        if "most recent call last" in text:
            frames.reverse()
        elif dump:  # faulthandler: a signal inside native code, called from the innermost Python frame
            called = _native_call(dump[0][0], int(dump[0][1]))
            if called:  # no line number: the kind stays the same when the caller's file is edited
                frames[0] = f"{called} (called from {dump[0][0].rsplit('/', 1)[-1]})"
    return frames


def _native_call(path: str, line: int) -> str | None:
    """The function a Python line calls through a binding (``ggml.gguf_init_from_file(...)`` names
    ``gguf_init_from_file``): where a reader died of a signal is that native function, not the Python frame that
    called it. The first ``name.attribute(`` call on the line; None when the source is not readable or has none."""
    import linecache

    m = re.search(r"\b[A-Za-z_]\w*\.([A-Za-z_]\w*)\s*\(", linecache.getline(path, line))
    return m.group(1) if m else None


def first_frame(text: str) -> str:
    """The innermost frame in the reader's own code (runtime and sanitizer frames skipped), or '?'."""
    frames = _frames(text)
    own = [f for f in frames if not _RUNTIME_FRAME.search(f)]
    return (own or frames or ["?"])[0]


def _signal_of(code: int | None) -> str | None:
    if code is None:
        return None
    if code < 0:
        return _SIGNALS.get(-code, f"signal {-code}")
    if code > 128 and code - 128 in _SIGNALS:  # through a shell
        return _SIGNALS[code - 128]
    return None


def failure(answer: Answer, reader: str) -> Finding | None:
    """The crash, dos, hang or memory finding in one reader's answer, or None when it answered in an orderly way."""
    text = answer.stderr or ""
    if answer.status == "hang":
        return Finding("hang", f"hang/{reader}", f"{reader} gave no answer in time ({answer.error})")
    m = re.search(r"ERROR: (AddressSanitizer|MemorySanitizer|ThreadSanitizer|LeakSanitizer): ([\w-]+)", text)
    # leaks are not looked for (detect_leaks=0 is the default we set); an ABRT report (handle_abort=1) is a deliberate
    # abort, judged by its message below as without the sanitizer
    if m and m.group(1) != "LeakSanitizer" and m.group(2) != "ABRT":
        # the SUMMARY line names the kind where the ERROR line does not ("requested allocation size ... exceeds")
        summary = re.search(r"SUMMARY: \w+Sanitizer: ([\w-]+)", text[m.start() :])
        kind = summary.group(1) if summary else m.group(2)
        frame = first_frame(text[m.start() :])
        if (
            kind in ("allocation-size-too-big", "out-of-memory", "calloc-overflow", "rss-limit-exceeded", "allocator")
            or "out of memory" in text[m.start() : m.start() + 200]
        ):
            return Finding(
                "memory",
                f"memory/{reader}/{m.group(1)}:{kind}@{frame}",
                f"{reader}: {m.group(1)} {kind} (an allocation it could not honour), at {frame}",
            )
        if kind == "FPE":
            return _arithmetic_trap(reader, frame)
        return Finding("crash", f"crash/{reader}/{kind}@{frame}", f"{reader}: {m.group(1)} {kind} in {frame}")
    ubsan = _ubsan(text, reader)
    if ubsan is not None and answer.status != "hang":
        return ubsan
    if answer.status == "memory":
        return Finding("memory", f"memory/{reader}", f"{reader} ran past the memory cap ({answer.error})")
    m = re.search(r"GGML_ASSERT\((.*)\) failed", text)
    if m:
        assert_at = re.search(r"([\w.\-]+\.(?:c|cpp|h|hpp)):(\d+): GGML_ASSERT", text)
        where = f"{assert_at.group(1)}:{assert_at.group(2)}" if assert_at else first_frame(text)
        return Finding("dos", f"dos/{reader}/GGML_ASSERT({m.group(1)})@{where}", f"{reader} aborts on GGML_ASSERT({m.group(1)}) at {where}")
    m = re.search(r"terminate called after throwing an instance of '([^']+)'|libc\+\+abi: terminating.* of type ([\w:]+)", text)
    if m:
        exc = m.group(1) or m.group(2)
        if exc == "std::bad_alloc":
            return Finding(
                "memory",
                f"memory/{reader}/uncaught std::bad_alloc",
                f"{reader} dies of an uncaught std::bad_alloc (an allocation it could not honour)",
            )
        return Finding("dos", f"dos/{reader}/uncaught {exc}", f"{reader} dies of an uncaught {exc}")
    m = _ABORT_LINE.search(text)
    if m and _signal_of(answer.returncode) == "SIGABRT":
        what = re.sub(r"-?\d+", "N", m.group(3).strip())[:80]
        where = f"{m.group(1)}:{m.group(2)}"
        return Finding("dos", f"dos/{reader}/abort({what})@{where}", f"{reader} aborts with '{m.group(3).strip()[:120]}' at {where}")
    sig = _signal_of(answer.returncode)
    if sig == "SIGFPE":
        return _arithmetic_trap(reader, first_frame(text))
    if answer.status == "crash":
        name = sig or (f"exit status {answer.returncode}" if answer.returncode is not None else "died")
        frame = first_frame(text)
        return Finding("crash", f"crash/{reader}/{name}@{frame}", f"{reader} dies ({name}) at {frame}")
    if answer.status == "broken":
        return Finding(
            "adapter-representation",
            f"adapter-representation/{reader}/protocol",
            f"{reader}'s answer is not the protocol's: {answer.error}",
        )
    return None


def _ubsan(text: str, reader: str) -> Finding | None:
    """The first UndefinedBehaviorSanitizer report (``file:line:col: runtime error: what``), or None."""
    m = re.search(r"runtime error: (.+)", text)
    if m is None:
        return None
    what = re.sub(r"0x[0-9a-fA-F]+|-?\d+", "N", m.group(1))[:80]
    line = re.search(r"([\w.\-]+\.(?:c|cc|cpp|h|hpp)):(\d+):\d+: runtime error", text)
    at = f"{line.group(1)}:{line.group(2)}" if line else first_frame(text[m.start() :])
    return Finding("crash", f"crash/{reader}/ubsan:{what}@{at}", f"{reader}: UndefinedBehaviorSanitizer: {m.group(1)[:120]} at {at}")


def _arithmetic_trap(reader: str, frame: str) -> Finding:
    """SIGFPE, or ASan's report of it: an integer division by zero (or INT_MIN / -1), one kind either way."""
    return Finding(
        "crash", f"crash/{reader}/arithmetic-trap@{frame}", f"{reader}: arithmetic trap (SIGFPE: an integer division by zero) at {frame}"
    )


def refusal_note(answer: Answer, reader: str) -> Finding | None:
    """An allocator's honest refusal: the sanitizer refused an absurd allocation (``allocator_may_return_null``) and
    the reader went on to answer. Not a memory error; still worth knowing, as its own kind."""
    m = re.search(
        r"WARNING: AddressSanitizer failed to allocate (0x[0-9a-f]+) bytes|requested allocation size (0x[0-9a-f]+)", answer.stderr or ""
    )
    if m and answer.status in ("accepted", "rejected"):
        size = int(m.group(1) or m.group(2), 16)
        return Finding(
            "memory", f"memory/{reader}/refused", f"{reader} asked for {size} bytes, was refused by the allocator and handled it"
        )
    return None


# -- views -----------------------------------------------------------------------------------------------
def _normal_error(text: str) -> str:
    """A rejection message with its particulars (numbers, quoted names, paths) blanked: the reason, not the case."""
    first = next((line for line in text.strip().splitlines() if line.strip()), "")
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'S'", first)
    first = re.sub(r"(/[\w.\-]+)+", "PATH", first)
    return re.sub(r"0x[0-9a-fA-F]+|-?\d+", "N", first)[:120]


def _cstr(value: Any) -> Any:
    """A string as a C reader hands it out (up to the first NUL)."""
    return value.split("\0")[0] if isinstance(value, str) else value


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def _kv_map(view: dict[str, Any]) -> dict[str, tuple[Any, Any]] | None:
    kv = view.get("kv", UNKNOWN)
    if kv == UNKNOWN:
        return None
    if isinstance(kv, dict):  # {"key": {"type": ..., "value": ...}} (info --json keyed by name)
        return {k: (v.get("type"), v.get("value", UNKNOWN)) if isinstance(v, dict) else (UNKNOWN, v) for k, v in kv.items()}
    return {row[0]: (row[1], row[2]) for row in kv if isinstance(row, list | tuple) and len(row) == 3}


def _tensor_map(view: dict[str, Any]) -> dict[str, list[Any]] | None:
    ts = view.get("tensors", UNKNOWN)
    if ts == UNKNOWN:
        return None
    return {row[0]: list(row) + [UNKNOWN] * (5 - len(row)) for row in ts if isinstance(row, list | tuple) and row}


def _known(a: Any, b: Any) -> bool:
    return a != UNKNOWN and b != UNKNOWN and a is not None and b is not None


def _same_shape(a: Any, b: Any) -> bool:
    """Whether two JSON values have the same representation (both ints, both strings, lists of such...)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool | int) and isinstance(b, bool | int)
    if isinstance(a, list) and isinstance(b, list):
        return not a or not b or _same_shape(a[0], b[0])
    return type(a) is type(b) or (isinstance(a, int) and isinstance(b, int))


def compare_views(ours: dict[str, Any], theirs: dict[str, Any], other: str) -> list[Finding]:
    """Every difference between two accepted views (empty when they agree), one finding per root cause.

    Conventions that are not disagreements are normalised away: "unknown" matches anything; ggml hands strings out
    up to the first NUL; gguf-py loses the element type of an empty array; without tensors the data offset is moot."""
    out: list[Finding] = []
    c_strings = other in ADAPTERS and ADAPTERS[other].c_strings
    for key in ("version", "alignment"):
        a, b = ours.get(key, UNKNOWN), theirs.get(key, UNKNOWN)
        if _known(a, b) and a != b:
            out.append(Finding("value-mismatch", f"value-mismatch/{other}/header.{key}", f"{key}: ours {a}, {other} {b}"))
    if ours.get("tensors") and theirs.get("tensors"):
        a, b = ours.get("data_offset", UNKNOWN), theirs.get("data_offset", UNKNOWN)
        if _known(a, b) and a != b:
            out.append(Finding("value-mismatch", f"value-mismatch/{other}/header.data_offset", f"data_offset: ours {a}, {other} {b}"))
    ka, kb = _kv_map(ours), _kv_map(theirs)
    if ka is not None and kb is not None:
        missing, extra = [k for k in ka if k not in kb], [k for k in kb if k not in ka]
        if missing or extra:
            out.append(
                Finding(
                    "value-mismatch", f"value-mismatch/{other}/kv.keys", f"keys ours only {_short(missing)}, {other} only {_short(extra)}"
                )
            )
        for key in ka.keys() & kb.keys():
            (ta, va), (tb, vb) = ka[key], kb[key]
            if ta.startswith("arr[") and tb == "arr[None]" and (va == [] or ta == "arr[arr]"):
                continue  # gguf-py keeps no element type for an empty array (nested ones: the view has no values)
            if _known(ta, tb) and ta != tb:
                cls = "value-mismatch" if isinstance(tb, str) and (tb in _LABELS or tb.startswith("arr[")) else "adapter-representation"
                out.append(Finding(cls, f"{cls}/{other}/kv.type:{key}", f"type of {key!r}: ours {ta}, {other} {tb}"))
                continue
            if c_strings:
                va = [_cstr(v) for v in va] if isinstance(va, list) and ta == "arr[str]" else _cstr(va)
            if _known(va, vb) and va != vb:
                if not _same_shape(va, vb):
                    out.append(
                        Finding(
                            "adapter-representation",
                            f"adapter-representation/{other}/kv.value:{ta}",
                            f"value of {key!r} ({ta}) in another representation: ours {_short(va)}, {other} {_short(vb)}",
                        )
                    )
                else:
                    out.append(
                        Finding(
                            "value-mismatch",
                            f"value-mismatch/{other}/kv.value:{key}",
                            f"value of {key!r} ({ta}): ours {_short(va)}, {other} {_short(vb)}",
                        )
                    )
    ta_, tb_ = _tensor_map(ours), _tensor_map(theirs)
    if ta_ is not None and tb_ is not None:
        missing, extra = [k for k in ta_ if k not in tb_], [k for k in tb_ if k not in ta_]
        if missing or extra:
            out.append(
                Finding(
                    "value-mismatch",
                    f"value-mismatch/{other}/tensor.names",
                    f"tensors ours only {_short(missing)}, {other} only {_short(extra)}",
                )
            )
        fields: dict[str, list[str]] = {}
        for name in ta_.keys() & tb_.keys():
            a, b = ta_[name], tb_[name]
            for i, what in enumerate(("name", "type", "shape", "offset", "nbytes")):
                if i and _known(a[i], b[i]) and a[i] != b[i]:
                    fields.setdefault(what, []).append(f"{name!r} ({a[1]}): ours {_short(a[i], 30)}, {other} {_short(b[i], 30)}")
        for what, cases in sorted(fields.items()):
            out.append(
                Finding(
                    "value-mismatch",
                    f"value-mismatch/{other}/tensor.{what}",
                    f"tensor {what} differs for {len(cases)} tensor(s), e.g. {cases[0]}",
                )
            )
    da, db = ours.get("dequant", {}), theirs.get("dequant", {})
    if isinstance(da, dict) and isinstance(db, dict):
        compared = [n for n in da.keys() & db.keys() if _known(da[n], db[n])]
        differ = [n for n in compared if da[n] != db[n]]
        types = sorted({str((ta_ or {}).get(n, [n, "?"])[1]) for n in differ})
        if differ and ours.get("byte_order") == "big":
            # a big-endian file whose values differ: the other reader's byte order, whatever the types
            out.append(
                Finding(
                    "value-mismatch",
                    f"value-mismatch/{other}/dequant:big-endian",
                    f"dequantized values of a big-endian file differ ({len(differ)} tensors: {', '.join(types)})",
                )
            )
        elif len(types) >= MANY_TYPES or (len(types) > 1 and len(differ) == len(compared)):
            # many types differ at once (or every tensor): a cause of the file (byte order, data offset), not of
            # each type's code; one kind, not one per type
            out.append(
                Finding(
                    "value-mismatch",
                    f"value-mismatch/{other}/dequant:many-types",
                    f"dequantized values of {len(differ)} tensors of {len(types)} types differ ({', '.join(types)})",
                )
            )
        else:
            for kind in types:
                out.append(
                    Finding("value-mismatch", f"value-mismatch/{other}/dequant:{kind}", f"dequantized values of {kind} tensors differ")
                )
    return out


_LABELS = {"u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64", "bool", "str", "arr"}


def findings(ours: Answer, theirs: Answer, other: str) -> list[Finding]:
    """Every finding on one file: each reader's own failures first, then (when both answered) the disagreements."""
    out = []
    for answer, reader in ((ours, "ours"), (theirs, other)):
        f = failure(answer, reader)
        if f is not None:
            out.append(f)
        elif (note := refusal_note(answer, reader)) is not None:
            out.append(note)
    if any(a.status not in ("accepted", "rejected") for a in (ours, theirs)):
        return out
    if ours.status == "rejected" and ours.rule is None:  # our reader raised something that is not a FormatError
        out.append(
            Finding("crash", f"crash/ours/{_normal_error(ours.error)}@{ours.where}", f"our reader raised {ours.error} at {ours.where}")
        )
        return out
    if theirs.ok and not ours.ok:
        out.append(
            Finding(
                "accepted-invalid", f"accepted-invalid/{other}/{ours.rule}", f"{other} accepts a file that breaks {ours.rule}: {ours.error}"
            )
        )
    elif ours.ok and not theirs.ok:
        reason = _normal_error(theirs.error)
        where = f"@{theirs.where}" if theirs.where else ""
        out.append(
            Finding("rejected-valid", f"rejected-valid/{other}/{reason}{where}", f"{other} rejects a file we accept: {theirs.error[:200]}")
        )
    elif ours.ok and theirs.ok:
        assert ours.view is not None and theirs.view is not None
        out.extend(compare_views(ours.view, theirs.view, other))
    return out
